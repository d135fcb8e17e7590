//! The command line: the switches that make this server misbehave on purpose, and the faults
//! that act before the first byte of stdin is read.

use std::io::{self, Write};
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use crate::faults::{parse_fault, Armed, Fault, FaultKind};

const JUNK_BANNER: &str = "demo server starting";

/// Fault-injection switches; see the comment at the top of the file.
#[derive(Debug, Default)]
pub(crate) struct Flags {
    pub(crate) legacy_only: bool,
    pub(crate) exit_on_non_initialize: bool,
    pub(crate) silent_discover: bool,
    pub(crate) junk_stdout: bool,
    pub(crate) stderr_noise_kib: u64,
    pub(crate) startup_ms: u64,
    /// Every tool fault, `--crash-on TOOL` included (as `crash:TOOL`).
    pub(crate) faults: Vec<Fault>,
    pub(crate) exit_on_start: bool,
    pub(crate) state_file: Option<PathBuf>,
    pub(crate) http_port: Option<u16>,
    /// Whether tools/list shows the resilience tools. Off by default: the integration tests
    /// pin the default listing to five tools.
    pub(crate) resilience_tools: bool,
}

#[derive(Debug)]
pub(crate) enum FlagError {
    Help,
    Bad(String),
}

impl Flags {
    pub(crate) fn parse(mut args: impl Iterator<Item = String>) -> Result<Flags, FlagError> {
        let mut flags = Flags::default();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--legacy-only" => flags.legacy_only = true,
                "--exit-on-non-initialize" => flags.exit_on_non_initialize = true,
                "--silent-discover" => flags.silent_discover = true,
                "--junk-stdout" => flags.junk_stdout = true,
                "--stderr-noise" => flags.stderr_noise_kib = number_arg(&arg, args.next())?,
                "--crash-on" => {
                    let tool = value_arg(&arg, args.next())?;
                    flags.faults.push(Fault { kind: FaultKind::Crash, tool, limit: None });
                }
                "--startup-ms" => flags.startup_ms = number_arg(&arg, args.next())?,
                "--fault" => {
                    let fault = parse_fault(&value_arg(&arg, args.next())?)?;
                    if fault.kind == FaultKind::ExitOnStart {
                        flags.exit_on_start = true;
                    } else {
                        flags.faults.push(fault);
                    }
                    flags.resilience_tools = true;
                }
                "--state-file" => {
                    flags.state_file = Some(PathBuf::from(value_arg(&arg, args.next())?));
                    flags.resilience_tools = true;
                }
                "--http" => {
                    flags.http_port = Some(port_arg(&arg, args.next())?);
                    flags.resilience_tools = true;
                }
                "--resilience-tools" => flags.resilience_tools = true,
                "-h" | "--help" => return Err(FlagError::Help),
                other => return Err(FlagError::Bad(format!("unknown flag `{other}`"))),
            }
        }
        flags.check()?;
        Ok(flags)
    }

    /// Refuses combinations that cannot mean anything, rather than ignoring a flag silently.
    pub(crate) fn check(&self) -> Result<(), FlagError> {
        if self.http_port.is_some() {
            if self.legacy_only || self.exit_on_non_initialize {
                return Err(FlagError::Bad(
                    "--http serves the modern era only: no --legacy-only or \
                     --exit-on-non-initialize"
                        .into(),
                ));
            }
        } else if let Some(fault) = self.faults.iter().find(|f| f.kind.http_only()) {
            return Err(FlagError::Bad(format!("`--fault {}` needs --http", fault.kind.name())));
        }
        Ok(())
    }

    /// The faults that act on this call: those naming `tool` whose count, if any, has not run
    /// out. `calls` is how many calls of `tool` have arrived, this one included.
    pub(crate) fn armed_faults(&self, tool: &str, calls: u64) -> Armed {
        let mut armed = Armed::default();
        for fault in &self.faults {
            if fault.tool == tool && fault.limit.is_none_or(|n| calls <= n) {
                armed.add(fault.kind);
            }
        }
        armed
    }
}

fn value_arg(flag: &str, value: Option<String>) -> Result<String, FlagError> {
    value.ok_or_else(|| FlagError::Bad(format!("`{flag}` needs a value")))
}

fn number_arg(flag: &str, value: Option<String>) -> Result<u64, FlagError> {
    let value = value_arg(flag, value)?;
    value.parse().map_err(|_| {
        FlagError::Bad(format!("`{flag}` needs a non-negative integer, got `{value}`"))
    })
}

fn port_arg(flag: &str, value: Option<String>) -> Result<u16, FlagError> {
    let value = value_arg(flag, value)?;
    value.parse().map_err(|_| FlagError::Bad(format!("`{flag}` needs a port, got `{value}`")))
}

pub(crate) fn usage() -> &'static str {
    "usage: demo_server [--legacy-only] [--exit-on-non-initialize] [--silent-discover] \
     [--junk-stdout] [--stderr-noise KIB] [--crash-on TOOL] [--startup-ms MS] \
     [--state-file PATH] [--resilience-tools] [--http PORT] [--fault SPEC]...\n\
     fault specs: crash|truncate|garbage|unknown-id|duplicate|late-after-cancel|hang|drip|\
     oversize:TOOL[:N], fail-first:TOOL:N, exit-on-start, and with --http also \
     reset-mid-sse|close-before-reply:TOOL[:N], status-then-ok:TOOL:N"
}

/// Applies the faults that happen before the first byte of stdin is read.
pub(crate) fn run_startup_faults(flags: &Flags) {
    if flags.junk_stdout {
        let mut stdout = io::stdout().lock();
        // Ignoring errors: if stdout is already gone, the first real reply reports it.
        let _ = writeln!(stdout, "{JUNK_BANNER}").and_then(|()| stdout.flush());
    }
    if flags.stderr_noise_kib > 0 {
        write_stderr_noise(flags.stderr_noise_kib);
    }
    if flags.startup_ms > 0 {
        thread::sleep(Duration::from_millis(flags.startup_ms));
    }
}

/// Writes `kib` KiB of filler lines to stderr. A client that never drains the child's stderr
/// makes this block once the pipe buffer (often 64 KiB) is full, which is what tests look for.
fn write_stderr_noise(kib: u64) {
    let mut stderr = io::stderr().lock();
    for n in 0..kib * 16 {
        // 64 bytes per line, 16 lines per KiB.
        if writeln!(stderr, "[noise] filler line {n:>12} {:.<30}", "").is_err() {
            return;
        }
    }
}
