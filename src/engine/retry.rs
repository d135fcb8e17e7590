//! Retry policy: which failures are re-sent, when, and how often. Pure and deterministic
//! (the jitter comes from a seeded generator), so every row of the decision table is testable.
//!
//! A call is re-sent only when all of these hold: the failure is a transient transport failure;
//! the host did not cancel it; it is safe to send twice (read-only, idempotent, or carrying an
//! idempotency key) or it provably never left (the connection was never made, the request was
//! never written); attempts remain; and the backoff still fits before the deadline.

use std::time::{Duration, Instant};

use crate::config::RetryPolicy;
use crate::error::{CallError, CloseReason, LocalError, TransportError};
use crate::proto::json::{self, Kind};
use crate::proto::jsonrpc::write_json_str;
use crate::proto::mcp::Method;

/// How safe a call is to send more than once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Idempotency {
    /// Reads nothing changes (`readOnlyHint`, listings, resource reads, prompts).
    Read,
    /// Sending it twice has the effect of sending it once (`idempotentHint`).
    Idempotent,
    /// A write carrying an idempotency key the server deduplicates on.
    Keyed,
    /// Anything else: never re-sent automatically.
    Unknown,
}

impl Idempotency {
    /// Whether a second delivery is harmless.
    pub fn retry_safe(self) -> bool {
        !matches!(self, Self::Unknown)
    }
}

/// Where a failed attempt's request was when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Never written (connect failed, still queued when the process died).
    NotSent,
    /// Written: the server may have acted on it.
    MaybeDelivered,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Send again after this delay.
    Retry(Duration),
    /// End the call with its error.
    Fail,
    /// End the call with `DeliveryUnknown`: it may have run, and re-sending is not safe.
    DeliveryUnknown,
}

/// A transport failure that a later attempt may not meet.
pub(crate) fn is_transient(e: &CallError) -> bool {
    match e {
        CallError::Transport(t) => match t {
            TransportError::ProcessExit(_)
            | TransportError::ConnectionLost
            | TransportError::ConnectFailed(_) => true,
            TransportError::HttpStatus(s) => matches!(s, 408 | 429 | 500..=599),
            // The proxy could not reach the server, or is overloaded; a refusal (403, 407)
            // stands until the host changes something.
            TransportError::ProxyRefused(s) => matches!(s, 502..=504),
            TransportError::Closed(r) => {
                matches!(r, CloseReason::WriteFailed | CloseReason::ReadFailed)
            }
            TransportError::Tls(_)
            | TransportError::BadResponse
            | TransportError::SessionExpired
            | TransportError::ClosedByServer => false,
        },
        CallError::Protocol(_) | CallError::Peer(_) | CallError::Local(_) => false,
    }
}

/// A transport failure that ends the reply without saying whether the request was processed,
/// though no retry is made for it. A 2xx that did not carry the reply (an empty body, text,
/// JSON answering another id) says the server took the request: no more.
pub(super) fn reply_lost(e: &CallError) -> bool {
    matches!(
        e,
        CallError::Transport(
            TransportError::Tls(_)
                | TransportError::BadResponse
                | TransportError::ClosedByServer
                | TransportError::HttpStatus(200..=299)
        )
    )
}

/// One row of the decision table. `attempt` counts from 1 (the attempt that just failed);
/// `expected` is how long an attempt is expected to take.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decide(
    policy: &RetryPolicy,
    class: Idempotency,
    error: &CallError,
    delivery: Delivery,
    attempt: u32,
    now: Instant,
    deadline: Instant,
    expected: Duration,
    random: u64,
) -> Decision {
    let safe = class.retry_safe() || delivery == Delivery::NotSent;
    if !is_transient(error) || !safe || attempt >= policy.max_attempts {
        return without_retry(class, error, delivery);
    }
    let delay = backoff(policy, attempt, random);
    if crate::time::later(now, delay.saturating_add(expected)) >= deadline {
        // No room before the deadline: the last error stands (a write stays "unknown").
        return if delivery == Delivery::MaybeDelivered && !class.retry_safe() {
            Decision::DeliveryUnknown
        } else {
            Decision::Fail
        };
    }
    Decision::Retry(delay)
}

/// How a failed attempt ends when it does not go again (no retry allowed, or none left, or
/// the transport closed for good): a reply the transport lost after a write may have gone
/// is `DeliveryUnknown`, else the error stands. A broken response (unreadable framing, a TLS
/// alert, the server closing its end) says no more than a lost connection does about
/// whether the write was processed.
pub(super) fn without_retry(class: Idempotency, error: &CallError, delivery: Delivery) -> Decision {
    let lost = is_transient(error) || reply_lost(error);
    if lost && delivery == Delivery::MaybeDelivered && !class.retry_safe() {
        Decision::DeliveryUnknown
    } else {
        Decision::Fail
    }
}

/// `error` as the `DeliveryUnknown` a [`Decision::DeliveryUnknown`] ends the call with.
pub(super) fn delivery_unknown(error: CallError) -> CallError {
    let cause = match error {
        CallError::Transport(t) => t,
        _ => TransportError::ConnectionLost,
    };
    CallError::Local(LocalError::DeliveryUnknown(Box::new(cause)))
}

/// `min(max, base * 2^(attempt-1))` plus up to `jitter_percent` of it.
pub(crate) fn backoff(policy: &RetryPolicy, attempt: u32, random: u64) -> Duration {
    let exp = attempt.saturating_sub(1).min(20);
    let raw = policy.base_delay.saturating_mul(1 << exp).min(policy.max_delay);
    // In u128: a delay of centuries (a configuration's "never") times the percentage is past
    // u64.
    let span = raw.as_micros() * u128::from(policy.jitter_percent.min(100)) / 100;
    let jitter_span = u64::try_from(span).unwrap_or(u64::MAX);
    let jitter = if jitter_span == 0 { 0 } else { random % jitter_span.saturating_add(1) };
    raw.saturating_add(Duration::from_micros(jitter))
}

/// A small deterministic generator (xorshift64*) for jitter: seeded from the config, so a
/// test replays the same delays.
#[derive(Debug, Clone)]
pub(crate) struct Jitter(u64);

impl Jitter {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Writes the arguments object, with the idempotency key added under `field` unless the
/// caller already put one there.
pub(super) fn write_arguments(out: &mut Vec<u8>, arguments: &str, field: &str, key: Option<&str>) {
    let Some(key) = key else {
        out.extend_from_slice(arguments.as_bytes());
        return;
    };
    let trimmed = arguments.trim();
    let already = json::parse(trimmed.as_bytes())
        .is_ok_and(|a| a.kind() == Kind::Object && a.members().any(|(k, _)| k.eq_str(field)));
    let inner = trimmed.strip_prefix('{').map(str::trim_start);
    match inner {
        Some(rest) if !already => {
            out.push(b'{');
            write_json_str(out, field);
            out.push(b':');
            write_json_str(out, key);
            if !rest.starts_with('}') {
                out.push(b',');
            }
            out.extend_from_slice(rest.as_bytes());
        }
        _ => out.extend_from_slice(arguments.as_bytes()),
    }
}

/// How safe a new call is to send twice: the caller's word (`given`) first, then an
/// idempotency key (`keyed`), then the tool's annotations; reads of lists, resources and
/// prompts are reads. `tool_hint` is what the last listing's annotations say about the tool
/// being called.
pub(super) fn classify(
    method: Method,
    given: Option<Idempotency>,
    keyed: bool,
    tool_hint: Option<Idempotency>,
) -> Idempotency {
    if let Some(c) = given {
        return c;
    }
    match method {
        Method::ToolsCall if keyed => Idempotency::Keyed,
        Method::ToolsCall => tool_hint.unwrap_or(Idempotency::Unknown),
        // A subscription is re-opened by the host, never re-sent behind its back.
        // An extension's method: nothing is known of it.
        Method::Listen | Method::Initialize | Method::Extension => Idempotency::Unknown,
        _ => Idempotency::Read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{LocalError, ProcessExit, RpcError};

    pub(super) fn policy() -> RetryPolicy {
        RetryPolicy { jitter_percent: 0, ..RetryPolicy::default() }
    }

    pub(super) fn exit() -> CallError {
        CallError::Transport(TransportError::ProcessExit(ProcessExit {
            code: Some(1),
            signal: None,
            stderr_tail: "".into(),
        }))
    }

    /// The decision table: every class against every error kind, with and without room
    /// before the deadline, delivered or not.
    #[test]
    pub(super) fn decision_table() {
        use Decision::*;
        use Idempotency::*;
        let now = Instant::now();
        let roomy = now + Duration::from_secs(60);
        let tight = now + Duration::from_millis(50);
        let errors: Vec<(&str, CallError)> = vec![
            ("exit", exit()),
            ("reset", CallError::Transport(TransportError::ConnectionLost)),
            ("503", CallError::Transport(TransportError::HttpStatus(503))),
            ("404", CallError::Transport(TransportError::HttpStatus(404))),
            (
                "tls",
                CallError::Transport(TransportError::Tls(crate::error::TlsFailure::UnknownIssuer)),
            ),
            ("proxy 502", CallError::Transport(TransportError::ProxyRefused(502))),
            ("proxy 407", CallError::Transport(TransportError::ProxyRefused(407))),
            ("rpc", CallError::Protocol(RpcError::from_raw(-32602, "bad", None))),
            ("garbled", CallError::Transport(TransportError::BadResponse)),
            ("gone", CallError::Transport(TransportError::SessionExpired)),
            ("cancel", CallError::Local(LocalError::Cancelled)),
            ("deadline", CallError::Local(LocalError::DeadlineExceeded)),
        ];
        let ms100 = Retry(Duration::from_millis(100));
        // (error, class, delivery, deadline) -> decision
        let table: &[(&str, Idempotency, Delivery, Instant, Decision)] = &[
            ("exit", Read, Delivery::MaybeDelivered, roomy, ms100),
            ("exit", Idempotent, Delivery::MaybeDelivered, roomy, ms100),
            ("exit", Keyed, Delivery::MaybeDelivered, roomy, ms100),
            ("exit", Unknown, Delivery::MaybeDelivered, roomy, DeliveryUnknown),
            ("exit", Unknown, Delivery::NotSent, roomy, ms100),
            ("exit", Read, Delivery::MaybeDelivered, tight, Fail),
            ("exit", Unknown, Delivery::MaybeDelivered, tight, DeliveryUnknown),
            ("reset", Read, Delivery::MaybeDelivered, roomy, ms100),
            ("reset", Unknown, Delivery::MaybeDelivered, roomy, DeliveryUnknown),
            ("503", Idempotent, Delivery::MaybeDelivered, roomy, ms100),
            ("503", Unknown, Delivery::MaybeDelivered, roomy, DeliveryUnknown),
            ("404", Read, Delivery::MaybeDelivered, roomy, Fail),
            ("tls", Read, Delivery::NotSent, roomy, Fail),
            // A reply lost to a broken response or a TLS alert: a read fails as it is (no
            // retry for it), a write's delivery is unknown (it ended as the raw error).
            ("tls", Unknown, Delivery::MaybeDelivered, roomy, DeliveryUnknown),
            ("garbled", Read, Delivery::MaybeDelivered, roomy, Fail),
            ("garbled", Unknown, Delivery::MaybeDelivered, roomy, DeliveryUnknown),
            ("garbled", Unknown, Delivery::NotSent, roomy, Fail),
            // A proxy that could not reach the server: the request never left, so a write
            // goes again too. One that wants credentials refuses again until the host acts.
            ("proxy 502", Unknown, Delivery::NotSent, roomy, ms100),
            ("proxy 407", Read, Delivery::NotSent, roomy, Fail),
            // Refusals say the request was not processed: as they are.
            ("gone", Unknown, Delivery::MaybeDelivered, roomy, Fail),
            ("404", Unknown, Delivery::MaybeDelivered, roomy, Fail),
            ("rpc", Read, Delivery::MaybeDelivered, roomy, Fail),
            ("rpc", Unknown, Delivery::MaybeDelivered, roomy, Fail),
            ("cancel", Read, Delivery::MaybeDelivered, roomy, Fail),
            ("cancel", Unknown, Delivery::MaybeDelivered, roomy, Fail),
            ("deadline", Read, Delivery::MaybeDelivered, roomy, Fail),
        ];
        for (name, class, delivery, deadline, want) in table {
            let e = &errors.iter().find(|(n, _)| n == name).unwrap().1;
            let got = decide(&policy(), *class, e, *delivery, 1, now, *deadline, Duration::ZERO, 0);
            assert_eq!(got, *want, "{name} {class:?} {delivery:?}");
        }
    }

    #[test]
    pub(super) fn attempts_are_bounded_and_backoff_doubles_up_to_the_cap() {
        let now = Instant::now();
        let far = now + Duration::from_secs(3600);
        let p = RetryPolicy { max_attempts: 6, max_delay: Duration::from_millis(350), ..policy() };
        let delays: Vec<Decision> = (1..=6)
            .map(|a| {
                decide(
                    &p,
                    Idempotency::Read,
                    &exit(),
                    Delivery::MaybeDelivered,
                    a,
                    now,
                    far,
                    Duration::ZERO,
                    0,
                )
            })
            .collect();
        let ms = |m| Decision::Retry(Duration::from_millis(m));
        assert_eq!(delays, [ms(100), ms(200), ms(350), ms(350), ms(350), Decision::Fail]);
    }

    #[test]
    pub(super) fn the_expected_duration_counts_against_the_deadline() {
        let now = Instant::now();
        let deadline = now + Duration::from_millis(500);
        let e = exit();
        let fits = decide(
            &policy(),
            Idempotency::Read,
            &e,
            Delivery::MaybeDelivered,
            1,
            now,
            deadline,
            Duration::from_millis(300),
            0,
        );
        assert_eq!(fits, Decision::Retry(Duration::from_millis(100)));
        let too_slow = decide(
            &policy(),
            Idempotency::Read,
            &e,
            Delivery::MaybeDelivered,
            1,
            now,
            deadline,
            Duration::from_millis(400),
            0,
        );
        assert_eq!(too_slow, Decision::Fail);
    }

    /// A delay of centuries (a configuration's way of saying "never") with jitter: the span
    /// multiplied past u64 (a panic in a debug build, a wrapped jitter otherwise).
    #[test]
    fn a_huge_delay_gets_its_jitter_without_overflow() {
        let huge = Duration::from_secs(u64::MAX / 1_000);
        let p = RetryPolicy {
            base_delay: huge,
            max_delay: huge,
            jitter_percent: 20,
            ..RetryPolicy::default()
        };
        let d = backoff(&p, 1, u64::MAX - 1);
        assert!(d >= huge && d <= huge + huge / 5, "{d:?}");
    }

    #[test]
    pub(super) fn jitter_is_bounded_and_deterministic() {
        let p = RetryPolicy { jitter_percent: 20, ..RetryPolicy::default() };
        let mut a = Jitter::new(7);
        let mut b = Jitter::new(7);
        for attempt in 1..5 {
            let (ra, rb) = (a.next(), b.next());
            assert_eq!(ra, rb);
            let d = backoff(&p, attempt, ra);
            let base = backoff(&RetryPolicy { jitter_percent: 0, ..p }, attempt, 0);
            assert!(d >= base && d <= base + base / 5, "{d:?} vs {base:?}");
        }
    }
}

#[cfg(test)]
mod argument_tests {
    use super::*;

    pub(super) fn args(a: &str, key: Option<&str>) -> String {
        let mut out = Vec::new();
        write_arguments(&mut out, a, "idempotency_key", key);
        String::from_utf8(out).unwrap()
    }

    #[test]
    pub(super) fn idempotency_keys_are_placed_in_the_arguments() {
        assert_eq!(args(r#"{"a":1}"#, None), r#"{"a":1}"#);
        assert_eq!(args(r#"{"a":1}"#, Some("k-1")), r#"{"idempotency_key":"k-1","a":1}"#);
        assert_eq!(args(" { } ", Some("k")), r#"{"idempotency_key":"k"}"#);
        assert_eq!(
            args(r#"{"idempotency_key":"mine"}"#, Some("k")),
            r#"{"idempotency_key":"mine"}"#
        );
        // The caller's key is found however it is written, and only at the top level.
        assert_eq!(
            args(r#"{"idempotency\u005fkey":1}"#, Some("k")),
            r#"{"idempotency\u005fkey":1}"#
        );
        assert_eq!(
            args(r#"{"a":{"idempotency_key":1}}"#, Some("k")),
            r#"{"idempotency_key":"k","a":{"idempotency_key":1}}"#
        );
    }
}
