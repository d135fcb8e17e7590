//! Supervised restart of a crashed stdio server: the backoff between processes and crash-loop
//! detection.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use crate::config::RestartPolicy;
use crate::error::TransportError;

/// The most exits a crash window counts: a `crash_loop_exits` above it never degrades.
const MAX_COUNTED_EXITS: u32 = 64;

/// Restart bookkeeping for a stdio server.
#[derive(Debug, Default)]
pub(crate) struct RestartState {
    /// Recent exits, for crash-loop detection.
    exits: SmallVec<[Instant; 8]>,
    /// When to ask the driver for a new process.
    restart_at: Option<Instant>,
    /// Restarts suspended (crash loop) until this time, or until the host asks.
    degraded_until: Option<Instant>,
    /// Processes started after the first.
    pub(crate) restarts: u32,
    /// Why the last process ended (exit status and stderr tail for stdio), for the host.
    last_loss: Option<TransportError>,
    /// Why the first process of the current crash window ended: in a crash loop the first
    /// exit usually says what is wrong, the later ones repeat it or fail to start at all.
    first_loss: Option<TransportError>,
    /// The one restart after a degraded wait is running and has not been ready yet: an exit
    /// now degrades the server again at once, as a breaker's half-open probe does.
    half_open: bool,
}

impl RestartState {
    pub(super) fn is_degraded(&self) -> bool {
        self.degraded_until.is_some()
    }

    pub(super) fn last_loss(&self) -> Option<&TransportError> {
        self.last_loss.as_ref()
    }

    /// Forgets the crash history: the host asked for a new start.
    pub(super) fn reset(&mut self) {
        self.degraded_until = None;
        self.exits.clear();
        self.restart_at = None;
        self.half_open = false;
    }

    /// The process became ready: a half-open retry worked, and exits count afresh.
    pub(super) fn ready(&mut self) {
        self.half_open = false;
    }

    /// No process is started again: the server is closed. What is known of the losses stays
    /// for the host to read.
    pub(super) fn stop(&mut self) {
        self.restart_at = None;
        self.degraded_until = None;
        self.half_open = false;
    }

    pub(crate) fn next_wakeup(&self) -> Option<Instant> {
        self.restart_at.or(self.degraded_until)
    }

    /// Counts an exit at `now` (the loss itself was noted with [`note_loss`](Self::note_loss))
    /// and decides what comes next: a restart after a backoff that doubles with each exit in
    /// the crash window, or, at `crash_loop_exits` exits within it, no restart until
    /// `degraded_retry_after` (or the host) says so.
    pub(super) fn after_exit(&mut self, now: Instant, policy: &RestartPolicy) -> AfterExit {
        if std::mem::take(&mut self.half_open) {
            // The one retry after the degraded wait failed before it was ready: degraded
            // again, for another wait (it started a whole crash window over, five processes
            // with the defaults, each wait).
            self.exits.clear();
            self.exits.push(now);
            self.first_loss = self.last_loss.clone();
            self.restart_at = None;
            self.degraded_until = Some(crate::time::later(now, policy.degraded_retry_after));
            return AfterExit::Degraded { crashes: 1, first_loss: self.first_loss.clone() };
        }
        // A window reaching back past what `Instant` can say (`Duration::MAX` for "count every
        // exit", or longer than the uptime on some systems) keeps every exit: taken as
        // starting now, it kept none, and the server was never degraded nor its backoff
        // doubled.
        if let Some(window_start) = now.checked_sub(policy.crash_loop_window) {
            self.exits.retain(|t| *t >= window_start);
        }
        if self.exits.is_empty() {
            self.first_loss = self.last_loss.clone();
        }
        // Only the newest `crash_loop_exits` matter (never more than MAX_COUNTED_EXITS).
        let counted = policy.crash_loop_exits.clamp(1, MAX_COUNTED_EXITS) as usize;
        if self.exits.len() >= counted {
            self.exits.drain(..=self.exits.len() - counted);
        }
        self.exits.push(now);
        let crashes = self.exits.len() as u32;
        if crashes >= policy.crash_loop_exits {
            // Degraded means no start before `degraded_until`, whatever was scheduled before
            // (a second loss reported for one process would otherwise leave a restart due).
            self.restart_at = None;
            self.degraded_until = Some(crate::time::later(now, policy.degraded_retry_after));
            return AfterExit::Degraded { crashes, first_loss: self.first_loss.clone() };
        }
        let delay = policy
            .base_delay
            .saturating_mul(1 << crashes.saturating_sub(1).min(16))
            .min(policy.max_delay);
        self.restart_at = Some(crate::time::later(now, delay));
        self.restarts += 1;
        AfterExit::RestartIn(delay)
    }

    /// Why the process ended, for the host and for a crash loop's first cause.
    pub(super) fn note_loss(&mut self, error: TransportError) {
        self.last_loss = Some(error);
    }

    /// Whether a new process is due at `now`: the backoff ended, or a degraded server's wait
    /// did (a half-open probe of the process: one more start, with the crash count cleared).
    pub(super) fn due(&mut self, now: Instant) -> bool {
        let mut due = false;
        if self.restart_at.is_some_and(|t| t <= now) {
            self.restart_at = None;
            due = true;
        }
        if self.degraded_until.is_some_and(|t| t <= now) {
            log::debug!("degraded server: trying one restart");
            self.degraded_until = None;
            self.exits.clear();
            self.half_open = true;
            due = true;
        }
        due
    }
}

/// What [`RestartState::after_exit`] decided.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AfterExit {
    /// A new process after this backoff.
    RestartIn(Duration),
    /// A crash loop: `crashes` exits within the window, the first for this cause.
    Degraded { crashes: u32, first_loss: Option<TransportError> },
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{AfterExit, RestartState};
    use crate::config::RestartPolicy;
    use crate::error::TransportError;

    const MS: Duration = Duration::from_millis(1);

    fn policy() -> RestartPolicy {
        RestartPolicy {
            enabled: true,
            base_delay: 100 * MS,
            max_delay: 350 * MS,
            crash_loop_exits: 4,
            crash_loop_window: 1000 * MS,
            degraded_retry_after: 5000 * MS,
        }
    }

    fn exit(r: &mut RestartState, at: Instant, error: TransportError) -> AfterExit {
        r.note_loss(error);
        r.after_exit(at, &policy())
    }

    #[test]
    fn the_backoff_doubles_within_the_window_and_stops_at_the_cap() {
        let (mut r, t0) = (RestartState::default(), Instant::now());
        let delays: Vec<AfterExit> = (0..3)
            .map(|i| exit(&mut r, t0 + i * 10 * MS, TransportError::ConnectionLost))
            .collect();
        assert_eq!(
            delays,
            [100 * MS, 200 * MS, 350 * MS].map(AfterExit::RestartIn),
            "doubled, then capped at max_delay"
        );
        assert_eq!(r.restarts, 3);
        assert_eq!(r.next_wakeup(), Some(t0 + 20 * MS + 350 * MS));
    }

    /// A window longer than `Instant` reaches back (`Duration::MAX`, "count every exit") counts
    /// every exit: it counted none, so the server restarted every `base_delay` for good.
    #[test]
    fn a_window_past_what_instant_can_reach_counts_every_exit() {
        let p = RestartPolicy { crash_loop_window: Duration::MAX, ..policy() };
        let (mut r, t0) = (RestartState::default(), Instant::now());
        let verdicts: Vec<AfterExit> = (1..=4u32)
            .map(|i| {
                r.note_loss(TransportError::ConnectionLost);
                r.after_exit(t0 + i * MS, &p)
            })
            .collect();
        assert_eq!(verdicts[..3], [100 * MS, 200 * MS, 350 * MS].map(AfterExit::RestartIn));
        assert!(matches!(verdicts[3], AfterExit::Degraded { crashes: 4, .. }), "{verdicts:?}");
    }

    /// The count reaches a `crash_loop_exits` past the exits kept inline (eight): a policy of
    /// ten degrades at the tenth exit. Past the most exits counted, none degrades.
    #[test]
    fn a_crash_loop_of_more_exits_than_kept_inline_still_degrades() {
        for (exits, degrades_at) in [(10, Some(10)), (64, Some(64)), (u32::MAX, None)] {
            let p = RestartPolicy { crash_loop_exits: exits, base_delay: MS, ..policy() };
            let (mut r, t0) = (RestartState::default(), Instant::now());
            let verdicts: Vec<AfterExit> = (1..=80u32)
                .map(|i| {
                    r.note_loss(TransportError::ConnectionLost);
                    r.after_exit(t0 + i * MS, &p)
                })
                .take_while(|v| matches!(v, AfterExit::RestartIn(_)))
                .collect();
            let first_degraded = (verdicts.len() < 80).then_some(verdicts.len() as u32 + 1);
            assert_eq!(first_degraded, degrades_at, "crash_loop_exits {exits}");
        }
    }

    #[test]
    fn exits_older_than_the_window_are_forgotten() {
        let (mut r, t0) = (RestartState::default(), Instant::now());
        for i in 0..3 {
            exit(&mut r, t0 + i * 10 * MS, TransportError::ConnectionLost);
        }
        // Long after the window: the count starts again, and so does the backoff.
        let later = t0 + 5000 * MS;
        assert_eq!(
            exit(&mut r, later, TransportError::BadResponse),
            AfterExit::RestartIn(100 * MS)
        );
        assert!(!r.is_degraded());
    }

    #[test]
    fn a_crash_loop_degrades_with_the_first_cause_and_a_half_open_retry() {
        let (mut r, t0) = (RestartState::default(), Instant::now());
        exit(&mut r, t0, TransportError::HttpStatus(500));
        for i in 1..3 {
            exit(&mut r, t0 + i * 10 * MS, TransportError::ConnectionLost);
        }
        let verdict = exit(&mut r, t0 + 30 * MS, TransportError::ConnectionLost);
        assert_eq!(
            verdict,
            AfterExit::Degraded { crashes: 4, first_loss: Some(TransportError::HttpStatus(500)) },
            "the first exit of the window says what is wrong"
        );
        assert!(r.is_degraded());
        assert_eq!(r.last_loss(), Some(&TransportError::ConnectionLost));
        // Nothing is due before the degraded wait ends; then one start, with the count cleared.
        assert!(!r.due(t0 + 4000 * MS));
        assert!(r.due(t0 + 30 * MS + 5000 * MS));
        assert!(!r.is_degraded());
        // The one restart fails before it is ready: degraded again at once (it started a
        // whole new crash window: four more processes here, five with the defaults).
        let again = exit(&mut r, t0 + 6000 * MS, TransportError::BadResponse);
        let first_loss = Some(TransportError::BadResponse);
        assert_eq!(again, AfterExit::Degraded { crashes: 1, first_loss });
        assert!(r.is_degraded());
        assert!(!r.due(t0 + 10_000 * MS), "another wait");
        // The next one is ready, then exits: a crash like any other.
        assert!(r.due(t0 + 11_000 * MS));
        r.ready();
        let later = exit(&mut r, t0 + 60_000 * MS, TransportError::ConnectionLost);
        assert_eq!(later, AfterExit::RestartIn(100 * MS));
    }

    #[test]
    fn a_restart_is_due_once_its_backoff_ends_and_a_reset_cancels_it() {
        let (mut r, t0) = (RestartState::default(), Instant::now());
        exit(&mut r, t0, TransportError::ConnectionLost);
        assert!(!r.due(t0 + 99 * MS));
        assert!(r.due(t0 + 100 * MS));
        assert!(!r.due(t0 + 200 * MS), "due once");
        exit(&mut r, t0 + 300 * MS, TransportError::ConnectionLost);
        r.reset();
        assert_eq!(r.next_wakeup(), None);
        assert!(!r.due(t0 + 10_000 * MS));
    }
}
