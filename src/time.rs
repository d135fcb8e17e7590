//! Deadline arithmetic that cannot overflow, for every floor of the crate: a time computed
//! from a duration that a peer or a host chose (a `retry:` field, a token's `expires_in`, a
//! configured timeout) goes through [`later`], never through `Instant + Duration`, which
//! panics on overflow.

use std::time::{Duration, Instant};

/// The longest wait [`later`] adds: a hundred years, far inside `Instant`'s range everywhere.
const FARTHEST: Duration = Duration::from_secs(100 * 365 * 86_400);

/// `now + wait`, with `wait` cut to a hundred years so the addition cannot overflow, whoever
/// chose the wait (a peer's `retry:`, a host's config). Use it wherever a time is computed
/// from a duration that did not come from a constant.
pub(crate) fn later(now: Instant, wait: Duration) -> Instant {
    // Falls back to `now` only on a platform whose clock ends within a century of today.
    now.checked_add(wait.min(FARTHEST)).unwrap_or(now)
}

/// The earlier of two optional deadlines; `None` only when both are.
#[inline]
pub(crate) fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earlier_deadline_is_the_earlier_of_those_there_are() {
        let now = Instant::now();
        let soon = now + Duration::from_secs(1);
        assert_eq!(earlier(Some(soon), Some(now)), Some(now));
        assert_eq!(earlier(Some(now), Some(soon)), Some(now));
        assert_eq!(earlier(None, Some(soon)), Some(soon));
        assert_eq!(earlier(Some(soon), None), Some(soon));
        assert_eq!(earlier(None, None), None);
    }

    #[test]
    fn later_never_overflows() {
        let now = Instant::now();
        assert_eq!(later(now, Duration::from_secs(5)), now + Duration::from_secs(5));
        for wait in [Duration::MAX, Duration::from_secs(u64::MAX / 2), Duration::from_secs(1 << 62)]
        {
            assert_eq!(later(now, wait), now + FARTHEST);
        }
    }
}
