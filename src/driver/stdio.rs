//! A server as a child process, over non-blocking pipes registered with mio.
//!
//! The child runs in its own process group, so closing the server (or dropping the driver)
//! signals the whole tree, including anything a wrapper script started. stderr is drained into
//! a bounded ring so the child can never block on a full pipe, and the ring's tail explains an
//! exit. No threads: every pipe is a mio source. Nothing waits for a child to exit either: an
//! exiting child is checked with `try_wait` from [`StdioDriver::handle_timeout`] (a crash) or
//! handed to the host's reaper (a close), see `driver::reap`.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::pipe::{Receiver, Sender};
use mio::{Interest, Registry, Token};
use rustix::process::Signal;

use super::reap::{kill_group, Check, Escalation, Exiting, Watch};
use crate::codec::ndjson::{Frame, LineFramer};
use crate::config::Config;
use crate::engine::{Engine, ExchangeFailure, TransportEvent};
use crate::error::{ProcessExit, TransportError};
use crate::proto::jsonrpc::{self, Message, WireId};

/// What to run: a program, its arguments, environment and working directory. No shell is
/// involved, so nothing in the arguments is interpreted.
///
/// # Environment
///
/// Built in code, a command inherits the host's whole environment, as `std::process::Command`
/// does: the program embedding mcpoll chose the server and knows what its environment holds.
/// [`safe_env`](Self::safe_env) narrows that to [`SAFE_ENV_VARS`] and the locale, and
/// [`env_clear`](Self::env_clear) to nothing; [`env`](Self::env) adds to either. Servers named
/// by a configuration file ([`ConfigFile`](crate::ConfigFile), and so the `mcpoll` CLI) start
/// with the safe set unless their entry says `"mcpoll": {"inheritEnv": true}`: such a file
/// names programs its reader did not write, and a host's tokens should not reach them by
/// accident.
#[derive(Clone)]
pub struct StdioCommand {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    inherit: Inherit,
    cwd: Option<PathBuf>,
}

impl fmt::Debug for StdioCommand {
    /// The program, how many arguments, and the names of the variables set: arguments and
    /// values carry tokens often enough (`--token=...`, `API_KEY`) that none is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |n: usize| format!("<{n} redacted>");
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &format_args!("{}", hidden(self.args.len())))
            .field("env", &self.env.iter().map(|(k, _)| (k, "<redacted>")).collect::<Vec<_>>())
            .field("inherit", &self.inherit)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// The host variables a child started with [`StdioCommand::safe_env`] sees (when set), besides
/// `LANG` and every `LC_*`: what a shell tool needs to find programs, a home and a terminal,
/// and no credential. The TypeScript SDK's default set on Unix.
pub const SAFE_ENV_VARS: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// What a child takes from the host's environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inherit {
    All,
    /// The host's whole environment but the variables [`passes_to_a_lane`] keeps back: what a
    /// principal's lane of an `All` server starts from.
    AllButCredentials,
    Safe,
    Nothing,
}

/// Whether a variable may reach another principal's lane: not one whose name says credential
/// (`GITHUB_PERSONAL_ACCESS_TOKEN`, `DB_PASSWORD`, ...), nor one whose value is a URL with
/// user information (`DATABASE_URL=postgres://admin:pw@db/app`).
fn passes_to_a_lane(name: &OsStr, value: &OsStr) -> bool {
    let (name, value) = (name.to_string_lossy(), value.to_string_lossy());
    // The crate's one reading of where a URL's credentials are (user information, a
    // password with a `/` in it, `?api_key=`): the URL would be rewritten to hide them.
    let secret_url = value.contains("://")
        && matches!(crate::redact::redact_url(&value), std::borrow::Cow::Owned(_));
    !crate::redact::names_a_credential(&name) && !secret_url
}

/// A server's argument as another principal's lane of it gets it: a `-name=value` or
/// `--name=value` whose name says credential is left out whole; a URL (alone or as such a
/// value) loses its user information and secret query parameters (a database URL with the
/// server's own password made every lane connect as the server's account). Others, and a
/// credential given as an argument of its own after its flag (`--token t`, which cannot be
/// told from a flag followed by a positional argument), stay as they are.
fn arg_for_a_lane(arg: &OsString) -> Option<OsString> {
    let Some(text) = arg.to_str() else { return Some(arg.clone()) };
    let (flag, value) = match text.split_once('=') {
        Some((name, value)) if name.starts_with('-') => {
            if crate::redact::names_a_credential(name.trim_start_matches('-')) {
                return None;
            }
            (&text[..=name.len()], value)
        }
        _ => ("", text),
    };
    if !value.contains("://") {
        return Some(arg.clone());
    }
    match crate::redact::url_without_credentials(value) {
        std::borrow::Cow::Borrowed(_) => Some(arg.clone()),
        std::borrow::Cow::Owned(clean) => Some(format!("{flag}{clean}").into()),
    }
}

/// Whether the host variable `name` is one [`StdioCommand::safe_env`] passes on.
fn is_safe_var(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else { return false };
    SAFE_ENV_VARS.contains(&name) || name == "LANG" || name.starts_with("LC_")
}

impl StdioCommand {
    /// A command running `program` (looked up on `PATH` when it has no slash).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().into(),
            args: Vec::new(),
            env: Vec::new(),
            inherit: Inherit::All,
            cwd: None,
        }
    }

    /// Parses a command line the way a POSIX shell splits words: whitespace separates words,
    /// single quotes keep text literally, double quotes keep text with `\\"`, `\\\\`, `\\$` and
    /// `` \\` `` escapes, and a backslash outside quotes escapes the next character. Nothing is
    /// expanded and no shell runs.
    pub fn from_command_line(line: &str) -> Result<Self, CommandLineError> {
        let words = split_words(line)?;
        let (program, args) = words.split_first().ok_or(CommandLineError::Empty)?;
        Ok(Self::new(program).args(args))
    }

    /// The server's identity in the capability cache when the configuration names none: its
    /// program and arguments, each after a NUL (which no argument can hold). Two servers run
    /// by one launcher (`npx -y a`, `npx -y b`) are different servers. So are two runs of one
    /// program with different environments (each with its own `GITHUB_TOKEN`, say) or working
    /// directories: a fingerprint of those follows ([`add_context`](crate::catalog::key::add_context)).
    pub(crate) fn cache_identity(&self) -> String {
        let mut identity = self.program.to_string_lossy().into_owned();
        for arg in &self.args {
            identity.push('\0');
            identity.push_str(&arg.to_string_lossy());
        }
        if self.env.is_empty() && self.cwd.is_none() && self.inherit == Inherit::All {
            return identity;
        }
        // What the child gets: a later value of a variable replaces an earlier one, as in
        // `Command::env`, and the order they were set in does not matter.
        let mut env: Vec<(String, String)> = Vec::with_capacity(self.env.len());
        for (k, v) in &self.env {
            let (k, v) = (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned());
            match env.iter_mut().find(|(name, _)| *name == k) {
                Some(slot) => slot.1 = v,
                None => env.push((k, v)),
            }
        }
        env.sort_unstable();
        let inherit = match self.inherit {
            Inherit::All => "inherit-all",
            Inherit::AllButCredentials => "inherit-all-but-credentials",
            Inherit::Safe => "inherit-safe",
            Inherit::Nothing => "inherit-nothing",
        };
        let cwd = self.cwd.as_deref().map(|d| d.to_string_lossy());
        let fields = [inherit, cwd.as_deref().unwrap_or("")].into_iter();
        let vars = env.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]);
        crate::catalog::key::add_context(&mut identity, fields.chain(vars));
        identity
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(|a| a.as_ref().into()));
        self
    }

    /// Sets an environment variable for the child.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env.push((key.as_ref().into(), value.as_ref().into()));
        self
    }

    /// This command without the variables whose names say credential (`API_KEY`,
    /// `GITHUB_TOKEN`, `DB_PASSWORD`, ...) or whose values are URLs with user information,
    /// among those it sets and those it inherits from the host: what a principal's lane
    /// starts from, so neither the server's own credentials nor the host's (a
    /// `GITHUB_PERSONAL_ACCESS_TOKEN` in the host's environment made every principal's lane
    /// act as the host's account) reach another principal's process. Other variables (a log
    /// level, a data folder, `PATH`) stay. Arguments go through [`arg_for_a_lane`]: a URL
    /// loses its credentials, a `--name=value` whose name says credential is left out.
    pub(crate) fn without_credentials(&self) -> Self {
        let mut lane = self.clone();
        lane.env.retain(|(name, value)| passes_to_a_lane(name, value));
        lane.args = self.args.iter().filter_map(arg_for_a_lane).collect();
        if lane.inherit == Inherit::All {
            lane.inherit = Inherit::AllButCredentials;
        }
        lane
    }

    /// Starts the child with an empty environment (plus what [`env`](Self::env) adds), so no
    /// credential of the host leaks into a server by accident.
    pub fn env_clear(mut self) -> Self {
        self.inherit = Inherit::Nothing;
        self
    }

    /// Starts the child with only [`SAFE_ENV_VARS`], `LANG` and `LC_*` of the host's
    /// environment (plus what [`env`](Self::env) adds). The default for servers named by a
    /// configuration file.
    pub fn safe_env(mut self) -> Self {
        self.inherit = Inherit::Safe;
        self
    }

    /// Starts the child with the host's whole environment (plus what [`env`](Self::env)
    /// adds): the default for a command built in code, and the opt-in for a configuration
    /// file's server (`"inheritEnv": true`, or the CLI's `--inherit-env`).
    pub fn inherit_env(mut self) -> Self {
        self.inherit = Inherit::All;
        self
    }

    /// Sets the child's working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// The program, for diagnostics.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// A spawn failure, said of what failed: a working directory that is not there fails the
    /// spawn with the same `NotFound` as a missing program, and read as one ("could not start
    /// the server \"python3\": No such file or directory").
    fn spawn_error(&self, e: io::Error) -> io::Error {
        match &self.cwd {
            Some(dir) if e.kind() == io::ErrorKind::NotFound && !dir.is_dir() => io::Error::new(
                io::ErrorKind::NotFound,
                format!("its working directory {} is not a directory", dir.display()),
            ),
            _ => e,
        }
    }

    pub(crate) fn to_command(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.args);
        match self.inherit {
            Inherit::All => {}
            Inherit::AllButCredentials => {
                c.env_clear();
                c.envs(std::env::vars_os().filter(|(k, v)| passes_to_a_lane(k, v)));
            }
            Inherit::Nothing => {
                c.env_clear();
            }
            Inherit::Safe => {
                c.env_clear();
                c.envs(std::env::vars_os().filter(|(k, _)| is_safe_var(k)));
            }
        }
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.cwd {
            c.current_dir(dir);
        }
        use std::os::unix::process::CommandExt;
        // Its own process group: one signal reaches every process the server started.
        c.process_group(0);
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }
}

/// Why a command line could not be split into words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandLineError {
    /// No program was named.
    Empty,
    /// A quote was opened and never closed.
    UnclosedQuote,
    /// The line ends in a lone backslash.
    TrailingBackslash,
}

impl std::fmt::Display for CommandLineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Empty => "the command line names no program",
            Self::UnclosedQuote => "the command line has an unclosed quote",
            Self::TrailingBackslash => "the command line ends in a backslash",
        })
    }
}

impl std::error::Error for CommandLineError {}

fn split_words(line: &str) -> Result<Vec<String>, CommandLineError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next().ok_or(CommandLineError::UnclosedQuote)? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next().ok_or(CommandLineError::UnclosedQuote)? {
                        '"' => break,
                        '\\' => match chars.next().ok_or(CommandLineError::UnclosedQuote)? {
                            c @ ('"' | '\\' | '$' | '`') => word.push(c),
                            '\n' => {}
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        c => word.push(c),
                    }
                }
            }
            '\\' => match chars.next().ok_or(CommandLineError::TrailingBackslash)? {
                // A line continuation is no part of any word: `a \⏎ b` is two words.
                '\n' => {}
                c => {
                    in_word = true;
                    word.push(c);
                }
            },
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

const STDIN: usize = 0;
const STDOUT: usize = 1;
const STDERR: usize = 2;
/// Tokens a driver uses, from its base token.
pub(crate) const TOKENS_PER_DRIVER: usize = 3;

/// The read buffer's size at first, and the most it grows to: a read that fills it doubles it
/// (more was waiting), so a server of short lines keeps 4 KiB and a busy one reaches 64 KiB
/// after a few reads, never in steady state. (Made at 64 KiB it was about 60 KB of a minimal
/// client's resident memory.)
const READ_START: usize = 4 * 1024;
const READ_CHUNK: usize = 64 * 1024;

/// The room the write buffer starts with, and gets back after a large frame
/// ([`StdioDriver::shed_out`]).
const OUT_CAPACITY: usize = 4 * 1024;

/// The next read's size after a read of `n` bytes into `size`: doubled (up to `READ_CHUNK`)
/// when that read filled it.
fn grown(size: usize, n: usize) -> usize {
    if n == size && n < READ_CHUNK {
        (2 * n).min(READ_CHUNK)
    } else {
        size
    }
}
/// Reads of stderr per readiness event (1 MiB): the ring keeps only a tail, but a child writing
/// stderr as fast as it can must not hold the loop either.
const STDERR_READS: usize = 16;
/// How long a child that closed stdout has to exit by itself before it is killed: it is
/// usually exiting, and its own status says more than SIGKILL's.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// How often a child with requests outstanding is asked whether it still runs (`try_wait`):
/// its exit is otherwise seen as the end of its stdout, which never comes while a process it
/// started holds that pipe (a helper or daemon that inherited it), and the calls would wait
/// out their deadlines. Idle servers are not asked: an idle host makes no system call.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);

/// The most a child seen gone can have left in its stdout pipe: Linux's largest pipe an
/// unprivileged process can ask for (`/proc/sys/fs/pipe-max-size`, 1 MiB by default). Its exit
/// waits for that much to be read at most: a helper it started that holds the pipe and writes
/// on (`sh -c '(yes &); exit'`) kept the exit, the restart and the kill of its group waiting
/// for good.
const LEFT_IN_PIPE: usize = 1 << 20;

#[derive(Debug)]
struct Running {
    child: Child,
    stdin: Option<Sender>,
    stdout: Option<Receiver>,
    stderr: Option<Receiver>,
    /// stdout closed: the child is exiting, and its status is awaited (stderr still drains).
    exit: Option<Watch>,
    /// When to ask whether the child still runs ([`LIVENESS_CHECK`]): set by a write while
    /// the engine has requests outstanding, cleared once they are all answered.
    liveness_at: Option<Instant>,
    /// Bytes read from stdout since the liveness look found the child gone (`None` while it
    /// runs): what it left in the pipe is read before its exit is reported, up to
    /// [`LEFT_IN_PIPE`]; past that, another process holding the pipe writes on.
    read_since_gone: Option<usize>,
}

/// Drives one server child process for one [`Engine`].
///
/// Besides readiness, call [`handle_timeout`](Self::handle_timeout) when
/// [`poll_timeout`](Self::poll_timeout) is due: a child that closed stdout is reaped there (never
/// waited for), and only then is its exit reported to the engine.
pub struct StdioDriver {
    command: StdioCommand,
    base: Token,
    running: Option<Running>,
    framer: LineFramer,
    out: Vec<u8>,
    written: usize,
    /// The most room `out` keeps once all written: twice `max_write_buffer_bytes` (a frame
    /// may pass that mark), never less than it starts with ([`shed_out`](Self::shed_out)).
    keep_out: usize,
    /// The size of the next read of stdout, which lands in the framer's buffer.
    stdout_read: usize,
    /// Where stderr is read into.
    read_buf: Box<[u8]>,
    stderr_tail: VecDeque<u8>,
    stderr_cap: usize,
    max_line: usize,
    /// `Config::frames_per_readiness`.
    frame_budget: usize,
    /// `Config::bytes_per_readiness`: blank lines deliver no frame, so the frame budget
    /// alone would not stop a server that writes them without end.
    byte_budget: usize,
    /// `Config::max_write_buffer_bytes`.
    max_unsent: usize,
    /// Input was left unread when a budget ran out. mio readiness is edge-triggered, so no
    /// new event will report it: the host resumes the driver instead.
    stdout_backlog: bool,
    stderr_backlog: bool,
}

/// The driver's state without its buffers' bytes (requests written, replies read, the
/// stderr tail): those are a call's arguments and results, and up to `max_message_bytes`
/// each, which a `{:?}` in a log line would print as megabytes of numbers.
impl fmt::Debug for StdioDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioDriver")
            .field("command", &self.command)
            .field("base", &self.base)
            .field("pid", &self.pid())
            .field("exiting", &self.running.as_ref().is_some_and(|r| r.exit.is_some()))
            .field("unsent", &self.unsent())
            .field("buffered", &self.framer.buffered())
            .field("stderr_tail_bytes", &self.stderr_tail.len())
            .field("stdout_backlog", &self.stdout_backlog)
            .field("stderr_backlog", &self.stderr_backlog)
            .finish_non_exhaustive()
    }
}

impl StdioDriver {
    /// A driver for `command` using tokens `base .. base + TOKENS_PER_DRIVER`. Nothing runs
    /// until [`spawn`](Self::spawn).
    pub fn new(command: StdioCommand, config: &Config, base: Token) -> Self {
        Self {
            command,
            base,
            running: None,
            framer: LineFramer::new(config.max_message_bytes),
            out: Vec::with_capacity(OUT_CAPACITY),
            written: 0,
            keep_out: config.max_write_buffer_bytes.saturating_mul(2).max(OUT_CAPACITY),
            stdout_read: READ_START,
            read_buf: vec![0; READ_START].into_boxed_slice(),
            // Grown as the child writes: most write little, and `usize::MAX` (keep all)
            // is no capacity to ask for up front.
            stderr_tail: VecDeque::new(),
            stderr_cap: config.stderr_tail_bytes,
            max_line: config.max_message_bytes,
            frame_budget: config.frames_per_readiness,
            byte_budget: config.bytes_per_readiness,
            max_unsent: config.max_write_buffer_bytes,
            stdout_backlog: false,
            stderr_backlog: false,
        }
    }

    /// `true` when `token` belongs to this driver.
    pub fn owns(&self, token: Token) -> bool {
        token.0.wrapping_sub(self.base.0) < TOKENS_PER_DRIVER
    }

    /// The tokens this driver registers its pipes with.
    pub(crate) fn tokens(&self) -> std::ops::Range<usize> {
        self.base.0..self.base.0 + TOKENS_PER_DRIVER
    }

    /// `true` while a child is running (until its exit is reported to the engine).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(|r| r.child.id())
    }

    /// The last bytes the child wrote to stderr (bounded by `Config::stderr_tail_bytes`), with
    /// runs of the same line folded into one: a server that fails at start says the same
    /// thing once per restart.
    pub fn stderr_tail(&self) -> String {
        let (a, b) = self.stderr_tail.as_slices();
        let mut v = Vec::with_capacity(a.len() + b.len());
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        fold_repeated_lines(&String::from_utf8_lossy(&v))
    }

    /// Starts the child, registers its pipes and tells the engine the transport is open.
    /// A spawn failure (missing program, no permission) is returned, and the engine is left
    /// waiting for a transport. While a child runs (or is exiting) nothing is started and
    /// `AlreadyExists` is returned: the driver starts the next one itself once the engine asks
    /// for it ([`flush`](Self::flush)), and a second child here orphaned the first (never
    /// killed nor reaped).
    pub fn spawn(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        if self.running.is_some() {
            let running = "the server's process is still running";
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, running));
        }
        let mut child =
            self.command.to_command().spawn().map_err(|e| self.command.spawn_error(e))?;
        let take = |c: &mut Child| -> io::Result<(Sender, Receiver, Receiver)> {
            let missing = || io::Error::other("child pipe missing");
            let stdin = Sender::from(c.stdin.take().ok_or_else(missing)?);
            let stdout = Receiver::from(c.stdout.take().ok_or_else(missing)?);
            let stderr = Receiver::from(c.stderr.take().ok_or_else(missing)?);
            // Pipes made from std handles start out blocking.
            stdin.set_nonblocking(true)?;
            stdout.set_nonblocking(true)?;
            stderr.set_nonblocking(true)?;
            Ok((stdin, stdout, stderr))
        };
        let (mut stdin, mut stdout, mut stderr) = match take(&mut child) {
            Ok(p) => p,
            Err(e) => {
                kill_group(&child, Signal::KILL);
                let _ = child.wait();
                return Err(e);
            }
        };
        let registered = (|| {
            registry.register(&mut stdin, self.token(STDIN), Interest::WRITABLE)?;
            registry.register(&mut stdout, self.token(STDOUT), Interest::READABLE)?;
            registry.register(&mut stderr, self.token(STDERR), Interest::READABLE)
        })();
        if let Err(e) = registered {
            // Nobody would watch or reap the child: it goes now, as when its pipes failed.
            kill_group(&child, Signal::KILL);
            let _ = child.wait();
            return Err(e);
        }
        log::debug!("spawned server {:?} as pid {}", self.command.program, child.id());
        self.running = Some(Running {
            child,
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr: Some(stderr),
            exit: None,
            liveness_at: None,
            read_since_gone: None,
        });
        self.framer = LineFramer::new(self.max_line);
        self.clear_out();
        self.stdout_backlog = false;
        self.stderr_backlog = false;
        engine.handle_transport(now, TransportEvent::opened());
        self.flush(registry, engine, now)
    }

    fn token(&self, which: usize) -> Token {
        Token(self.base.0 + which)
    }

    /// Handles a readiness event for one of this driver's tokens: reads until `WouldBlock` or
    /// until `Config::frames_per_readiness` frames went to the engine (then
    /// [`has_backlog`](Self::has_backlog) is `true` and [`resume`](Self::resume) carries on),
    /// and writes what the engine has to send. [`handle_event`](Self::handle_event) does the
    /// same with one system call fewer per reply.
    pub fn handle_readiness(
        &mut self,
        registry: &Registry,
        token: Token,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        self.handle(registry, token, engine, now, true)
    }

    /// [`handle_readiness`](Self::handle_readiness) for a whole mio event, which lets the driver
    /// skip the `read` that only returns `WouldBlock`.
    ///
    /// A read that returns less than asked for has emptied the pipe, and with edge-triggered
    /// readiness the server's next write raises a new event, so the driver stops there. Once
    /// the event says the server closed its end (`is_read_closed`) no later event will come,
    /// so then it reads on to the end of file.
    pub fn handle_event(
        &mut self,
        registry: &Registry,
        event: &mio::event::Event,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        self.handle(registry, event.token(), engine, now, event.is_read_closed())
    }

    /// [`handle_event`](Self::handle_event) for a host that passes the token and what the event
    /// said of the peer's end (an embedded host that only has the token passes `true`).
    pub(crate) fn handle_token(
        &mut self,
        registry: &Registry,
        token: Token,
        read_closed: bool,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        self.handle(registry, token, engine, now, read_closed)
    }

    fn handle(
        &mut self,
        registry: &Registry,
        token: Token,
        engine: &mut Engine,
        now: Instant,
        read_closed: bool,
    ) -> io::Result<()> {
        match token.0.wrapping_sub(self.base.0) {
            STDOUT => {
                self.read_stdout(registry, engine, now, read_closed)?;
                // The last answer is in: nothing to ask the child about. Unless a write found
                // its stdin closed: the look ends a child that takes no more input
                // (`handle_timeout`), and nothing would arm it again.
                let armed = self.running.as_mut().filter(|r| r.liveness_at.is_some());
                if let Some(r) = armed.filter(|r| r.stdin.is_some() && engine.pending() == 0) {
                    r.liveness_at = None;
                }
            }
            STDERR => self.read_stderr(STDERR_READS),
            _ => {}
        }
        self.flush(registry, engine, now)
    }

    /// `true` when input is left unread because a budget ran out: call
    /// [`resume`](Self::resume) soon, without waiting for readiness (none will come for it).
    pub fn has_backlog(&self) -> bool {
        self.stdout_backlog || self.stderr_backlog
    }

    /// Carries on with input a budget left unread, as a readiness event would, with a fresh
    /// budget.
    pub fn resume(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        if self.stderr_backlog {
            self.read_stderr(STDERR_READS);
        }
        if self.stdout_backlog {
            // No event to say whether the server closed: read until `WouldBlock`.
            self.read_stdout(registry, engine, now, true)?;
        }
        self.flush(registry, engine, now)
    }

    /// Moves the engine's outgoing frames into the pipe, one line each, until the pipe is full
    /// or nothing is left. At most `Config::max_write_buffer_bytes` (plus one frame) wait in
    /// the driver: past that the engine keeps its frames until the pipe takes what is here.
    /// With no process running, starts one first when the engine asks for it (a restart
    /// whose backoff ran out, [`Engine::restart`]): call this after the engine's
    /// `handle_timeout` and after every command. A process that cannot be started is the
    /// engine's to hear, as an exit is (it tries again with backoff).
    #[inline]
    pub fn flush(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        if self.running.is_none() {
            self.start_if_asked(registry, engine, now);
        }
        // Most calls (every round's upkeep, every read's) have nothing to write: they return
        // here, without the frame of the loop below. (Bytes the pipe took stay in `out` until
        // the next frame is added: they are not waiting.)
        if self.written == self.out.len() && !engine.has_output() {
            return Ok(());
        }
        self.flush_frames(registry, engine, now)
    }

    fn flush_frames(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        loop {
            if self.running.as_ref().is_none_or(|r| r.stdin.is_none()) {
                return Ok(());
            }
            if self.written > 0 {
                // All of it in the common case; otherwise the unsent rest moves to the front.
                self.out.drain(..self.written);
                self.written = 0;
            }
            let mut full = self.out.len() >= self.max_unsent;
            // Most passes (every round's upkeep) find nothing to send: no call to learn it.
            while !full && engine.has_output() {
                let Some(t) = engine.poll_transmit(now, &mut self.out) else { break };
                if t.len > 0 {
                    self.out.push(b'\n');
                }
                full = self.out.len() >= self.max_unsent;
            }
            if let Some(r) = self.running.as_mut().filter(|r| r.liveness_at.is_none()) {
                if engine.pending() > 0 {
                    r.liveness_at = Some(crate::time::later(now, LIVENESS_CHECK));
                }
            }
            if !self.write_out(registry) || !full {
                if let Some(r) = self.running.as_mut().filter(|r| r.stdin.is_none()) {
                    // The write failed: nothing more goes to this child, and what it was not
                    // written goes back to the engine with the child's exit (`check_exit`).
                    // One that closed its stdin and runs on would hold every later request
                    // with none answered: the next liveness look ends it (`handle_timeout`).
                    if r.exit.is_none() {
                        r.liveness_at.get_or_insert(crate::time::later(now, LIVENESS_CHECK));
                    }
                }
                // The pipe is full (its writable edge resumes us), or the engine is drained.
                return Ok(());
            }
            // Everything went out and the engine may hold more: take the next batch.
        }
    }

    /// Empties the write buffer (its bytes all written, or never to be), giving back the room
    /// a large frame grew it to ([`shed_out`](Self::shed_out)).
    fn clear_out(&mut self) {
        if self.out.capacity() > self.keep_out {
            self.shed_out();
        } else {
            self.out.clear();
        }
        self.written = 0;
    }

    /// Gives back the room one large frame (a call with megabytes of arguments) grew the
    /// write buffer to: kept, every server and lane held it for its life (an idle one too,
    /// the bytes written staying until the next frame). Rare: out of line.
    #[cold]
    #[inline(never)]
    fn shed_out(&mut self) {
        self.out = Vec::with_capacity(OUT_CAPACITY);
        self.written = 0;
    }

    /// Writes buffered bytes until the pipe is full or they are all out; `false` when the pipe
    /// took less than everything.
    fn write_out(&mut self, registry: &Registry) -> bool {
        let Some(stdin) = self.running.as_mut().and_then(|r| r.stdin.as_mut()) else {
            return false;
        };
        while self.written < self.out.len() {
            match stdin.write(&self.out[self.written..]) {
                Ok(0) => return false,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // The child closed stdin or died; its exit shows up as EOF on stdout.
                    // What is left goes back to the engine with that exit (`drop_unwritten`).
                    log::debug!("write to server failed: {e}");
                    if let Some(r) = self.running.as_mut() {
                        if let Some(mut s) = r.stdin.take() {
                            let _ = registry.deregister(&mut s);
                        }
                    }
                    return false;
                }
            }
        }
        if self.out.capacity() > self.keep_out {
            // All written: a large frame's room goes now, not at the next frame.
            self.shed_out();
        }
        true
    }

    /// The child is gone: the bytes not written never will be. The host's requests among them
    /// whose first byte was not written were not delivered, and the engine is told so, with
    /// the child's exit as the cause (before the exit itself, which would take them for
    /// written): they go again (to the next process) as the retry policy allows, where they
    /// ended `DeliveryUnknown` with the writes that may have been read, and one with no
    /// attempt left ends with the exit status and stderr, not a write failure that was none.
    /// (A frame partly written may be all a server needs to act on: it stays "maybe
    /// delivered".) Read from the bytes themselves, once, rather than noted for every frame on
    /// the way out.
    #[cold]
    #[inline(never)]
    fn drop_unwritten(&mut self, engine: &mut Engine, now: Instant, exit: &ProcessExit) {
        let unwritten = self.out.get(self.written..).unwrap_or_default();
        // The rest of a frame partly out is no request: a proper tail of a JSON object is
        // never one whole (it ends with a brace the tail did not open), so it fails to decode.
        for line in unwritten.split(|&b| b == b'\n') {
            let Ok(Message::Request { id, method, .. }) = jsonrpc::decode(line) else { continue };
            // The probe and the handshake are the era's own business, as the process is.
            if matches!(method.as_ref(), "server/discover" | "initialize") {
                continue;
            }
            let Some(id) = WireId::parse(id) else { continue };
            let failure = ExchangeFailure::Unsent(TransportError::ProcessExit(exit.clone()));
            engine.handle_transport(now, TransportEvent::exchange_failed(id, failure));
        }
        self.clear_out();
    }

    /// Bytes written by the engine but not yet accepted by the pipe.
    pub fn unsent(&self) -> usize {
        self.out.len() - self.written
    }

    /// Hands the engine at most `frame_budget` frames: first those cut from earlier reads,
    /// then from new reads until the pipe is empty (a short read, unless `read_closed`; see
    /// [`handle_event`](Self::handle_event)) or `WouldBlock`. When the budget runs out
    /// first, the rest (in the framer or still in the pipe) is backlog for
    /// [`resume`](Self::resume).
    fn read_stdout(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
        read_closed: bool,
    ) -> io::Result<()> {
        let mut budget = self.frame_budget;
        let mut bytes = self.byte_budget;
        let mut emptied = false;
        self.stdout_backlog = false;
        loop {
            while budget > 0 {
                let Some(frame) = self.framer.next_frame() else { break };
                match frame {
                    Frame::Line(line) => engine.handle_message(now, line),
                    Frame::TooLarge { head, tail } => engine.handle_oversize(now, head, tail),
                }
                budget -= 1;
            }
            if budget == 0 {
                // Maybe nothing is left; the resume finds out with one read.
                self.stdout_backlog = true;
                return Ok(());
            }
            if emptied {
                return Ok(());
            }
            if bytes == 0 {
                // The pipe may hold more (the framer holds no whole line): come back soon.
                self.stdout_backlog = true;
                engine.note_input_yield();
                return Ok(());
            }
            let Some(stdout) = self.running.as_mut().and_then(|r| r.stdout.as_mut()) else {
                return Ok(());
            };
            match self.framer.read_from(stdout, self.stdout_read) {
                Ok(0) => return self.on_exit(registry, engine, now),
                Ok(n) => {
                    bytes = bytes.saturating_sub(n);
                    emptied = n < self.stdout_read && !read_closed;
                    self.stdout_read = grown(self.stdout_read, n);
                    if let Some(read) =
                        self.running.as_mut().and_then(|r| r.read_since_gone.as_mut())
                    {
                        *read = read.saturating_add(n);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::debug!("read from server failed: {e}");
                    return self.on_exit(registry, engine, now);
                }
            }
        }
    }

    /// Doubles the stderr buffer (up to `READ_CHUNK`) after a read of `n` bytes filled it.
    fn grow_read_buf(&mut self, n: usize) {
        let size = grown(self.read_buf.len(), n);
        if size != self.read_buf.len() {
            self.read_buf = vec![0; size].into_boxed_slice();
        }
    }

    /// Drains stderr into the tail ring, at most `reads` reads (the rest is backlog).
    fn read_stderr(&mut self, reads: usize) {
        self.stderr_backlog = false;
        let mut left = reads;
        loop {
            let Some(stderr) = self.running.as_mut().and_then(|r| r.stderr.as_mut()) else {
                return;
            };
            if left == 0 {
                self.stderr_backlog = true;
                return;
            }
            left -= 1;
            match stderr.read(&mut self.read_buf) {
                Ok(0) => {
                    if let Some(r) = self.running.as_mut() {
                        r.stderr = None;
                    }
                    return;
                }
                Ok(n) => {
                    let data = &self.read_buf[..n];
                    let keep = &data[n.saturating_sub(self.stderr_cap)..];
                    let excess =
                        (self.stderr_tail.len() + keep.len()).saturating_sub(self.stderr_cap);
                    self.stderr_tail.drain(..excess);
                    self.stderr_tail.extend(keep);
                    log::trace!("server stderr: {} bytes", n);
                    self.grow_read_buf(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// stdout closed: the child is gone (or going). Its exit is reported (with the stderr tail)
    /// once `try_wait` has its status: now if it has one already, otherwise from
    /// [`handle_timeout`](Self::handle_timeout), which kills it if it outstays `EXIT_GRACE`.
    fn on_exit(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        // The child's last words, bounded too: a grandchild may hold stderr open and write on.
        self.read_stderr(STDERR_READS);
        self.stdout_backlog = false;
        self.stderr_backlog = false;
        let Some(running) = self.running.as_mut() else {
            return Ok(());
        };
        if running.exit.is_some() {
            return Ok(());
        }
        // stderr stays registered: what the child writes until it exits joins the tail.
        if let Some(mut s) = running.stdin.take() {
            let _ = registry.deregister(&mut s);
        }
        if let Some(mut s) = running.stdout.take() {
            let _ = registry.deregister(&mut s);
        }
        running.exit = Some(Watch::new(now, EXIT_GRACE, Escalation::Kill));
        // Most children have exited by the time their stdout reads EOF.
        self.check_exit(registry, engine, now)
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: while a child that closed
    /// stdout is exiting, its next check (or SIGKILL); while requests are outstanding, the
    /// next look at whether the child still runs. `None` otherwise.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let running = self.running.as_ref()?;
        match &running.exit {
            Some(watch) => Some(watch.deadline()),
            None => running.liveness_at,
        }
    }

    /// Checks an exiting child (one `try_wait`, SIGKILL once its grace is over) and, once it is
    /// gone, reports its exit to the engine and starts a new process if the engine asks for
    /// one (see [`flush`](Self::flush)). Never blocks; early or spurious calls are no-ops.
    pub fn handle_timeout(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        if self.running.is_none() {
            self.start_if_asked(registry, engine, now);
            return Ok(());
        }
        if self.poll_timeout().is_none_or(|d| d > now) {
            return Ok(());
        }
        let Some(running) = self.running.as_mut() else { return Ok(()) };
        if running.exit.is_none() {
            // The liveness look: a child that exited while something holds its stdout is
            // ended here as if its stdout had closed.
            running.liveness_at = None;
            match running.child.try_wait() {
                Ok(None) if running.stdin.is_none() => {
                    // It takes no more input (a write found its stdin closed) but runs on:
                    // it is ended as one that exited, its replies so far read first, and
                    // the engine restarts it as after a crash.
                    log::debug!("server {:?} closed its stdin: ended", self.command.program);
                    return self.on_exit_seen(registry, engine, now);
                }
                Ok(None) if engine.pending() > 0 => {
                    running.liveness_at = Some(crate::time::later(now, LIVENESS_CHECK));
                }
                Ok(None) => {}
                Ok(Some(_)) | Err(_) => return self.on_exit_seen(registry, engine, now),
            }
            return Ok(());
        }
        self.check_exit(registry, engine, now)
    }

    /// The liveness look found the child gone while its stdout is still open. The lines it
    /// wrote before it exited are the engine's first (its replies): a turn of reading, and
    /// while lines are left for later turns the exit waits for them, looked at again at once.
    /// Then it is ended as if its stdout had closed.
    fn on_exit_seen(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        let seen = self.running.as_ref().map(|r| r.child.id());
        if !self.stdout_backlog {
            self.read_stdout(registry, engine, now, false)?;
        }
        // The read may have come to the end of stdout, which ended the child (and maybe
        // started the next process, the engine's fallback): the look was for that one.
        let Some(running) = self.running.as_mut().filter(|r| Some(r.child.id()) == seen) else {
            return Ok(());
        };
        if running.exit.is_some() {
            // The read came to the end of stdout, and that ended it.
            return Ok(());
        }
        let read = *running.read_since_gone.get_or_insert(0);
        if self.stdout_backlog && read < LEFT_IN_PIPE {
            running.liveness_at = Some(now);
            return Ok(());
        }
        log::debug!("server {:?} gone with its stdout held open", self.command.program);
        self.on_exit(registry, engine, now)
    }

    fn check_exit(
        &mut self,
        registry: &Registry,
        engine: &mut Engine,
        now: Instant,
    ) -> io::Result<()> {
        let Some(running) = self.running.as_mut() else {
            return Ok(());
        };
        let Some(watch) = running.exit.as_mut() else {
            return Ok(());
        };
        let Check::Exited(status) = watch.check(&mut running.child, now) else {
            return Ok(());
        };
        // What it wrote before exiting is in the pipe now (a grandchild may write on: bounded).
        self.read_stderr(STDERR_READS);
        self.stderr_backlog = false;
        if let Some(mut running) = self.running.take() {
            deregister_all(registry, &mut running);
        }
        let exit = ProcessExit {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
            stderr_tail: Arc::from(self.stderr_tail()),
        };
        // The stderr tail may quote what the server was sent (servers log their input): it is
        // for TRACE only. The host gets it whole in the error.
        log::debug!(
            "server {:?} ended: code {:?}, signal {:?}",
            self.command.program,
            exit.code,
            exit.signal
        );
        log::trace!("server {:?} ended: {exit}", self.command.program);
        if self.written < self.out.len() {
            self.drop_unwritten(engine, now, &exit);
        } else {
            self.clear_out();
        }
        engine.handle_transport(now, TransportEvent::closed(TransportError::ProcessExit(exit)));
        self.start_if_asked(registry, engine, now);
        Ok(())
    }

    /// Starts the next process when none runs and the engine asks for one: at once after an
    /// exit (the era probe's fallback to `initialize`), once a restart's backoff ran out (the
    /// engine's timer), after [`Engine::restart`]. A failure is the engine's to hear, as an
    /// exit is: its calls fail with the error's kind, and it tries again with backoff.
    fn start_if_asked(&mut self, registry: &Registry, engine: &mut Engine, now: Instant) {
        if self.running.is_some() || !engine.wants_transport() {
            return;
        }
        if let Err(e) = self.spawn(registry, engine, now) {
            log::warn!("restarting the server failed: {e}");
            let reason = crate::error::CloseReason::SpawnFailed(e.kind());
            engine.handle_transport(now, TransportEvent::closed(TransportError::Closed(reason)));
        }
    }

    /// Lets the child go without waiting: its pipes are deregistered, stdin is closed so it
    /// can exit by itself, and the returned [`Exiting`] escalates (SIGTERM to the group after
    /// `grace`, SIGKILL after another) as whoever holds it checks it.
    pub(crate) fn detach(
        &mut self,
        registry: &Registry,
        grace: Duration,
        now: Instant,
    ) -> Option<Exiting> {
        self.stdout_backlog = false;
        self.stderr_backlog = false;
        let mut running = self.running.take()?;
        deregister_all(registry, &mut running);
        running.stdin = None;
        // What was not written never will be: kept, it was work the driver seemed to have
        // for good (`Host::is_idle` false while the closed server stayed).
        self.clear_out();
        let watch = Watch::new(now, grace, Escalation::TermThenKill);
        Some(Exiting::new(running.child, watch, [running.stdout, running.stderr]))
    }

    /// Closes the server and waits for it: stdin is closed so it can exit by itself; after
    /// `grace` the process group gets SIGTERM, and SIGKILL after another `grace`. Blocks for
    /// about twice `grace` at most. A [`Host`](crate::Host) does not call this: it lets the
    /// child go and reaps it from its tick, so closing never stalls its loop.
    pub fn shutdown(&mut self, registry: &Registry, grace: Duration) {
        if let Some(exiting) = self.detach(registry, grace, Instant::now()) {
            let _ = exiting.wait();
        }
    }
}

impl Drop for StdioDriver {
    fn drop(&mut self) {
        if let Some(mut running) = self.running.take() {
            kill_group(&running.child, Signal::KILL);
            let _ = running.child.wait();
        }
    }
}

fn deregister_all(registry: &Registry, r: &mut Running) {
    if let Some(s) = r.stdin.as_mut() {
        let _ = registry.deregister(s);
    }
    if let Some(s) = r.stdout.as_mut() {
        let _ = registry.deregister(s);
    }
    if let Some(s) = r.stderr.as_mut() {
        let _ = registry.deregister(s);
    }
}

/// Writes each run of identical lines once, with "(repeated N times)" when N > 1.
fn fold_repeated_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let mut times = 1;
        while lines.peek() == Some(&line) {
            lines.next();
            times += 1;
        }
        if times == 1 {
            out.push_str(line);
            continue;
        }
        let body = line.strip_suffix('\n').unwrap_or(line);
        out.push_str(body);
        out.push_str(" (repeated ");
        out.push_str(&times.to_string());
        out.push_str(" times)");
        if body.len() < line.len() {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn repeated_stderr_lines_are_folded() {
        let text = "starting\nerror: no config\nerror: no config\nerror: no config\npartial";
        let folded = super::fold_repeated_lines(text);
        assert_eq!(folded, "starting\nerror: no config (repeated 3 times)\npartial");
        assert_eq!(super::fold_repeated_lines("a\na"), "a\na", "a cut line is not a repeat");
        assert_eq!(super::fold_repeated_lines(""), "");
    }

    /// Two runs of one program with other environments or working directories are two
    /// servers to the cache; the order variables were set in is not, nor is a value set and
    /// then replaced. No value is kept in the identity.
    #[test]
    fn the_cache_identity_tells_servers_apart_by_their_environment() {
        let server = || super::StdioCommand::new("/usr/bin/server").arg("--stdio");
        let plain = server().cache_identity();
        assert_eq!(plain, "/usr/bin/server\0--stdio");
        let a = server().env("TOKEN", "s3cret-a").env("REGION", "eu").cache_identity();
        let b = server().env("TOKEN", "s3cret-b").env("REGION", "eu").cache_identity();
        assert_ne!(a, b);
        assert!(!a.contains("s3cret"), "{a:?}");
        let reordered = server().env("REGION", "eu").env("TOKEN", "s3cret-a").cache_identity();
        let replaced = server()
            .env("TOKEN", "old")
            .env("REGION", "eu")
            .env("TOKEN", "s3cret-a")
            .cache_identity();
        assert_eq!((&reordered, &replaced), (&a, &a));
        let elsewhere = server().current_dir("/srv/b").cache_identity();
        assert_ne!(elsewhere, server().current_dir("/srv/a").cache_identity());
        assert_ne!(server().env_clear().cache_identity(), plain);
        assert_eq!(crate::catalog::key::without_context(&a), plain);
    }

    use super::*;

    /// A command's `Debug` (and so a host's, a driver's, a configuration file's) shows no
    /// argument and no variable's value: either may hold a token.
    #[test]
    fn a_command_shows_no_argument_or_value() {
        let command = StdioCommand::new("srv").arg("--token=s3cret").env("API_KEY", "s3cret");
        let shown = format!("{command:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("\"srv\"") && shown.contains("API_KEY"), "{shown}");
    }

    /// A lane's command keeps none of the server's credentials given as arguments either: a
    /// database URL with a password, a `--api-key=` flag (and names like `GITHUB_PAT` in the
    /// environment, which no credential word matched).
    #[test]
    fn a_lane_command_keeps_no_credential_argument() {
        let base = StdioCommand::new("srv")
            .arg("postgresql://admin:pw@db/app")
            .arg("--api-key=s3cret")
            .arg("--db=redis://:pw2@cache:6379/0")
            .arg("--verbose")
            .arg("--root=/data")
            .arg("https://example.com/x@y")
            .env("GITHUB_PAT", "ghp_x")
            .env("CI_JOB_JWT", "eyJ")
            .env("PATH", "/usr/bin");
        let lane = base.without_credentials();
        let args: Vec<_> = lane.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            args,
            [
                "postgresql://db/app",
                "--db=redis://cache:6379/0",
                "--verbose",
                "--root=/data",
                "https://example.com/x@y"
            ]
        );
        let set: Vec<_> = lane.env.iter().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
        assert_eq!(set, ["PATH"]);
    }

    /// A lane's command keeps none of the server's credential variables, nor of the host's
    /// environment it would inherit: it starts from the host's environment less those (the
    /// lane of a server started with the whole environment inherited the host's token).
    #[test]
    fn a_lane_command_keeps_no_credential_variable() {
        let base = StdioCommand::new("srv")
            .env("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_s3cret")
            .env("Api_Key", "k")
            .env("DATABASE_URL", "postgres://admin:pw@db/app")
            .env("LOG_LEVEL", "debug");
        let lane = base.without_credentials();
        assert!(lane.inherit == Inherit::AllButCredentials, "not the host's whole environment");
        let command = lane.to_command();
        let set: Vec<_> =
            command.get_envs().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
        assert!(set.contains(&"LOG_LEVEL".to_owned()), "{set:?}");
        let kept_back = |k: &String| k.contains("TOKEN") || k == "Api_Key" || k == "DATABASE_URL";
        assert!(!set.iter().any(kept_back), "{set:?}");
        // What the host's environment passes on.
        let var = |k: &str, v: &str| passes_to_a_lane(OsStr::new(k), OsStr::new(v));
        assert!(var("PATH", "/usr/bin") && var("RUST_LOG", "debug"));
        assert!(var("SITE", "https://example.com/x@y"), "an @ in the path is no user");
        assert!(!var("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_x"));
        assert!(!var("REDIS_URL", "redis://:pw@cache:6379"));
        assert!(!var("MIRROR", "https://tok@git.example.com/r"));
        assert!(!var("PROXY", "http://alice:pa/ss@proxy:3128"), "a password with a slash");
        assert!(!var("HOOK", "https://h.example.com/in?api_key=k"));
        // A server that keeps the host's environment back keeps it back on its lanes too.
        assert!(StdioCommand::new("srv").safe_env().without_credentials().inherit == Inherit::Safe);
    }

    /// A short read stops the reading only while the server's end is open: when the event
    /// also reports the close, the driver reads on to the end of file, which no later event
    /// would announce.
    #[test]
    fn a_line_and_the_close_in_one_event_still_end_the_process() {
        let (mut poll, mut engine, mut driver, now) =
            spawned("echo not-json; exit 3", Config::default());
        let first = driver.running.as_ref().map(|r| r.child.id());
        // Let the line and the close both arrive before the one wait, so one event has both.
        std::thread::sleep(Duration::from_millis(300));
        let mut events = mio::Events::with_capacity(8);
        let deadline = Instant::now() + Duration::from_secs(5);
        let stdout = loop {
            crate::driver::wait_events(&mut poll, &mut events, Some(Duration::from_secs(1)));
            if let Some(e) = events.iter().find(|e| e.token() == Token(STDOUT)) {
                break e;
            }
            assert!(Instant::now() < deadline, "no stdout event");
        };
        assert!(stdout.is_read_closed(), "the test needs the close in the same event");
        driver.handle_event(poll.registry(), stdout, &mut engine, now).unwrap();
        assert_eq!(engine.stats().invalid_frames, 1);
        // An exit during the probe is a fallback to the legacy handshake on a new process.
        let second = driver.running.as_ref().map(|r| r.child.id());
        assert!(first.is_some() && second != first, "the exit was not seen");
    }

    /// The stderr tail is not allocated up front: `usize::MAX` (keep all of it) panicked in
    /// `add_stdio_server` with a capacity overflow, and every server and lane paid for the
    /// whole tail before a byte came.
    #[test]
    fn an_unbounded_stderr_tail_is_not_allocated_up_front() {
        let config = Config { stderr_tail_bytes: usize::MAX, ..Config::default() };
        let driver = StdioDriver::new(StdioCommand::new("true"), &config, Token(0));
        assert_eq!(driver.stderr_tail.capacity(), 0);
        assert_eq!(driver.stderr_tail(), "");
    }

    /// The liveness look that finds the child gone hands over the lines it wrote first: with
    /// more lines than one turn takes, the look came due between turns and ended the process
    /// at once, and the lines left unread (replies among them) were lost.
    #[test]
    fn a_child_seen_gone_by_the_liveness_look_keeps_its_last_lines() {
        let config = Config { frames_per_readiness: 1, ..Config::default() };
        let (mut poll, mut engine, mut driver, now) =
            spawned("echo a; echo b; echo c; exit 3", config);
        // The probe is outstanding: the liveness look is armed.
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        let first = driver.running.as_ref().map(|r| r.child.id());
        // All three lines and the exit are there before the one event is handled: the events
        // are only looked at until one says stdout closed (the child wrote all and exited).
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = mio::Events::with_capacity(8);
        let closed = loop {
            assert!(Instant::now() < deadline, "stdout never closed");
            crate::driver::wait_events(&mut poll, &mut events, Some(Duration::from_secs(1)));
            let stdout = events.iter().find(|e| e.token() == Token(STDOUT));
            if let Some(e) = stdout.filter(|e| e.is_read_closed()) {
                break e.clone();
            }
        };
        // The child closes stdout as it exits, a moment before it can be reaped: waited for
        // too (its status is kept by `Child`, so the driver's look finds it), or on a busy
        // machine the look could come before the exit and the turns below end first.
        let running = driver.running.as_mut().unwrap();
        while running.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the child never exited");
            wait_a_little(&mut poll, &mut events);
        }
        driver.handle_event(poll.registry(), &closed, &mut engine, now).unwrap();
        assert_eq!(engine.stats().invalid_frames, 1, "one line per turn");
        assert!(driver.has_backlog());
        // The look comes due before the next turn, then the turns go on as a host's ticks.
        let later = now + Duration::from_secs(2);
        driver.handle_timeout(poll.registry(), &mut engine, later).unwrap();
        for _ in 0..10 {
            if driver.running.as_ref().map(|r| r.child.id()) != first {
                break;
            }
            driver.resume(poll.registry(), &mut engine, later).unwrap();
            driver.handle_timeout(poll.registry(), &mut engine, later).unwrap();
        }
        assert_ne!(driver.running.as_ref().map(|r| r.child.id()), first, "the exit was seen");
        assert_eq!(engine.stats().invalid_frames, 3, "every line was read before the exit");
    }

    /// A child seen gone whose stdout another process holds and writes on without end (a
    /// helper it started in the background): its exit waits for what it can have left in the
    /// pipe, not for good. The exit, the restart and the kill of its group waited for ever.
    #[test]
    fn a_child_seen_gone_is_ended_though_a_helper_writes_on_its_stdout() {
        let config = Config { frames_per_readiness: 1024, ..Config::default() };
        let (mut poll, mut engine, mut driver, now) = spawned("(yes '{}' &); exit 3", config);
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        let first = driver.running.as_ref().map(|r| r.child.id()).unwrap();
        // The helper has written, and the child has exited (its status kept by `Child`, so
        // the driver's look finds it), before the look comes due.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = mio::Events::with_capacity(8);
        loop {
            assert!(Instant::now() < deadline, "the helper never wrote");
            crate::driver::wait_events(&mut poll, &mut events, Some(Duration::from_secs(1)));
            if events.iter().any(|e| e.token() == Token(STDOUT) && e.is_readable()) {
                break;
            }
        }
        let running = driver.running.as_mut().unwrap();
        while running.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the child never exited");
            wait_a_little(&mut poll, &mut events);
        }
        let mut later = now;
        let mut ended = false;
        for _ in 0..100_000 {
            later += Duration::from_secs(2);
            driver.handle_timeout(poll.registry(), &mut engine, later).unwrap();
            driver.resume(poll.registry(), &mut engine, later).unwrap();
            if driver.running.as_ref().is_none_or(|r| r.child.id() != first || r.exit.is_some()) {
                ended = true;
                break;
            }
        }
        // The helper is in the child's process group: killed with it, or here.
        if let Some(group) = rustix::process::Pid::from_raw(first as i32) {
            let _ = rustix::process::kill_process_group(group, Signal::KILL);
        }
        assert!(engine.stats().invalid_frames > 1000, "the helper's lines were read");
        assert!(ended, "the exit was never reported");
    }

    /// A second `spawn` while the child runs starts nothing: it replaced the first child,
    /// which was neither killed nor reaped.
    #[test]
    fn a_second_spawn_while_the_child_runs_starts_nothing() {
        let (poll, mut engine, mut driver, now) = spawned("exec sleep 1000", Config::default());
        let first = driver.pid();
        let again = driver.spawn(poll.registry(), &mut engine, now);
        assert_eq!(again.map_err(|e| e.kind()), Err(io::ErrorKind::AlreadyExists));
        assert_eq!(driver.pid(), first);
        driver.shutdown(poll.registry(), Duration::from_millis(50));
    }

    /// A driver of `sh -c script`, its child started under an engine of `config`: the poll,
    /// the engine, the driver and the time it started at.
    fn spawned(script: &str, config: Config) -> (mio::Poll, Engine, StdioDriver, Instant) {
        let poll = mio::Poll::new().unwrap();
        let now = Instant::now();
        let mut engine = Engine::new(config, now).unwrap();
        let command = StdioCommand::new("sh").args(["-c", script]);
        let mut driver = StdioDriver::new(command, engine.config(), Token(0));
        driver.spawn(poll.registry(), &mut engine, now).unwrap();
        (poll, engine, driver, now)
    }

    /// Waits up to 10 ms for events; a signal that cut the wait short (a child's exit) is
    /// only an earlier return.
    fn wait_a_little(poll: &mut mio::Poll, events: &mut mio::Events) {
        crate::driver::wait_events(poll, events, Some(Duration::from_millis(10)));
    }

    /// A configuration whose saved era verdict makes the engine ready at once: calls go to
    /// the child with no probe to answer.
    fn saved_verdict_config() -> Config {
        let saved = crate::config::SavedVerdict {
            version: crate::proto::version::ProtocolVersion::MODERN,
            result: r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}"#.into(),
            expires: std::time::SystemTime::now() + Duration::from_secs(600),
        };
        Config { saved_discover: Some(saved), ..Config::default() }
    }

    /// The liveness look that ends a child which exited during the era probe may start the
    /// next process at once (the engine's fallback to `initialize`): it ended that new
    /// process too, as if it were the one seen gone (its pipes closed, killed, counted as a
    /// crash).
    #[test]
    fn the_liveness_look_leaves_the_process_it_started_alone() {
        // The first process exits; the next stays (one that exited at once too could find
        // its stdin closed by its first write, which is no business of this test's).
        let marker = std::env::temp_dir().join(format!("mcpoll-liveness-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let script = format!(
            "if [ -e '{0}' ]; then exec sleep 1000; fi; : > '{0}'; exit 3",
            marker.display()
        );
        let (mut poll, mut engine, mut driver, now) = spawned(&script, Config::default());
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        let first = driver.running.as_ref().map(|r| r.child.id());
        // Gone before any event is handled (its status kept by `Child` for the look).
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = mio::Events::with_capacity(8);
        let running = driver.running.as_mut().unwrap();
        while running.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the child never exited");
            wait_a_little(&mut poll, &mut events);
        }
        driver.handle_timeout(poll.registry(), &mut engine, now + Duration::from_secs(2)).unwrap();
        let next = driver.running.as_ref().expect("the fallback's process");
        assert_ne!(Some(next.child.id()), first, "a new process");
        assert!(next.exit.is_none() && next.stdin.is_some(), "left running, its stdin open");
        drop(driver.detach(poll.registry(), Duration::from_millis(1), now));
        let _ = std::fs::remove_file(&marker);
    }

    /// A restart whose backoff ran out is the engine's timer, not the driver's: a program
    /// driving the two itself called `handle_timeout` as documented and no process ever
    /// started again (only the host's own upkeep spawned it), so every queued call timed out.
    #[test]
    fn the_driver_starts_the_next_process_once_the_backoff_ran_out() {
        let (mut poll, mut engine, mut driver, now) =
            spawned("read line; exit 1", saved_verdict_config());
        let args: &serde_json::value::RawValue = serde_json::from_str("{}").unwrap();
        engine.call_tool(now, "echo", args, &crate::CallOptions::default()).unwrap();
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        let first = driver.pid();
        until_gone(&mut poll, &mut engine, &mut driver);
        assert!(!engine.wants_transport(), "a crash waits for its backoff");
        let later = Instant::now() + Duration::from_secs(5);
        engine.handle_timeout(later);
        assert!(engine.wants_transport());
        driver.handle_timeout(poll.registry(), &mut engine, later).unwrap();
        assert!(driver.pid().is_some() && driver.pid() != first, "the next process");
        drop(driver.detach(poll.registry(), Duration::from_millis(1), later));
    }

    /// Runs the child until its exit is seen, handling readiness and timeouts.
    fn until_gone(poll: &mut mio::Poll, engine: &mut Engine, driver: &mut StdioDriver) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = mio::Events::with_capacity(8);
        while driver.running.is_some() {
            assert!(Instant::now() < deadline, "the child's exit was never seen");
            wait_a_little(poll, &mut events);
            let now = Instant::now();
            for e in events.iter() {
                driver.handle_readiness(poll.registry(), e.token(), engine, now).unwrap();
            }
            driver.handle_timeout(poll.registry(), engine, now).unwrap();
        }
    }

    /// `Engine::restart` of a degraded server asks for a process with no timer due: a program
    /// driving the two itself flushes after a command, and that starts it (only the host's
    /// own upkeep did, so the next call waited out its deadline).
    #[test]
    fn a_flush_after_engine_restart_starts_the_process() {
        let restart = crate::config::RestartPolicy {
            crash_loop_exits: 1,
            ..crate::config::RestartPolicy::default()
        };
        let config = Config { restart, ..saved_verdict_config() };
        let (mut poll, mut engine, mut driver, now) = spawned("exit 1", config);
        until_gone(&mut poll, &mut engine, &mut driver);
        assert!(engine.is_degraded() && !engine.wants_transport());
        engine.restart();
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        assert!(driver.pid().is_some(), "started by the flush after the command");
        drop(driver.detach(poll.registry(), Duration::from_millis(1), now));
    }

    /// A restart whose process cannot start is the engine's to hear, as an exit is: it
    /// tries again with backoff. Returned as a bare error, it left the engine asking for a
    /// process, and every later look tried to start it again at once.
    #[test]
    fn a_restart_that_cannot_start_is_told_to_the_engine() {
        let dir = std::env::temp_dir().join(format!("mcpoll-respawn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("server.sh");
        std::fs::write(&script, "#!/bin/sh\nexit 1\n").unwrap();
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&script, mode).unwrap();
        let mut poll = mio::Poll::new().unwrap();
        let now = Instant::now();
        let mut engine = Engine::new(saved_verdict_config(), now).unwrap();
        let mut driver = StdioDriver::new(StdioCommand::new(&script), engine.config(), Token(0));
        driver.spawn(poll.registry(), &mut engine, now).unwrap();
        until_gone(&mut poll, &mut engine, &mut driver);
        std::fs::remove_dir_all(&dir).unwrap();
        let later = Instant::now() + Duration::from_secs(5);
        engine.handle_timeout(later);
        assert!(engine.wants_transport());
        driver.flush(poll.registry(), &mut engine, later).unwrap();
        assert!(driver.pid().is_none());
        assert!(!engine.wants_transport(), "the engine heard it and waits for its backoff");
        assert!(engine.poll_timeout().is_some_and(|t| t > later), "the next try is scheduled");
    }

    /// The write buffer gives back the room one large frame grew it to, once the frame is out
    /// (not at the next frame, which an idle server may never send): it kept it for the
    /// server's life (the engine and the framer shed theirs).
    #[test]
    fn the_write_buffer_sheds_a_large_frame_once_it_is_out() {
        // Reads nothing at first: the first flush leaves most of the frame in the buffer.
        let (mut poll, mut engine, mut driver, now) =
            spawned("sleep 1; exec cat >/dev/null", saved_verdict_config());
        let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(8 << 20));
        let args: &serde_json::value::RawValue = serde_json::from_str(&big).unwrap();
        engine.call_tool(now, "echo", args, &crate::CallOptions::default()).unwrap();
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        assert!(driver.out.capacity() >= 8 << 20);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = mio::Events::with_capacity(8);
        while driver.unsent() > 0 {
            assert!(Instant::now() < deadline, "the child never read it all");
            wait_a_little(&mut poll, &mut events);
            driver.flush(poll.registry(), &mut engine, now).unwrap();
        }
        // Given back once written, with no next frame to come (an idle server kept it).
        assert!(driver.out.capacity() <= driver.keep_out, "{}", driver.out.capacity());
        let small: &serde_json::value::RawValue = serde_json::from_str("{}").unwrap();
        engine.call_tool(now, "echo", small, &crate::CallOptions::default()).unwrap();
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        assert_eq!(driver.unsent(), 0, "and the buffer serves the next frame");
        drop(driver.detach(poll.registry(), Duration::from_millis(1), now));
    }

    /// A child that reads nothing and exits after a second, sent two writes: the first fills
    /// the pipe, the second waits whole behind it (both taken from the engine: the first is
    /// under `max_write_buffer_bytes`). Gives the two calls.
    fn two_writes_to_a_child_that_reads_nothing(
        script: &str,
        config: Config,
    ) -> (mio::Poll, Engine, StdioDriver, crate::CallId, crate::CallId) {
        let (poll, mut engine, mut driver, now) = spawned(script, config);
        let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(200 << 10));
        let big: &serde_json::value::RawValue = serde_json::from_str(&big).unwrap();
        let small: &serde_json::value::RawValue = serde_json::from_str("{}").unwrap();
        let opts = crate::CallOptions::default();
        let first = engine.call_tool(now, "write", big, &opts).unwrap();
        let second = engine.call_tool(now, "write", small, &opts).unwrap();
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        assert!(driver.unsent() > small.get().len(), "the second call is all in the buffer");
        (poll, engine, driver, first, second)
    }

    /// Drives the driver until its child is gone; the calls that failed meanwhile.
    fn failures_until_exit(
        poll: &mut mio::Poll,
        engine: &mut Engine,
        driver: &mut StdioDriver,
    ) -> Vec<(crate::CallId, crate::CallError)> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = mio::Events::with_capacity(8);
        let mut failed = Vec::new();
        while driver.is_running() {
            assert!(Instant::now() < deadline, "the child never exited");
            wait_a_little(poll, &mut events);
            // The clock moves on: a child seen closing stdout just before it exits is looked
            // at again when its watch is due.
            let now = Instant::now();
            for e in &events {
                driver.handle_event(poll.registry(), e, engine, now).unwrap();
            }
            driver.handle_timeout(poll.registry(), engine, now).unwrap();
            while let Some(e) = engine.poll_event() {
                if let crate::Event::CallFailed { call, error, .. } = e {
                    failed.push((call, error.clone()));
                }
            }
        }
        failed
    }

    /// A request whose first byte never reached the pipe when the child died was not
    /// delivered: it goes to the next process (here, after the restart's backoff), where it
    /// ended `DeliveryUnknown` with the writes that may have been read.
    #[test]
    fn a_request_never_written_to_a_dead_child_goes_to_the_next_one() {
        let (mut poll, mut engine, mut driver, first, second) =
            two_writes_to_a_child_that_reads_nothing("sleep 1; exit 1", saved_verdict_config());
        let failed = failures_until_exit(&mut poll, &mut engine, &mut driver);
        let ended: Vec<_> = failed.iter().map(|(call, e)| (*call, e.name())).collect();
        assert_eq!(ended, [(first, "delivery_unknown")], "the first may have been read");
        assert!(engine.is_pending(second), "the second was never written: it goes again");
        drop(driver.detach(poll.registry(), Duration::from_millis(1), Instant::now()));
    }

    /// A server that closes its stdin and runs on (its stdout open) takes no request again:
    /// the write that finds the pipe closed leads to its end (and the engine's restart), not
    /// to a process kept for good with every call waiting out its deadline.
    #[test]
    fn a_child_that_closes_its_stdin_and_runs_on_is_ended() {
        let (mut poll, mut engine, mut driver, now) =
            spawned("exec 0<&-; echo closed >&2; exec sleep 1000", saved_verdict_config());
        let first = driver.pid().expect("running");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = mio::Events::with_capacity(8);
        while !driver.stderr_tail().contains("closed") {
            assert!(Instant::now() < deadline, "the child never closed its stdin");
            wait_a_little(&mut poll, &mut events);
            for e in &events {
                driver.handle_event(poll.registry(), e, &mut engine, now).unwrap();
            }
        }
        let args: &serde_json::value::RawValue = serde_json::from_str("{}").unwrap();
        let read = crate::CallOptions {
            idempotency: Some(crate::Idempotency::Read),
            ..crate::CallOptions::default()
        };
        let mut last = None;
        while driver.pid() == Some(first) {
            assert!(Instant::now() < deadline, "the child that took no input was kept");
            // A write finds the pipe closed, unless a child another test was starting held
            // its read end for the moment between its fork and its exec: then the next one.
            if driver.running.as_ref().is_some_and(|r| r.stdin.is_some()) {
                last = Some(engine.call_tool(now, "echo", args, &read).unwrap());
                driver.flush(poll.registry(), &mut engine, now).unwrap();
            }
            wait_a_little(&mut poll, &mut events);
            let now = Instant::now();
            for e in &events {
                driver.handle_event(poll.registry(), e, &mut engine, now).unwrap();
            }
            driver.handle_timeout(poll.registry(), &mut engine, now).unwrap();
        }
        let mut lost = false;
        while let Some(e) = engine.poll_event() {
            lost |= matches!(e, crate::Event::TransportLost { .. });
        }
        assert!(lost, "the engine was told, to restart it");
        let last = last.expect("a call was made");
        assert!(engine.is_pending(last), "the call never written waits for the next process");
        drop(driver.detach(poll.registry(), Duration::from_millis(1), Instant::now()));
    }

    /// A child that closed its stdin and writes on is ended too when what failed to reach it
    /// was no request (here the answer to a legacy server's `ping`): the look the failed
    /// write armed was dropped with the child's next line ("the last answer is in": no call
    /// was pending), and nothing armed it again, so the child was kept for good, every later
    /// call waiting out its deadline.
    #[test]
    fn a_child_that_closed_its_stdin_and_writes_on_is_ended() {
        // The handshake answered (with the id it came with), then stdin closed, and a `ping`
        // and a notice every 200 ms: a `ping` again, in case another test's child, between
        // its fork and its exec, held the pipe's read end when the first answer was written.
        let script = r#"read init
            id=$(echo "$init" | sed 's/.*"id":\([0-9]*\).*/\1/')
            echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}'
            read initialized
            exec 0<&-
            while :; do
                echo '{"jsonrpc":"2.0","id":"p1","method":"ping"}'
                echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'
                sleep 0.2
            done"#;
        let config = Config { era: crate::EraPreference::LegacyOnly, ..Config::default() };
        let (mut poll, mut engine, mut driver, _) = spawned(script, config);
        let first = driver.pid().expect("running");
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut events = mio::Events::with_capacity(8);
        let mut ready = false;
        while driver.pid() == Some(first) {
            assert!(Instant::now() < deadline, "the child that took no input was kept");
            wait_a_little(&mut poll, &mut events);
            let now = Instant::now();
            for e in &events {
                driver.handle_event(poll.registry(), e, &mut engine, now).unwrap();
            }
            driver.handle_timeout(poll.registry(), &mut engine, now).unwrap();
            while let Some(e) = engine.poll_event() {
                ready |= matches!(e, crate::Event::Ready { .. });
            }
        }
        assert!(ready, "the handshake was done");
        drop(driver.detach(poll.registry(), Duration::from_millis(1), Instant::now()));
    }

    /// A request never written to a child that died ends, when it has no attempt left, with
    /// the child's exit (its status and stderr), not with a write failure that never happened.
    #[test]
    fn a_request_never_written_ends_with_the_childs_exit_when_no_attempt_is_left() {
        let retry = crate::config::RetryPolicy { max_attempts: 1, ..Default::default() };
        let config = Config { retry, ..saved_verdict_config() };
        let (mut poll, mut engine, mut driver, _, second) =
            two_writes_to_a_child_that_reads_nothing("echo bye >&2; sleep 1; exit 1", config);
        let failed = failures_until_exit(&mut poll, &mut engine, &mut driver);
        let second_error = failed.into_iter().find(|(call, _)| *call == second);
        let Some((_, crate::CallError::Transport(TransportError::ProcessExit(exit)))) =
            second_error
        else {
            panic!("{second_error:?}");
        };
        assert_eq!(exit.code, Some(1));
        assert!(exit.stderr_tail.contains("bye"), "{exit:?}");
        drop(driver.detach(poll.registry(), Duration::from_millis(1), Instant::now()));
    }

    /// A detached child's unwritten bytes go with it: nothing will write them, and kept they
    /// were work the driver seemed to have for good (a closed server's host never idle).
    #[test]
    fn a_detached_child_leaves_nothing_to_write() {
        // A saved verdict: the call goes at once, with no probe to answer.
        // Never reads stdin: the pipe fills, and the rest waits in the driver.
        let (poll, mut engine, mut driver, now) =
            spawned("exec sleep 1000", saved_verdict_config());
        let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(1 << 20));
        let args: &serde_json::value::RawValue = serde_json::from_str(&big).unwrap();
        engine.call_tool(now, "echo", args, &crate::CallOptions::default()).unwrap();
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        assert!(driver.unsent() > 0, "the pipe took it all");
        let exiting = driver.detach(poll.registry(), Duration::from_millis(1), now);
        assert_eq!(driver.unsent(), 0);
        // Ended (SIGTERM, then SIGKILL, a millisecond each) and reaped.
        exiting.expect("it was running").wait().unwrap();
    }

    /// A server that exits while a process it started holds its stdout (a helper that
    /// inherited the pipe) gives no end of file: with a request outstanding, the driver asks
    /// the child itself, and its exit is seen (here the probe's fallback starts a new
    /// process) instead of the calls waiting out their deadlines.
    #[test]
    fn an_exit_is_seen_while_a_process_it_started_holds_stdout() {
        let (mut poll, mut engine, mut driver, now) =
            spawned("sleep 1000 & exit 3", Config::default());
        driver.flush(poll.registry(), &mut engine, now).unwrap();
        let first = driver.running.as_ref().map(|r| r.child.id());
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = mio::Events::with_capacity(8);
        while driver.running.as_ref().map(|r| r.child.id()) == first {
            assert!(Instant::now() < deadline, "the exit was not seen");
            let due = driver.poll_timeout().expect("a look at the child while the probe waits");
            let wait = due.saturating_duration_since(Instant::now());
            crate::driver::wait_events(&mut poll, &mut events, Some(wait));
            let now = Instant::now();
            for event in events.iter() {
                driver.handle_event(poll.registry(), event, &mut engine, now).unwrap();
            }
            driver.handle_timeout(poll.registry(), &mut engine, now).unwrap();
        }
    }

    /// Reads of stdout start small and grow only while they fill what they asked for, to
    /// `READ_CHUNK`; they land in the framer, so stderr's buffer stays as it was.
    #[test]
    fn the_read_buffer_grows_with_what_the_server_writes() {
        let mut poll = mio::Poll::new().unwrap();
        let now = Instant::now();
        let mut engine = Engine::new(Config::default(), now).unwrap();
        // One 65,000-byte line (not JSON), which the pipe holds whole (64 KiB), then a mark
        // that it was written, then silence until killed. Reading only once it is all there
        // makes the reads fill 4, 8, 16 and 32 KiB, however the machine schedules the writer.
        let written = std::env::temp_dir().join(format!("mcpoll-grow-{}", std::process::id()));
        let _ = std::fs::remove_file(&written);
        let script = "head -c 65000 /dev/zero | tr '\\0' a; echo; touch \"$0\"; sleep 30";
        let command = StdioCommand::new("sh").args(["-c", script]).arg(&written);
        let mut driver = StdioDriver::new(command, engine.config(), Token(0));
        assert_eq!(driver.stdout_read, READ_START);
        driver.spawn(poll.registry(), &mut engine, now).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !written.exists() {
            assert!(Instant::now() < deadline, "the line was never written");
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(&written);
        let mut events = mio::Events::with_capacity(8);
        while engine.stats().invalid_frames == 0 && Instant::now() < deadline {
            crate::driver::wait_events(&mut poll, &mut events, Some(Duration::from_millis(100)));
            for e in events.iter() {
                driver.handle_event(poll.registry(), e, &mut engine, now).unwrap();
            }
        }
        assert_eq!(engine.stats().invalid_frames, 1, "the line was read");
        assert_eq!(driver.stdout_read, READ_CHUNK);
        assert_eq!(driver.read_buf.len(), READ_START, "stdout's reads do not grow stderr's buffer");
        if let Some(r) = driver.running.as_mut() {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }

    #[test]
    fn splits_command_lines_like_a_shell() {
        let cases: &[(&str, &[&str])] = &[
            ("python3 server.py", &["python3", "server.py"]),
            ("  a\t b  ", &["a", "b"]),
            ("node 'my server.mjs' --x", &["node", "my server.mjs", "--x"]),
            (r#"sh -c "echo \"hi\" \$HOME""#, &["sh", "-c", r#"echo "hi" $HOME"#]),
            (r#"a "b\n" c"#, &["a", r"b\n", "c"]),
            (r"a\ b c", &["a b", "c"]),
            ("a '' b", &["a", "", "b"]),
            (r#"x"y"'z'"#, &["xyz"]),
            ("'$HOME' *", &["$HOME", "*"]),
            // A backslash before a line end continues the line: no empty word where it was.
            ("docker run -i \\\n  -e T img", &["docker", "run", "-i", "-e", "T", "img"]),
            ("a \\\n", &["a"]),
            ("a\\\nb", &["ab"]),
        ];
        for (line, want) in cases {
            assert_eq!(split_words(line).unwrap(), *want, "{line}");
        }
        assert_eq!(split_words("a 'b").unwrap_err(), CommandLineError::UnclosedQuote);
        assert_eq!(split_words("a \"b").unwrap_err(), CommandLineError::UnclosedQuote);
        assert_eq!(split_words("a \\").unwrap_err(), CommandLineError::TrailingBackslash);
        assert_eq!(StdioCommand::from_command_line("   ").unwrap_err(), CommandLineError::Empty);
        let c = StdioCommand::from_command_line("srv --port 1").unwrap();
        assert_eq!(c.program(), "srv");
        assert_eq!(c.args, ["--port", "1"]);
    }
}
