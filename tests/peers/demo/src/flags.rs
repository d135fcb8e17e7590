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
    pub(crate) silent_list: bool,
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
    /// Whether tools/list shows the schema test tools (`bad_output`, `remote_ref`).
    pub(crate) schema_tools: bool,
    /// Generated tools (`bulk_000000`...) that tools/list serves instead of the usual ones,
    /// 1,000 a page: a large listing for memory tests (100,000 make about 9.6 MB of JSON).
    pub(crate) bulk_tools: u64,
    /// `--tasks`: the tasks extension (src/tasks.rs).
    pub(crate) tasks: bool,
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
                "--silent-list" => flags.silent_list = true,
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
                "--schema-tools" => flags.schema_tools = true,
                "--bulk-tools" => flags.bulk_tools = number_arg(&arg, args.next())?,
                "--tasks" => flags.tasks = true,
                "-h" | "--help" => return Err(FlagError::Help),
                other => return Err(FlagError::Bad(format!("unknown flag `{other}`"))),
            }
        }
        flags.check()?;
        Ok(flags)
    }

    /// Refuses combinations that cannot mean anything, rather than ignoring a flag silently.
    fn check(&self) -> Result<(), FlagError> {
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
     [--silent-list] [--junk-stdout] [--stderr-noise KIB] [--crash-on TOOL] [--startup-ms MS] \
     [--state-file PATH] [--resilience-tools] [--schema-tools] [--bulk-tools N] [--tasks] \
     [--http PORT] [--fault SPEC]...\n\
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Result<Flags, FlagError> {
        Flags::parse(args.split_whitespace().map(String::from))
    }

    #[test]
    fn faults_arm_per_tool_and_per_count() {
        let flags = parse("--fault crash:add --fault fail-first:echo:2 --crash-on slow").unwrap();
        assert!(flags.resilience_tools, "--fault lists the resilience tools");
        assert!(flags.armed_faults("add", 5).has(FaultKind::Crash));
        assert!(flags.armed_faults("echo", 2).has(FaultKind::FailFirst));
        assert!(flags.armed_faults("echo", 3).is_empty(), "fail-first:echo:2 spares call 3");
        assert!(flags.armed_faults("slow", 1).has(FaultKind::Crash), "--crash-on is crash:");
        assert!(flags.armed_faults("lookup", 1).is_empty());
    }

    #[test]
    fn exit_on_start_is_a_switch_not_a_tool_fault() {
        let flags = parse("--fault exit-on-start").unwrap();
        assert!(flags.exit_on_start);
        assert!(flags.faults.is_empty());
    }

    #[test]
    fn bad_specs_and_meaningless_combinations_are_refused() {
        for (args, why) in [
            ("--fault explode:add", "unknown kind"),
            ("--fault crash", "needs a tool"),
            ("--fault fail-first:add", "needs a count"),
            ("--fault crash:add:x", "N must be"),
            ("--fault crash:add:1:2", "too many"),
            ("--fault exit-on-start:add", "takes no tool"),
            ("--fault reset-mid-sse:slow", "needs --http"),
            ("--http 0 --legacy-only", "modern era only"),
            ("--stderr-noise", "needs a value"),
            ("--startup-ms soon", "non-negative integer"),
            ("--bogus", "unknown flag"),
        ] {
            match parse(args) {
                Err(FlagError::Bad(got)) => assert!(got.contains(why), "{args}: {got}"),
                other => panic!("{args} must be refused, got {other:?}"),
            }
        }
    }
}
