//! Embedding a [`Host`] in a loop the program owns ([`Host::embedded`], whose docs carry the
//! contract), and the one round of work both modes run.
//!
//! [`Host::new`] owns a `mio::Poll`; an embedded host keeps a `try_clone` of the program's
//! `mio::Registry` instead and registers only tokens from the range it was given. The owned
//! mode is the same code behind a wait: [`Host::poll`] waits on its own `Poll` for at most
//! `min(budget, poll_timeout)`, hands each event to the readiness path, then runs the tick.

use std::fmt;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use mio::{Events, Poll, Registry, Token};

use super::tokens::{Owner, TokenSpace};
use super::{AddServerError, Host};
use crate::client::servers::Settled;
use crate::client::{Client, ServerCore};
use crate::config::CacheConfig;
use crate::driver::transport::Transport;
use crate::engine::Engine;
use crate::time::earlier;

/// Why [`Host::embedded`] could not make a host.
#[derive(Debug)]
#[non_exhaustive]
pub enum EmbedError {
    /// The registry could not be cloned (`mio::Registry::try_clone`), or the host's cache could
    /// not be set up (an invalid [`CacheConfig`]).
    Io(io::Error),
    /// The token range cannot hold even one server (a stdio server needs
    /// [`Host::STDIO_SERVER_TOKENS`] tokens).
    TokenRange {
        /// The range given.
        tokens: Range<usize>,
        /// The fewest tokens one server needs.
        needed: usize,
    },
}

impl fmt::Display for EmbedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "cannot embed the host: {e}"),
            Self::TokenRange { tokens, needed } => write!(
                f,
                "token range {}..{} is too small: one server needs {needed} tokens",
                tokens.start, tokens.end
            ),
        }
    }
}

impl std::error::Error for EmbedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            Self::TokenRange { .. } => None,
        }
    }
}

impl From<EmbedError> for io::Error {
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::Io(e) => e,
            e @ EmbedError::TokenRange { .. } => io::Error::new(io::ErrorKind::InvalidInput, e),
        }
    }
}

/// A token outside the host's range was handed to [`Host::handle_readiness`]: the event is
/// the program's own, and the host did nothing with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForeignToken(pub Token);

impl fmt::Display for ForeignToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "token {} is outside the host's token range", self.0 .0)
    }
}

impl std::error::Error for ForeignToken {}

impl From<ForeignToken> for io::Error {
    fn from(e: ForeignToken) -> Self {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

/// Where the host's sources are registered, and the tokens it may use there.
#[derive(Debug)]
pub(super) struct Reactor {
    mode: Mode,
    tokens: TokenSpace,
    /// The `now` of the last readiness call or tick: what `poll_timeout` reports while a
    /// driver holds input left unread (due at once, and never later than a real deadline).
    pub(super) last_now: Instant,
}

#[derive(Debug)]
enum Mode {
    /// `Host::new`: the host waits on its own poll.
    Owned { poll: Poll, events: Events },
    /// `Host::embedded`: a clone of the program's registry; the program waits.
    Embedded { registry: Registry },
}

impl Reactor {
    /// A poll of the host's own, with (nearly) all of `usize` for tokens.
    pub(super) fn owned() -> io::Result<Self> {
        Ok(Self {
            mode: Mode::Owned { poll: Poll::new()?, events: Events::with_capacity(256) },
            // `usize::MAX` itself stays out, so every token's block end fits in a `usize`.
            tokens: TokenSpace::new(0..usize::MAX),
            last_now: Instant::now(),
        })
    }

    fn embedded(registry: &Registry, tokens: Range<usize>) -> Result<Self, EmbedError> {
        let needed = Host::STDIO_SERVER_TOKENS;
        if tokens.end.saturating_sub(tokens.start) < needed {
            return Err(EmbedError::TokenRange { tokens, needed });
        }
        Ok(Self {
            mode: Mode::Embedded { registry: registry.try_clone().map_err(EmbedError::Io)? },
            tokens: TokenSpace::new(tokens),
            last_now: Instant::now(),
        })
    }

    /// Where drivers register their sources.
    pub(super) fn registry(&self) -> &Registry {
        match &self.mode {
            Mode::Owned { poll, .. } => poll.registry(),
            Mode::Embedded { registry } => registry,
        }
    }

    /// The first free block of `len` tokens (committed when the server is inserted).
    pub(super) fn reserve(&self, len: usize) -> Result<Token, AddServerError> {
        self.tokens.find(len).ok_or(AddServerError::TooManyServers)
    }

    /// Records the tokens of a server just inserted at `index` (its driver's, from
    /// [`reserve`](Self::reserve)).
    pub(super) fn commit(&mut self, tokens: Range<usize>, index: usize) {
        self.tokens.commit(tokens, index);
    }

    /// Gives a removed server's tokens back.
    pub(super) fn release(&mut self, index: usize) {
        self.tokens.release(index);
    }

    /// Keeps a removed server's tokens from reuse while what it left still uses one.
    pub(super) fn retire(&mut self, index: usize) {
        self.tokens.retire(index);
    }

    /// Gives back the retired block holding `token`.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // only HTTP servers retire blocks
    pub(super) fn release_retired(&mut self, token: Token) {
        self.tokens.release_retired(token);
    }

    /// Waits on the host's own poll (owned mode only).
    pub(super) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        match &mut self.mode {
            Mode::Owned { poll, events } => match poll.poll(events, timeout) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
                other => other,
            },
            Mode::Embedded { .. } => Err(cannot_wait()),
        }
    }

    /// `Err` (`Unsupported`) for an embedded host, before a blocking helper does anything.
    pub(super) fn can_wait(&self) -> io::Result<()> {
        match self.mode {
            Mode::Owned { .. } => Ok(()),
            Mode::Embedded { .. } => Err(cannot_wait()),
        }
    }
}

/// What an embedded host's waits return: the program's loop does the waiting.
fn cannot_wait() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "an embedded host cannot wait: the program polls and forwards events to \
         Host::handle_readiness",
    )
}

impl Host {
    /// Tokens a stdio server takes from the host's range (its stdin, stdout and stderr).
    pub const STDIO_SERVER_TOKENS: usize = crate::driver::stdio::TOKENS_PER_DRIVER;

    /// Tokens an HTTP server takes from the host's range (its connection pool, the OAuth
    /// flow's connection, and its legacy session's `DELETE` after a close).
    #[cfg(feature = "http")]
    pub const HTTP_SERVER_TOKENS: usize = crate::driver::http::TOKENS_PER_DRIVER;

    /// A host living in the program's loop: servers register their sources on `registry`
    /// (the host keeps a `try_clone` of it) with tokens from `tokens` only. The program polls,
    /// forwards events with [`handle_readiness`](Self::handle_readiness), and calls
    /// [`handle_timeout`](Self::handle_timeout) when [`poll_timeout`](Self::poll_timeout) is
    /// due. [`Host::new`] runs the same readiness path and tick behind a `Poll` of its own.
    ///
    /// # The loop
    ///
    /// ```no_run
    /// use std::time::{Duration, Instant};
    /// use mcpoll::{Config, Host, StdioCommand};
    /// use mcpoll::mio::{Events, Poll};
    ///
    /// let mut poll = Poll::new()?;
    /// let mut events = Events::with_capacity(256);
    /// // Tokens 0..1000 are the program's; mcpoll gets 1000..2000.
    /// let mut host = Host::embedded(poll.registry(), 1000..2000)?;
    /// let _server = host.add_stdio_server(StdioCommand::new("my-mcp-server"), Config::default())?;
    /// loop {
    ///     let now = Instant::now();
    ///     let own = Duration::from_millis(16); // the program's own next deadline
    ///     let due = host.poll_timeout().map(|t| t.saturating_duration_since(now));
    ///     let wait = due.map_or(own, |d| d.min(own));
    ///     poll.poll(&mut events, Some(wait))?;
    ///     let now = Instant::now();
    ///     for event in events.iter() {
    ///         if host.owns_token(event.token()) {
    ///             host.handle_event(event, now)?;
    ///         } else {
    ///             // the program's own sources
    ///         }
    ///     }
    ///     if host.poll_timeout().is_some_and(|t| t <= now) {
    ///         host.handle_timeout(now); // spurious calls are harmless, but cost a scan
    ///     }
    ///     while let Some((_server, _event)) = host.poll_event() { /* ... */ }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Contract
    ///
    /// **Who reads the clock.** The program, for the loop verbs: [`Host::handle_event`] and
    /// [`Host::handle_timeout`] take `now`, read once per wake-up from `std::time::Instant` (the
    /// clock the host's deadlines are on) and never earlier than a `now` given before. The host
    /// reads that clock itself where it always has: in commands (`call_tool`, `cancel`, ...), in
    /// `add_*_server`, and in `poll_event` (the capability cache's bookkeeping).
    ///
    /// **What one readiness call does.** [`Host::handle_event`] (or [`Host::handle_readiness`],
    /// given only the token): for a token in the range held by a server, that server's
    /// driver reads until `WouldBlock` (with the whole event, a stdio server stops at a short
    /// read while its end is open) or until it has handed the engine
    /// `Config::frames_per_readiness` frames, then writes what the engine has to send, then does
    /// that server's share of a tick (due timers, a restart it asks for). A token in the range that
    /// no server holds now (its server was removed after the event was collected) is ignored, as
    /// mio's rules ask. A token outside the range is [`ForeignToken`], and nothing is done.
    /// Readiness is a hint: a spurious call costs one `WouldBlock` read.
    ///
    /// **What one tick does.** [`Host::handle_timeout`], for every server something happened to
    /// since the last tick or whose deadline came (not the others: a host pays for the servers
    /// that moved, not for every one it keeps): resume input a frame
    /// budget left unread (one more budget at most), fire the engine's due deadlines (request
    /// timeouts, retries, backoff, probes, restarts, server-request expiry) and the driver's
    /// (connect and idle timeouts, stream reopen, HTTP backlog, an exiting process's check),
    /// start a process the engine asks for, and write what the engines have to send; then one
    /// `try_wait` (and a signal, when one is due) per exiting process of a closed server, and
    /// the capability cache takes finished refreshes (on the servers that moved as well).
    /// Early or spurious calls only cost that look.
    ///
    /// **When to tick.** When `poll_timeout()` is at or before `now`. It is the earliest deadline
    /// of any server or exiting process, or a time already past when a driver holds input its frame budget left
    /// unread: readiness is edge-triggered, so no event will come for that input, and the program
    /// must tick without waiting. After any command the deadline may be earlier: read it again
    /// before waiting. It does not count events queued for the program: drain [`Host::poll_event`]
    /// after each round. With nothing pending and no timer due it is `None`, and the host makes no
    /// system calls.
    ///
    /// **Bound on work.** One readiness call hands one server's engine at most
    /// `frames_per_readiness` frames (a stdio server's stderr gets at most 16 reads of 64 KiB on
    /// top) and, over stdio, buffers at most `Config::max_write_buffer_bytes` (plus one frame)
    /// toward it (over HTTP the in-flight limit bounds what is sent). One
    /// tick does, per server, at most one such budget of left-over input, its due timers, and one
    /// flush. Input past the budget waits for the next tick, so one chatty server cannot hold the
    /// program's loop.
    ///
    /// **Closing never waits for a process.** [`Host::close_server`] and
    /// [`Host::remove_server`] close a stdio server's stdin and return; its process gets 250 ms
    /// to exit by itself, then SIGTERM to its process group, then SIGKILL 250 ms later. The tick
    /// drives that escalation and reaps the process (`try_wait`, never `wait`), so keep ticking
    /// when `poll_timeout` says: while a process is exiting it is due every few milliseconds
    /// (25 ms apart at most) and at each signal. A process that closes its stdout (a crash) is
    /// checked the same way, killed if it stays 200 ms, and its exit (status and stderr tail)
    /// reaches the engine only once it is reaped; a restart follows without a wait. Dropping
    /// the host kills running servers' process groups at once; processes of closed servers
    /// still exiting get up to 100 ms more to exit by themselves, then SIGKILL and up to 100 ms
    /// to be reaped (one stuck in the kernel past that stays a zombie until the program exits).
    /// Closing an HTTP server with a legacy (2025-11-25) session starts the `DELETE` that ends
    /// it and returns: the readiness path sends it on a connection of its own (through the
    /// server's TLS and proxy, with its session id, version, bearer token and headers), and
    /// the tick drops it 250 ms after the close, answered or not. At most 64 are outstanding
    /// (past that the oldest is dropped); a removed server's tokens are not handed out again
    /// until its `DELETE` is over. Dropping the host gives those still out up to 100 ms more
    /// (a program that closes its servers and exits at once still ends their sessions), then
    /// closes them.
    ///
    /// **Tokens.** Each server takes one contiguous block of the range, first fit:
    /// [`Host::STDIO_SERVER_TOKENS`] for a stdio server, [`Host::HTTP_SERVER_TOKENS`] for an HTTP
    /// one (its connection pool). When no free block is long enough, adding a server fails with
    /// `AddServerError::TooManyServers`; [`Host::remove_server`] gives its block back.
    ///
    /// **Not available embedded.** Anything that waits on its own: [`Host::poll`], `wait`,
    /// `wait_ready`, the `*_blocking` helpers. They return an `Unsupported` I/O error at once,
    /// before anything is sent or listed.
    ///
    /// # One descriptor and one deadline (a loop that is not mio)
    ///
    /// A loop that cannot hand the host a `mio::Registry` (`poll(2)`, libuv, GLib, asyncio, a
    /// game engine's frame loop, a C program through `mcpoll-capi`) uses a host of its own
    /// ([`Host::new`]) the way libcurl's multi interface and c-ares are used: it watches one
    /// descriptor for readability ([`Host::as_raw_fd`] through [`AsRawFd`], or [`AsFd`]),
    /// wakes at one deadline ([`Host::poll_timeout`]), and then calls
    /// `host.poll(Some(Duration::ZERO))`, which never blocks, and drains [`Host::poll_event`].
    ///
    /// **What becomes readable when.** The descriptor is the host's `mio::Poll` (an epoll
    /// instance on Linux, a kqueue on the BSDs and macOS). Every pipe and socket of every
    /// server is registered on it edge-triggered, so it polls readable when one of them
    /// changed since the last `poll`: a server wrote (a reply, a notification, a server
    /// request, stderr), a process closed its end (a crash), a connection completed or was
    /// reset, a socket that was full can be written again. The host's `poll` takes those
    /// edges; the descriptor is then not readable again until a new one comes. Watch it for
    /// readability only, and level-triggered (a plain `POLLIN`, `add_reader`, `uv_poll_start`
    /// with `UV_READABLE`): the descriptor itself is never read or written by the program.
    ///
    /// **What one call does.** `poll(Some(Duration::ZERO))` takes at most 256 readiness events
    /// (the rest stay on the descriptor, which stays readable), gives each to its server's
    /// readiness path, then runs one tick. Both are bounded as above ("Bound on work"): a
    /// frame budget per readiness event and per tick and server, one flush per server. It
    /// makes no call into the program and does not wait.
    ///
    /// **When to call although nothing is readable.** When [`Host::poll_timeout`] is at or
    /// before now: a request deadline, a retry or restart backoff, the capability cache's
    /// re-listen after a broken [`Host::watch_catalogs`] stream, an exiting process's
    /// check, an idle HTTP connection's timeout, or input that a frame budget left unread
    /// (no new edge will report it, so the deadline is already past). Read the deadline
    /// after every `poll` and every command (`call_tool`, `cancel`, ...), since a command can
    /// bring it forward. Commands write to the server at once and need no `poll` of their own
    /// to be sent; what the server answers makes the descriptor readable. Drain `poll_event`
    /// after every `poll` (and after a command that can queue an event at once): queued
    /// events do not make the descriptor readable.
    ///
    /// **Idle.** With no call pending, no timer armed and no process exiting,
    /// `poll_timeout` is `None` and nothing makes the descriptor readable but a server's own
    /// output: the program's loop sleeps as long as it likes, and the host makes no system
    /// call of its own.
    ///
    /// ```no_run
    /// use std::os::fd::AsRawFd;
    /// use std::time::{Duration, Instant};
    /// use mcpoll::{Config, Host, StdioCommand};
    ///
    /// let mut host = Host::new()?;
    /// let _server = host.add_stdio_server(StdioCommand::new("my-mcp-server"), Config::default())?;
    /// let fd = host.as_raw_fd(); // watch it for readability in the program's own loop
    /// loop {
    ///     let due = host.poll_timeout().map(|t| t.saturating_duration_since(Instant::now()));
    ///     // ... the program's loop waits for `fd` readable or `due` (or its own business) ...
    ///     # let _ = (fd, due);
    ///     host.poll(Some(Duration::ZERO))?; // never blocks
    ///     while let Some((_server, _event)) = host.poll_event() { /* ... */ }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// An embedded host's [`as_raw_fd`](Host::as_raw_fd) is the program's own poll's
    /// descriptor (through the registry the host was given): the program already waits on it.
    pub fn embedded(registry: &Registry, tokens: Range<usize>) -> Result<Self, EmbedError> {
        let client = Client::new(CacheConfig::default()).map_err(EmbedError::Io)?;
        Self::with_reactor(Reactor::embedded(registry, tokens)?, client).map_err(EmbedError::Io)
    }

    /// [`embedded`](Self::embedded), with these capability cache bounds.
    pub fn embedded_with_cache(
        registry: &Registry,
        tokens: Range<usize>,
        cache: CacheConfig,
    ) -> Result<Self, EmbedError> {
        let mut client = Client::new(cache).map_err(EmbedError::Io)?;
        client.arm_cache();
        Self::with_reactor(Reactor::embedded(registry, tokens)?, client).map_err(EmbedError::Io)
    }

    /// `true` for a host made by [`embedded`](Self::embedded).
    pub fn is_embedded(&self) -> bool {
        matches!(self.poll.mode, Mode::Embedded { .. })
    }

    /// The tokens the host may register sources with.
    pub fn token_range(&self) -> Range<usize> {
        self.poll.tokens.range()
    }

    /// `true` when `token` is in the host's range: its event goes to
    /// [`handle_readiness`](Self::handle_readiness).
    pub fn owns_token(&self, token: Token) -> bool {
        self.poll.tokens.range().contains(&token.0)
    }

    /// Handles one readiness event of the program's poll: the server holding `token` reads
    /// (at most `Config::frames_per_readiness` frames), writes, and fires its due timers. A
    /// token in the range that no server holds is ignored (its server was removed); one
    /// outside is [`ForeignToken`], and no server reads or writes for it (the call's time is
    /// noted all the same, as every entry point's is).
    ///
    /// With only the token, a stdio server's driver cannot tell whether the server closed its
    /// end, so it reads on until `WouldBlock`: one `read` more than needed per event.
    /// [`handle_event`](Self::handle_event) takes the whole event and saves it.
    pub fn handle_readiness(&mut self, token: Token, now: Instant) -> Result<(), ForeignToken> {
        // No event to ask whether the peer closed its end: read on to `WouldBlock`.
        self.ready(token, true, now)
    }

    /// [`handle_readiness`](Self::handle_readiness) for the whole event of the program's poll,
    /// which tells whether the peer closed its end: a stdio server's driver then stops at a
    /// read that returns less than asked for (the pipe is empty, and the server's next write
    /// raises a new edge), and reads on to the end of file only once the event reports the
    /// close. One `read` per event, as in a host with its own poll.
    pub fn handle_event(
        &mut self,
        event: &mio::event::Event,
        now: Instant,
    ) -> Result<(), ForeignToken> {
        self.ready(event.token(), event.is_read_closed(), now)
    }

    /// The readiness path of both embedded entry points.
    fn ready(&mut self, token: Token, read_closed: bool, now: Instant) -> Result<(), ForeignToken> {
        self.poll.last_now = now;
        self.read_wall_clock(now);
        if self.ending.handle_readiness(self.poll.registry(), token) {
            self.ending.settle(&mut self.poll);
            return Ok(());
        }
        let found =
            readiness(&mut self.client, &mut self.transports, &self.poll, token, read_closed, now);
        if let Some(index) = found? {
            self.upkeep(index, now);
        }
        self.client.after_input(now);
        self.flush_unflushed(now);
        Ok(())
    }

    /// The tick: resumes input left over by frame budgets, fires every due deadline, starts
    /// processes that are due, checks and signals exiting ones, and writes what the engines
    /// have to send. Idempotent; early or spurious calls do nothing but look at the servers
    /// something happened to since the last one.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.poll.last_now = now;
        self.read_wall_clock(now);
        self.tick(now);
        self.client.pump_catalogs(now);
        self.flush_unflushed(now);
    }

    /// When the host next needs [`handle_timeout`](Self::handle_timeout): the earliest
    /// deadline of any server or exiting process, or a time already past when a driver holds
    /// input its frame budget left unread. `None`: nothing is due until an event or a command.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // The deadlines the ticks filed, and those of the servers something happened to since
        // (the core's deadlines of each, its engine's and its catalog's re-listen, beside its
        // driver's), and whether such a driver holds input unread (a tick leaves a server
        // whose driver does marked).
        let servers = &self.client.servers;
        let mut deadline = servers.earliest();
        let mut unread = false;
        for index in servers.unfiled() {
            let driver = self.transports.get(index).and_then(Option::as_ref);
            unread |= driver.is_some_and(Transport::has_backlog);
            let core = servers.get(index);
            deadline = earlier(deadline, core.and_then(|s| deadline_of(s, driver)));
        }
        // Closed servers' children still exiting: their next check or signal; closed servers'
        // session `DELETE`s: when they are given up on.
        let ending = earlier(self.exiting.poll_timeout(), self.ending.poll_timeout());
        let deadline = earlier(deadline, ending);
        // Input that no readiness edge will report again, or output a command left unwritten
        // (a verb of the core called without the host's flush): due now.
        if unread || self.client.has_unflushed() {
            let now = self.poll.last_now;
            return Some(deadline.map_or(now, |d| d.min(now)));
        }
        deadline
    }

    /// The owned mode's work after a wait: every event of the host's own poll through the
    /// readiness path, then the tick (without the cache's part, which `poll_inner` adds).
    pub(super) fn round(&mut self, now: Instant) {
        self.poll.last_now = now;
        self.read_wall_clock(now);
        if let Mode::Owned { events, .. } = &self.poll.mode {
            for event in events.iter() {
                // The host's own poll carries only tokens of its range; `Vacant` ones (a
                // server removed since) are skipped inside.
                // The event says whether the peer closed its end, which lets a stdio driver
                // skip the `read` that would only return `WouldBlock`.
                let closed = event.is_read_closed();
                if self.ending.handle_readiness(self.poll.registry(), event.token()) {
                    continue;
                }
                let (client, transports) = (&mut self.client, &mut self.transports);
                let _ = readiness(client, transports, &self.poll, event.token(), closed, now);
            }
        }
        self.tick(now);
        if self.client.has_unflushed() {
            self.flush_unflushed(now);
        }
    }
}

/// The descriptor to watch for readability: the host's own `mio::Poll` (an epoll or kqueue
/// instance), or for an embedded host the program's poll, through its registry. The
/// contract of a loop built on it is in [`Host::embedded`] ("One descriptor and one
/// deadline"). The descriptor belongs to the host: it stays valid until the host is dropped,
/// and the program must not read, write or close it.
impl AsRawFd for Host {
    fn as_raw_fd(&self) -> RawFd {
        match &self.poll.mode {
            Mode::Owned { poll, .. } => poll.as_raw_fd(),
            Mode::Embedded { registry } => registry.as_raw_fd(),
        }
    }
}

/// The same descriptor as [`AsRawFd`], borrowed for as long as the host is (a `mio::Registry`
/// shares its poll's descriptor).
impl AsFd for Host {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.poll.registry().as_fd()
    }
}

/// Hands one event to the driver of the server holding `token`; that server's index, if any.
fn readiness(
    client: &mut Client,
    transports: &mut [Option<Transport>],
    reactor: &Reactor,
    token: Token,
    read_closed: bool,
    now: Instant,
) -> Result<Option<usize>, ForeignToken> {
    let index = match reactor.tokens.owner(token) {
        Owner::Foreign => return Err(ForeignToken(token)),
        Owner::Vacant => return Ok(None),
        Owner::Server(index) => index,
    };
    let (Some(s), Some(Some(transport))) =
        (client.servers.get_mut(index), transports.get_mut(index))
    else {
        return Ok(None);
    };
    transport.handle_readiness(reactor.registry(), token, read_closed, &mut s.engine, now);
    Ok(Some(index))
}

impl Host {
    /// One server's share of a tick, after its input: due timers, a process it asks for,
    /// output, and the scope its driver now holds a token for.
    fn upkeep(&mut self, index: usize, now: Instant) {
        let (Some(s), Some(Some(transport))) =
            (self.client.servers.get_mut(index), self.transports.get_mut(index))
        else {
            return;
        };
        let registry = self.poll.registry();
        upkeep(&mut s.engine, transport, registry, now, false);
        if transport.grants_scopes() {
            s.catalog.note_granted(transport.granted_scope());
        }
        // A reply read on readiness can close the engine (no common version, a refused
        // handshake): with no deadline left, the tick that would end its process might
        // never come to an embedding loop that ticks only when a deadline is due.
        end_if_closed(&s.engine, transport, registry, &mut self.exiting, &mut self.ending, now);
    }

    /// The tick over the servers something happened to or whose deadline came: left-over
    /// input first (one budget), then the upkeep (a server whose driver still holds input
    /// stays marked, due again at once). Each one's next deadline is filed at the next tick
    /// unless it is marked first; those that may have held events and hold none are no longer
    /// looked at by `poll_event`. Then closed servers' children and session ends move, and
    /// the core's pass after input runs.
    fn tick(&mut self, now: Instant) {
        let mut round = std::mem::take(&mut self.round);
        let transports = &self.transports;
        self.client.servers.take_round(now, &mut round, |index, s| {
            settled(s, transports.get(index).and_then(Option::as_ref))
        });
        let registry = self.poll.registry();
        for &index in &round {
            let s = self.client.servers.get_mut_in_round(index);
            let (Some(s), Some(Some(transport))) = (s, self.transports.get_mut(index)) else {
                continue;
            };
            transport.resume(registry, &mut s.engine, now);
            upkeep(&mut s.engine, transport, registry, now, true);
            if transport.grants_scopes() {
                s.catalog.note_granted(transport.granted_scope());
            }
            end_if_closed(&s.engine, transport, registry, &mut self.exiting, &mut self.ending, now);
        }
        for &index in &round {
            let driver = self.transports.get(index).and_then(Option::as_ref);
            if driver.is_some_and(Transport::has_backlog) {
                self.client.servers.touch(index);
            }
        }
        // Their deadlines are filed at the next round, unless they are marked first (as a
        // busy server is, by its next reply or call): worked out once a call, not twice.
        self.client.servers.leave_unfiled(&round);
        self.client.servers.forget_eventless();
        self.round = round;
        // Closed servers' exiting children and session `DELETE`s, then what follows input.
        self.exiting.handle_timeout(now);
        self.ending.handle_timeout(self.poll.registry(), now);
        self.ending.settle(&mut self.poll);
        self.client.after_input(now);
    }
}

/// One server's next deadline: its core's (engine, catalog re-listen) and its driver's.
fn deadline_of(s: &ServerCore, driver: Option<&Transport>) -> Option<Instant> {
    earlier(s.next_deadline(), driver.and_then(Transport::poll_timeout))
}

/// What a tick leaves a server as: its deadline, and whether it or its driver (bytes
/// unwritten, input left unread) has work that waits for none.
fn settled(s: &ServerCore, driver: Option<&Transport>) -> Settled {
    Settled { deadline: deadline_of(s, driver), busy: is_busy(s, driver) }
}

fn is_busy(s: &ServerCore, driver: Option<&Transport>) -> bool {
    s.is_busy() || driver.is_some_and(Transport::has_work)
}

/// What `Host::is_idle` asks of a server not filed: [`settled`] neither busy nor due at
/// `now`, without working out the deadline of a busy server (a game loop asks every frame).
pub(super) fn is_idle(s: &ServerCore, driver: Option<&Transport>, now: Instant) -> bool {
    !is_busy(s, driver) && deadline_of(s, driver).is_none_or(|d| d > now)
}

/// One server's share of a tick, after its input: due timers, a process it asks for, output.
/// `backlog`: input a frame budget left unread is handed over too (the tick's; after a
/// readiness call it waits for the tick).
fn upkeep(
    engine: &mut Engine,
    transport: &mut Transport,
    registry: &Registry,
    now: Instant,
    backlog: bool,
) {
    // The driver's first: input a frame budget left unread (an HTTP driver hands it over in
    // its `handle_timeout`; stdio's `resume` did) was read before the engine's timers were
    // due, and a reply among it must not lose to its call's deadline.
    if transport.poll_timeout().is_some_and(|d| d <= now) {
        transport.handle_timeout(registry, engine, now, backlog);
    }
    if engine.is_due(now) {
        engine.handle_timeout(now);
    }
    transport.flush(registry, engine, now);
}

/// An engine that closed by itself (a handshake past its timeout, no common version, a
/// refused handshake): its process, connections and session end as `close_server` ends them,
/// or they would run on until the server is removed.
fn end_if_closed(
    engine: &Engine,
    transport: &mut Transport,
    registry: &Registry,
    exiting: &mut crate::driver::reap::Reaper,
    ending: &mut super::closing::Ending,
    now: Instant,
) {
    if engine.is_closed() && transport.is_live() {
        let grace = Duration::from_millis(250);
        if let Some(end) = transport.shutdown(registry, grace, exiting, now) {
            ending.push(registry, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::capability_store::NoStore;

    /// An embedded host never polls: its entry points are `handle_timeout` and the
    /// readiness calls, and each gives the core a new wall-clock reading for its store when
    /// one is due, as an owned host's poll does. (They did not: a machine woken from a sleep
    /// had its store's pages dated by the reading taken when the store was installed.)
    #[test]
    fn an_embedded_host_reads_the_wall_clock_for_its_store_from_each_entry_point() {
        let poll = Poll::new().unwrap();
        let mut host = Host::embedded(poll.registry(), 100..200).unwrap();
        host.handle_timeout(Instant::now());
        assert_eq!(host.wall_due, None, "no store: no clock read");
        host.set_capability_store(NoStore);
        let due = host.wall_due.expect("read when the store is installed");
        host.handle_timeout(due);
        assert!(host.wall_due.is_some_and(|d| d > due), "read again from handle_timeout");
        let due = host.wall_due.unwrap();
        // A token of the program's own: nothing for the host to do but the reading.
        assert!(host.handle_readiness(Token(5), due).is_err());
        assert!(host.wall_due.is_some_and(|d| d > due), "read again from handle_readiness");
    }
}
