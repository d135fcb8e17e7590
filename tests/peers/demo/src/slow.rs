//! One running `slow(ms)` call: its progress steps and its reply, on either transport.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::faults::Armed;
use crate::jsonrpc::result_message;
use crate::server::Era;
use crate::tools::text_result;

const PROGRESS_INTERVAL_MS: u64 = 100;
/// Upper bound for `slow(ms)`, so `Instant + ms` can never overflow.
pub(crate) const SLOW_MAX_MS: u64 = 3_600_000;

/// A running `slow(ms)` call. It reports progress at 100 ms, 200 ms, ... and a last step at
/// exactly `ms`, then replies. Steps are anchored to `started`, so late wake-ups do not drift.
pub(crate) struct SlowCall {
    pub(crate) id: Value,
    era: Era,
    ms: u64,
    progress_token: Option<Value>,
    started: Instant,
    steps: u64,
    steps_done: u64,
    /// The faults armed for this call: they bend its reply, and `late-after-cancel` keeps it
    /// running when cancelled.
    pub(crate) armed: Armed,
}

impl SlowCall {
    pub(crate) fn new(
        id: Value,
        era: Era,
        ms: u64,
        progress_token: Option<Value>,
        now: Instant,
        armed: Armed,
    ) -> SlowCall {
        let steps = ms.div_ceil(PROGRESS_INTERVAL_MS);
        SlowCall { id, era, ms, progress_token, started: now, steps, steps_done: 0, armed }
    }

    /// When step `step` (1-based) is due. The last step is clamped to `ms`.
    fn step_due(&self, step: u64) -> Instant {
        self.started + Duration::from_millis((step * PROGRESS_INTERVAL_MS).min(self.ms))
    }

    pub(crate) fn next_deadline(&self) -> Instant {
        self.step_due(self.steps_done + 1)
    }

    /// Emits the progress of every step due by `now` into `progress`. Returns the response
    /// once all steps are done, which finishes the call.
    pub(crate) fn advance(&mut self, now: Instant, progress: &mut Vec<Value>) -> Option<Value> {
        while self.steps_done < self.steps && self.step_due(self.steps_done + 1) <= now {
            self.steps_done += 1;
            if let Some(token) = &self.progress_token {
                progress.push(self.progress_notification(token));
            }
        }
        if self.steps_done < self.steps {
            return None;
        }
        eprintln!("[slow] done id={}", self.id);
        let body = text_result(&format!("slept {} ms", self.ms));
        Some(result_message(&self.id, self.era, "tools/call", body))
    }

    fn progress_notification(&self, token: &Value) -> Value {
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {
                "progressToken": token,
                "progress": self.steps_done,
                "total": self.steps,
                "message": format!("step {}/{}", self.steps_done, self.steps),
            }
        })
    }
}
