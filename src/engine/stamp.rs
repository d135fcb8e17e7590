//! Compact times for the tables that hold one entry per pending call.
//!
//! An `Instant` takes 16 bytes and a `Duration` 16; a pending call keeps several of each, and
//! at 10,000 pending calls those bytes are most of the table. The engine instead keeps times
//! as signed nanoseconds from its epoch (the `now` given to `Engine::new`) and spans as
//! unsigned nanoseconds: 8 bytes each, exact to the nanosecond within 292 years of the epoch.
//! Conversions happen where times enter and leave the engine.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A point in time: nanoseconds from the engine's [`Epoch`], either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Stamp(i64);

impl Stamp {
    /// The time `span` after this one, saturating at the far end of the range.
    pub(crate) fn after(self, span: Duration) -> Stamp {
        let nanos = i64::try_from(span.as_nanos()).unwrap_or(i64::MAX);
        Stamp(self.0.saturating_add(nanos))
    }

    /// How long after `earlier` this is; zero when it is not after it.
    pub(crate) fn since(self, earlier: Stamp) -> Duration {
        Duration::from_nanos(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    /// The packed form, for keys that sort by time.
    pub(crate) fn nanos(self) -> i64 {
        self.0
    }

    pub(crate) fn from_nanos(nanos: i64) -> Stamp {
        Stamp(nanos)
    }
}

/// The instant stamps count from, and the last instant converted: a host passes one `now` to
/// several verbs in a row (a call and the flush that writes it), and the conversion is a
/// subtraction of two timespecs where the comparison is two integer compares.
#[derive(Debug, Clone)]
pub(crate) struct Epoch {
    origin: Instant,
    last: Cell<(Instant, Stamp)>,
}

impl Epoch {
    pub(crate) fn new(at: Instant) -> Self {
        Epoch { origin: at, last: Cell::new((at, Stamp(0))) }
    }

    /// The instant stamps count from: when the engine was made.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))] // the lanes' alone
    pub(crate) fn origin(&self) -> Instant {
        self.origin
    }

    /// `at` as a stamp. Beyond 292 years from the epoch it saturates, which for a deadline
    /// that far away means what it says: never.
    pub(crate) fn stamp(&self, at: Instant) -> Stamp {
        let (last, stamp) = self.last.get();
        if at == last {
            return stamp;
        }
        let stamp = match at.checked_duration_since(self.origin) {
            Some(after) => Stamp(i64::try_from(after.as_nanos()).unwrap_or(i64::MAX)),
            None => Stamp(i64::try_from((self.origin - at).as_nanos()).map_or(i64::MIN, |n| -n)),
        };
        self.last.set((at, stamp));
        stamp
    }

    /// The instant a stamp stands for (the nearest the platform can hold, should the
    /// saturated far end not fit an `Instant`).
    pub(crate) fn instant(&self, s: Stamp) -> Instant {
        let offset = Duration::from_nanos(s.0.unsigned_abs());
        let origin = self.origin;
        let at = if s.0 >= 0 { origin.checked_add(offset) } else { origin.checked_sub(offset) };
        at.unwrap_or(origin)
    }
}

/// A length of time in 8 bytes: nanoseconds, saturating at 584 years.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Span(u64);

impl Span {
    pub(crate) const ZERO: Span = Span(0);

    pub(crate) fn get(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// A moving average with `sample` weighted one eighth.
    pub(crate) fn average_in(self, sample: Duration) -> Span {
        let sample = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX);
        // floor((7 a + s) / 8), split so that nothing overflows on the way.
        let (a, s) = (self.0, sample);
        Span((a / 8 * 7).saturating_add(s / 8).saturating_add((a % 8 * 7 + s % 8) / 8))
    }

    pub(crate) fn add(self, d: Duration) -> Span {
        Span(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl From<Duration> for Span {
    fn from(d: Duration) -> Span {
        Span::ZERO.add(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_exactly_on_both_sides_of_the_epoch() {
        let base = Instant::now();
        let epoch = Epoch::new(base + Duration::from_secs(10));
        for at in [
            base,
            base + Duration::from_nanos(1),
            base + Duration::from_secs(10),
            base + Duration::from_secs(10) + Duration::from_nanos(7),
            base + Duration::from_secs(86_400 * 365),
        ] {
            assert_eq!(epoch.instant(epoch.stamp(at)), at);
        }
        assert!(epoch.stamp(base) < epoch.stamp(base + Duration::from_nanos(1)));
    }

    /// The remembered conversion answers only for the very instant it was made for.
    #[test]
    fn a_repeated_instant_gets_the_same_stamp_and_a_new_one_its_own() {
        let base = Instant::now();
        let epoch = Epoch::new(base);
        let (a, b) = (base + Duration::from_micros(5), base + Duration::from_micros(9));
        for at in [a, a, b, a, base, b, b] {
            assert_eq!(epoch.stamp(at).since(Stamp(0)), at - base);
        }
        let before = base - Duration::from_nanos(3);
        assert_eq!(epoch.stamp(before), Stamp(-3));
        assert_eq!(epoch.stamp(before), Stamp(-3));
    }

    /// The moving average is floor((7 a + s) / 8), as `Duration` arithmetic gave it, and does
    /// not overflow at the far end.
    #[test]
    fn the_moving_average_weights_a_sample_one_eighth_exactly() {
        let values = [0, 1, 7, 8, 9, 15, 1_000_003, 123_456_789_012, u64::MAX / 2, u64::MAX - 1];
        for a in values {
            for s in values {
                let exact = (7 * u128::from(a) + u128::from(s)) / 8;
                let got = Span(a).average_in(Duration::from_nanos(s)).0;
                assert_eq!(u128::from(got), exact, "{a} {s}");
            }
        }
        let slow = Span(0).average_in(Duration::MAX);
        assert_eq!(slow.0, u64::MAX / 8, "a sample past u64 nanoseconds counts as the most");
    }

    #[test]
    fn stamps_saturate_instead_of_wrapping() {
        let epoch = Epoch::new(Instant::now());
        let s = epoch.stamp(Instant::now());
        let far = s.after(Duration::MAX);
        assert_eq!(far, Stamp::from_nanos(i64::MAX));
        assert!(far > s.after(Duration::from_secs(86_400 * 365 * 200)));
        assert_eq!(far.after(Duration::from_secs(1)), far);
    }

    #[test]
    fn since_is_never_negative() {
        let epoch = Epoch::new(Instant::now());
        let a = Stamp::from_nanos(5_000);
        let b = Stamp::from_nanos(2_000);
        assert_eq!(a.since(b), Duration::from_nanos(3_000));
        assert_eq!(b.since(a), Duration::ZERO);
        assert_eq!(epoch.stamp(epoch.instant(a)), a);
    }

    #[test]
    fn spans_add_and_saturate() {
        let s = Span::from(Duration::from_millis(3)).add(Duration::from_micros(5));
        assert_eq!(s.get(), Duration::from_micros(3_005));
        assert_eq!(Span::from(Duration::MAX).get(), Duration::from_nanos(u64::MAX));
    }
}
