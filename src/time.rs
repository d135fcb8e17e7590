//! Deadline arithmetic that cannot overflow, for every floor of the crate: a time computed
//! from a duration that a peer or a host chose (a `retry:` field, a token's `expires_in`, a
//! configured timeout) goes through [`later`], never through `Instant + Duration`, which
//! panics on overflow.

use std::time::{Duration, Instant, SystemTime};

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

/// The wall clock as the core knows it without reading it: the time the shell read at one
/// instant, carried forward by the monotonic `now` of every verb. The shell reads the clock
/// again from time to time (a new anchor), so a clock set by hand or a suspended
/// machine, which the monotonic clock does not see, is followed within one such period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the many-server core's store only
pub(crate) struct WallAnchor {
    at: Instant,
    wall: SystemTime,
}

#[cfg_attr(not(feature = "stdio"), allow(dead_code))]
impl WallAnchor {
    /// The wall clock read as `wall` at `at`.
    pub(crate) fn new(at: Instant, wall: SystemTime) -> Self {
        Self { at, wall }
    }

    /// The wall-clock time at `now`. A `now` before the reading counts back from it; a time
    /// out of `SystemTime`'s range stays at the reading.
    pub(crate) fn at(&self, now: Instant) -> SystemTime {
        let moved = match now.checked_duration_since(self.at) {
            Some(ahead) => self.wall.checked_add(ahead),
            None => self.wall.checked_sub(self.at.saturating_duration_since(now)),
        };
        moved.unwrap_or(self.wall)
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

    #[test]
    fn the_wall_clock_moves_with_the_monotonic_one_from_its_reading() {
        let at = Instant::now() + Duration::from_secs(10);
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let anchor = WallAnchor::new(at, wall);
        assert_eq!(anchor.at(at), wall);
        assert_eq!(anchor.at(at + Duration::from_secs(5)), wall + Duration::from_secs(5));
        assert_eq!(anchor.at(at - Duration::from_secs(3)), wall - Duration::from_secs(3));
    }
}
