//! Child processes on their way out, checked from the tick instead of waited for.
//!
//! Closing a server must not stall the loop it lives in (an embedded host shares the program's
//! loop), so nothing here sleeps: a [`Watch`] says when a child is next checked with `try_wait`
//! and when it is next signalled, and the tick does both. Escalation is the one closing always
//! had: time to exit by itself (stdin closed), then SIGTERM to the process group, then SIGKILL.
//! A [`Reaper`] holds the children of servers already closed or removed.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use mio::unix::pipe::Receiver;
use rustix::process::{kill_process_group, Pid, Signal};

/// The first check comes this soon after a child is let go; a well-behaved server is gone by
/// then or soon after.
const FIRST_CHECK: Duration = Duration::from_millis(2);
/// Checks back off to this interval: a child that takes its grace costs about 40 wake-ups per
/// second, and only while it is exiting.
const MAX_CHECK: Duration = Duration::from_millis(25);
/// Children a [`Reaper`] holds at most. Past it the oldest is killed and waited for at once
/// (a killed process exits within microseconds unless stuck in the kernel).
const MAX_EXITING: usize = 64;
/// What dropping a [`Reaper`] gives its children to exit by themselves, and again after
/// SIGKILL, before it stops waiting.
const FINAL_WAIT: Duration = Duration::from_millis(100);

/// What follows the polite phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Escalation {
    /// SIGTERM after the grace, SIGKILL after another (closing a server).
    TermThenKill,
    /// SIGKILL after the grace (a server that closed stdout: it is exiting, or broken).
    Kill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for the child to exit by itself.
    Polite,
    /// SIGTERM sent.
    Terminated,
    /// SIGKILL sent: only the check remains.
    Killed,
}

/// The outcome of one check.
#[derive(Debug)]
pub(crate) enum Check {
    /// Still running; check again at [`Watch::deadline`].
    Running,
    /// Gone: its status, when the system could tell it (`None`: already reaped elsewhere).
    Exited(Option<ExitStatus>),
}

/// When one exiting child is checked and signalled next.
#[derive(Debug)]
pub(crate) struct Watch {
    stage: Stage,
    escalation: Escalation,
    grace: Duration,
    escalate_at: Instant,
    check_at: Instant,
    backoff: Duration,
}

impl Watch {
    /// Starts the polite phase at `now`: the caller has closed the child's stdin (or the child
    /// closed its stdout).
    pub(crate) fn new(now: Instant, grace: Duration, escalation: Escalation) -> Self {
        Self {
            stage: Stage::Polite,
            escalation,
            grace,
            escalate_at: crate::time::later(now, grace),
            check_at: now + FIRST_CHECK,
            backoff: FIRST_CHECK,
        }
    }

    /// When [`check`](Self::check) is next due.
    pub(crate) fn deadline(&self) -> Instant {
        match self.stage {
            Stage::Killed => self.check_at,
            _ => self.check_at.min(self.escalate_at),
        }
    }

    /// One `try_wait`, then the next signal if its time has come. Never blocks. When the child
    /// has exited, whatever it left in its process group is killed too.
    pub(crate) fn check(&mut self, child: &mut Child, now: Instant) -> Check {
        match child.try_wait() {
            Ok(Some(status)) => {
                kill_group(child, Signal::KILL);
                return Check::Exited(Some(status));
            }
            Ok(None) => {}
            Err(e) => {
                // ECHILD: someone else reaped it. Nothing is left to wait for.
                log::debug!("checking child {} failed: {e}", child.id());
                kill_group(child, Signal::KILL);
                return Check::Exited(None);
            }
        }
        if self.stage != Stage::Killed && now >= self.escalate_at {
            let (signal, next) = match (self.stage, self.escalation) {
                (Stage::Polite, Escalation::TermThenKill) => (Signal::TERM, Stage::Terminated),
                _ => (Signal::KILL, Stage::Killed),
            };
            log::debug!("child {} still running: {signal:?} to its group", child.id());
            kill_group(child, signal);
            self.stage = next;
            self.escalate_at = crate::time::later(now, self.grace);
            // The signal takes effect soon: look again soon.
            self.backoff = FIRST_CHECK;
        }
        self.check_at = now + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_CHECK);
        Check::Running
    }
}

/// A child let go by its driver, with the pipes it may still write to: they stay open until it
/// is reaped, so a server flushing its last output on the way out gets no SIGPIPE.
#[derive(Debug)]
pub(crate) struct Exiting {
    child: Child,
    watch: Watch,
    _pipes: [Option<Receiver>; 2],
}

impl Exiting {
    pub(crate) fn new(child: Child, watch: Watch, pipes: [Option<Receiver>; 2]) -> Self {
        Self { child, watch, _pipes: pipes }
    }

    /// Checks and escalates until the child is gone, sleeping between checks: for callers
    /// outside a loop ([`StdioDriver::shutdown`](super::stdio::StdioDriver::shutdown)).
    pub(crate) fn wait(mut self) -> Option<ExitStatus> {
        loop {
            let now = Instant::now();
            if now >= self.watch.deadline() {
                if let Check::Exited(status) = self.watch.check(&mut self.child, now) {
                    return status;
                }
            }
            std::thread::sleep(self.watch.deadline().saturating_duration_since(Instant::now()));
        }
    }
}

/// The exiting children of servers a host closed or removed, reaped from its tick.
#[derive(Debug, Default)]
pub(crate) struct Reaper {
    exiting: Vec<Exiting>,
}

impl Reaper {
    /// Takes a child to reap. At most [`MAX_EXITING`] are held: past that the oldest is killed
    /// and waited for now.
    pub(crate) fn push(&mut self, child: Exiting) {
        if self.exiting.len() >= MAX_EXITING {
            let mut oldest = self.exiting.remove(0);
            kill_group(&oldest.child, Signal::KILL);
            let _ = oldest.child.wait();
        }
        self.exiting.push(child);
    }

    /// When the next check or signal is due.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.exiting.iter().map(|e| e.watch.deadline()).min()
    }

    /// Checks the children that are due (one `try_wait` each, and a signal when one is due)
    /// and forgets those that exited.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.exiting.retain_mut(|e| {
            if e.watch.deadline() > now {
                return true;
            }
            match e.watch.check(&mut e.child, now) {
                Check::Running => true,
                Check::Exited(status) => {
                    log::trace!("reaped child {}: {status:?}", e.child.id());
                    false
                }
            }
        });
    }
}

impl Extend<Exiting> for Reaper {
    fn extend<I: IntoIterator<Item = Exiting>>(&mut self, children: I) {
        for child in children {
            self.push(child);
        }
    }
}

impl Drop for Reaper {
    /// The host is going away. A program that closes its servers and then exits lands here at
    /// once, so the children left first get [`FINAL_WAIT`] to exit by themselves (their stdin
    /// is closed), then SIGKILL and [`FINAL_WAIT`] more to be reaped. One that outlasts that
    /// (stuck in the kernel) stays a zombie until the program exits.
    fn drop(&mut self) {
        self.reap_for(FINAL_WAIT);
        for e in &self.exiting {
            kill_group(&e.child, Signal::KILL);
        }
        self.reap_for(FINAL_WAIT);
        for e in &self.exiting {
            log::debug!("child {} did not exit after SIGKILL; left unreaped", e.child.id());
        }
    }
}

impl Reaper {
    /// Reaps what exits within `limit`, sleeping between checks (only on drop).
    fn reap_for(&mut self, limit: Duration) {
        let until = crate::time::later(Instant::now(), limit);
        loop {
            self.exiting.retain_mut(|e| match e.child.try_wait() {
                Ok(None) => true,
                Ok(Some(_)) | Err(_) => {
                    // Whatever it left in its group goes too.
                    kill_group(&e.child, Signal::KILL);
                    false
                }
            });
            if self.exiting.is_empty() || Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Signals the child's process group (the child leads it: see `StdioCommand`).
pub(crate) fn kill_group(child: &Child, signal: Signal) {
    let Some(pid) = Pid::from_raw(child.id() as i32) else {
        return;
    };
    // ESRCH (already gone) is the common, harmless case.
    let _ = kill_process_group(pid, signal);
}
