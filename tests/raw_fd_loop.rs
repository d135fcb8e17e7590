//! One descriptor and one deadline (issue 22, part 1): a loop that is not mio drives a host of
//! its own through `poll(2)` on `Host::as_raw_fd` plus `Host::poll_timeout`, calling
//! `Host::poll(Some(Duration::ZERO))` only when the descriptor is readable or the deadline is
//! due. Real SDK peers over stdio and HTTP: many calls, a crash and restart, and idle (with
//! nothing pending there is no deadline and the descriptor is not readable).

mod common;

use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use common::*;
use mcpoll::{CallId, CallOptions, Config, Event, Host, HttpOptions, Idempotency, ServerId};
use rustix::event::{PollFd, PollFlags, Timespec};

/// Outer bound of every wait: generous, for a busy 2-core machine.
const LIMIT: Duration = Duration::from_secs(60);

/// The program's loop: `poll(2)` on the host's descriptor, with the host's deadline.
struct FdLoop {
    host: Host,
    /// `poll(2)` returns: readable, or timed out at the deadline.
    readable_wakeups: usize,
    deadline_wakeups: usize,
    /// Host events seen, as short strings with their server.
    events: Vec<(ServerId, Seen)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Ready,
    Done(CallId, String),
    Failed(CallId, &'static str),
    Lost,
    Other,
}

/// Whether the host's descriptor polls readable within `timeout` (`None`: no limit).
fn readable(host: &Host, timeout: Option<Duration>) -> bool {
    // The host's own poll, borrowed through `AsFd` for as long as `host` is.
    let mut fds = [PollFd::new(host, PollFlags::IN)];
    let ts =
        timeout.map(|t| Timespec { tv_sec: t.as_secs() as i64, tv_nsec: t.subsec_nanos().into() });
    loop {
        match rustix::event::poll(&mut fds, ts.as_ref()) {
            Ok(n) => return n > 0 && fds[0].revents().contains(PollFlags::IN),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => panic!("poll(2) failed: {e}"),
        }
    }
}

impl FdLoop {
    fn new() -> Self {
        Self {
            host: Host::new().unwrap(),
            readable_wakeups: 0,
            deadline_wakeups: 0,
            events: Vec::new(),
        }
    }

    /// One turn: wait for the descriptor or the deadline (at most `cap`), then one
    /// non-blocking `poll` and the events it queued.
    fn turn(&mut self, cap: Duration) {
        let now = Instant::now();
        let due = self.host.poll_timeout().map(|t| t.saturating_duration_since(now));
        let wait = due.map_or(cap, |d| d.min(cap));
        if readable(&self.host, Some(wait)) {
            self.readable_wakeups += 1;
        } else if due.is_some_and(|d| d <= cap) {
            self.deadline_wakeups += 1;
        } else {
            return; // the program's own cap: the host has nothing to do
        }
        self.host.poll(Some(Duration::ZERO)).unwrap();
        self.drain();
    }

    fn drain(&mut self) {
        while let Some((server, event)) = self.host.poll_event() {
            let seen = match event {
                Event::Ready { .. } => Seen::Ready,
                Event::CallDone { call, result, .. } => Seen::Done(call, result.json().to_owned()),
                Event::CallFailed { call, error, .. } => Seen::Failed(call, error.name()),
                Event::TransportLost { .. } => Seen::Lost,
                _ => Seen::Other,
            };
            self.events.push((server, seen));
        }
    }

    /// Turns until `pred` holds for the events seen so far (bounded by [`LIMIT`]).
    #[track_caller]
    fn until(&mut self, what: &str, mut pred: impl FnMut(&[(ServerId, Seen)]) -> bool) {
        let deadline = Instant::now() + LIMIT;
        while !pred(&self.events) {
            assert!(Instant::now() < deadline, "{what}: not within {LIMIT:?}: {:?}", self.events);
            self.turn(Duration::from_millis(250));
        }
    }

    fn echo(&mut self, server: ServerId, text: &str) -> CallId {
        // Echo changes nothing: safe to send again after a lost connection.
        let opts = CallOptions { idempotency: Some(Idempotency::Read), ..CallOptions::default() };
        let args = raw(&format!(r#"{{"text":"{text}"}}"#));
        self.host.call_tool(server, "echo", &args, &opts).unwrap()
    }

    /// `n` echo calls, at most `window` in flight, each answered with its own text.
    fn many_calls(&mut self, server: ServerId, n: usize, window: usize) {
        let mut sent = Vec::new();
        let mut done = 0;
        let deadline = Instant::now() + LIMIT;
        while done < n {
            while sent.len() - done < window && sent.len() < n {
                let i = sent.len();
                sent.push((self.echo(server, &format!("call {i}")), i));
            }
            assert!(Instant::now() < deadline, "{done}/{n} calls done within {LIMIT:?}");
            self.turn(Duration::from_millis(250));
            for (_, seen) in self.events.drain(..) {
                match seen {
                    Seen::Done(call, json) => {
                        let &(_, i) = sent.iter().find(|(c, _)| *c == call).expect("our call");
                        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
                        assert_eq!(v["content"][0]["text"], format!("call {i}"));
                        done += 1;
                    }
                    Seen::Failed(call, name) => panic!("{call} failed: {name}"),
                    _ => {}
                }
            }
        }
    }

    /// Turns until the host is quiet: no deadline, descriptor not readable (bounded).
    #[track_caller]
    fn settle(&mut self) {
        let deadline = Instant::now() + LIMIT;
        while self.host.poll_timeout().is_some() || readable(&self.host, Some(Duration::ZERO)) {
            assert!(
                Instant::now() < deadline,
                "host not idle within {LIMIT:?}: deadline in {:?}",
                self.host.poll_timeout().map(|t| t.saturating_duration_since(Instant::now()))
            );
            self.turn(Duration::from_millis(250));
        }
    }

    /// Idle: nothing pending, so no deadline and nothing readable; then a real `poll(2)`
    /// with a timeout returns without a wake-up (there is nothing to wake for).
    #[track_caller]
    fn assert_idle(&mut self, server: ServerId) {
        assert_eq!(self.host.pending(server), Some(0));
        assert_eq!(self.host.poll_timeout(), None, "nothing pending: no deadline");
        assert!(!readable(&self.host, Some(Duration::ZERO)), "nothing pending: not readable");
        let before = (self.readable_wakeups, self.deadline_wakeups);
        for _ in 0..3 {
            self.turn(Duration::from_millis(100));
        }
        assert_eq!((self.readable_wakeups, self.deadline_wakeups), before, "woken while idle");
        assert_eq!(self.host.poll_timeout(), None);
    }
}

fn is_done(events: &[(ServerId, Seen)], call: CallId) -> bool {
    events.iter().any(|(_, s)| matches!(s, Seen::Done(c, _) if *c == call))
}

#[test]
fn stdio_sdk_peer_driven_by_poll2_many_calls_crash_restart_and_idle() {
    let Some(dir) = peers_dir() else { return };
    let mut l = FdLoop::new();
    let server = l
        .host
        .add_stdio_server(mcpoll::StdioCommand::new(dir.join("run-py-stdio.sh")), Config::default())
        .unwrap();
    l.until("ready", |e| e.iter().any(|(s, x)| *s == server && *x == Seen::Ready));
    l.events.clear();

    l.many_calls(server, 300, 16);
    l.settle();
    l.assert_idle(server);

    // A crash: the process group is killed; the closed pipes make the descriptor readable,
    // the exit is reaped on deadlines, and a restart follows. A call made after the loss is
    // answered by the new process.
    let pid = l.host.pid(server).expect("running");
    let group = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process_group(group, rustix::process::Signal::KILL).unwrap();
    l.until("transport lost", |e| e.iter().any(|(s, x)| *s == server && *x == Seen::Lost));
    let after = l.echo(server, "after the crash");
    l.until("a call after the crash", |e| is_done(e, after));
    assert_ne!(l.host.pid(server), Some(pid), "a new process");
    l.events.clear();
    l.many_calls(server, 50, 8);
    l.settle();
    l.assert_idle(server);
    assert!(l.readable_wakeups > 0 && l.deadline_wakeups > 0, "both wake-ups were used");
}

#[test]
fn http_sdk_peer_driven_by_poll2_many_calls_server_restart_and_idle() {
    let Some(dir) = peers_dir() else { return };
    let mut peer = HttpPeer::start(&dir, "run-py-http.sh");
    let mut l = FdLoop::new();
    // The pooled connections' idle timeout set long (the default, 4 s, stays under the
    // server's own 5 s), so an idle host has nothing due for a long while.
    let opts = HttpOptions::new(peer.url()).idle_timeout(Duration::from_secs(30));
    let server = l.host.add_http_server(opts, Config::default()).unwrap();
    l.until("ready", |e| e.iter().any(|(s, x)| *s == server && *x == Seen::Ready));
    l.events.clear();

    l.many_calls(server, 300, 16);
    // Idle: no call pending, and only the pooled connections' idle timeout ahead, so nothing
    // is due for a long while and nothing is readable.
    let quiet_until = Instant::now() + LIMIT;
    while readable(&l.host, Some(Duration::ZERO))
        || l.host.poll_timeout().is_some_and(|t| t <= Instant::now())
    {
        assert!(Instant::now() < quiet_until, "host not quiet");
        l.turn(Duration::from_millis(250));
    }
    assert_eq!(l.host.pending(server), Some(0));
    let next = l.host.poll_timeout().map(|t| t.saturating_duration_since(Instant::now()));
    assert!(next.is_none_or(|d| d > Duration::from_secs(5)), "idle HTTP host due in {next:?}");

    // The server stops and comes back on the same port: a call made while it is back is
    // answered (a connection the server closed is noticed through the descriptor).
    let (script, port) = (peer.script.clone(), peer.port);
    peer.stop();
    drop(peer);
    let peer = HttpPeer::start_on(script, port);
    let after = l.echo(server, "after the restart");
    l.until("a call after the restart", |e| is_done(e, after));
    l.events.clear();
    l.many_calls(server, 50, 8);
    drop(peer);
}

#[test]
fn the_descriptor_is_the_hosts_and_stays_put() {
    let host = Host::new().unwrap();
    let fd = host.as_raw_fd();
    assert!(fd >= 0);
    assert_eq!(host.as_raw_fd(), fd);
    assert_eq!(host.as_fd().as_raw_fd(), fd, "AsFd and AsRawFd name one descriptor");
    // A fresh host with nothing added: no deadline, nothing readable.
    assert_eq!(host.poll_timeout(), None);
    assert!(!readable(&host, Some(Duration::ZERO)));
}
