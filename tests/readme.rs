//! The README runs as written. Every ```rust block in it is part of an example that CI builds,
//! verbatim (at one indentation, so a fragment may sit in a function body): the Usage program
//! is `examples/usage.rs`, the fragments are in `examples/snippets.rs`. And the Usage program,
//! run against the echo server, calls it and exits, sleeps while it waits instead of spinning,
//! and says why a server that keeps failing failed.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The ```rust blocks of a Markdown text: the fence's line number (from 1) and the lines.
fn rust_blocks(markdown: &str) -> Vec<(usize, Vec<&str>)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, Vec<&str>)> = None;
    for (n, line) in markdown.lines().enumerate() {
        match open.as_mut() {
            None if line.trim_end() == "```rust" => open = Some((n + 1, Vec::new())),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(open.take()),
            Some((_, lines)) => lines.push(line),
        }
    }
    assert!(open.is_none(), "a ```rust block of the README is not closed");
    blocks
}

/// Whether `block` appears in `file` as consecutive lines, each the block's line behind one
/// and the same indentation (a blank line of the block matches a blank line).
fn contains_verbatim(file: &str, block: &[&str]) -> bool {
    let lines: Vec<&str> = file.lines().collect();
    let Some(first) = block.first() else { return false };
    (0..lines.len()).any(|start| {
        let Some(indent) = lines[start].strip_suffix(first) else { return false };
        if !indent.chars().all(|c| c == ' ') || lines.len() - start < block.len() {
            return false;
        }
        block.iter().zip(&lines[start..]).all(|(want, got)| {
            if want.trim().is_empty() {
                got.trim().is_empty()
            } else {
                got.strip_prefix(indent) == Some(want)
            }
        })
    })
}

/// Every example's source, by file name.
fn examples() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(Path::new(ROOT).join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn every_rust_block_of_the_readme_is_part_of_an_example() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let blocks = rust_blocks(&readme);
    assert!(blocks.len() >= 2, "the README has {} ```rust blocks", blocks.len());
    let examples = examples();
    let mut missing = Vec::new();
    for (line, block) in &blocks {
        let found: Vec<&str> = examples
            .iter()
            .filter(|(_, text)| contains_verbatim(text, block))
            .map(|(name, _)| name.as_str())
            .collect();
        if found.is_empty() {
            missing.push(*line);
        }
    }
    assert!(
        missing.is_empty(),
        "the ```rust blocks of README.md at lines {missing:?} are in no example verbatim: put \
         each in an example CI builds (a fragment: in a function of examples/snippets.rs), \
         formatted by rustfmt, and copy it back"
    );
    // The first one is the Usage program, whole, and the example the tests below run.
    let usage = std::fs::read_to_string(Path::new(ROOT).join("examples/usage.rs")).unwrap();
    let (_, first) = &blocks[0];
    assert!(first.iter().any(|l| l.starts_with("fn main()")), "Usage is not a whole program");
    assert!(contains_verbatim(&usage, first), "the README's Usage is not examples/usage.rs");
}

#[test]
fn the_verbatim_check_refuses_a_changed_line_or_a_ragged_indent() {
    let file = "fn f() {\n    let a = 1;\n\n    let b = a;\n}\n";
    assert!(contains_verbatim(file, &["let a = 1;", "", "let b = a;"]));
    assert!(contains_verbatim(file, &["fn f() {", "    let a = 1;"]));
    assert!(!contains_verbatim(file, &["let a = 1;", "", "let b = 2;"]));
    assert!(!contains_verbatim(file, &["let a = 1;", "let b = a;"]));
    assert!(!contains_verbatim("    let a = 1;\n  let b = a;\n", &["let a = 1;", "let b = a;"]));
    assert!(!contains_verbatim(file, &["let b = a;", "}", "more"]));
}

/// What a run of the Usage example did.
struct Run {
    output: Output,
    /// Its own CPU time (user and system), read from `/proc` after it exited and before it
    /// was reaped; `None` where there is no `/proc`.
    cpu: Option<Duration>,
}

/// Runs `examples/usage.rs` with `server` as its argument and waits for it to exit: at most
/// `PATIENCE`, then it is killed and the test fails (a Usage that never exits is the bug this
/// guards against).
fn run_usage(server: &str) -> Run {
    let child = Command::new(example("usage"))
        .arg(server)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start examples/usage");
    let pid = rustix::process::Pid::from_child(&child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Wait for the exit without reaping, so /proc still has the process's times.
        let options =
            rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT;
        rustix::process::waitid(rustix::process::WaitId::Pid(pid), options).expect("waitid");
        let cpu = cpu_time(pid.as_raw_pid());
        let output = child.wait_with_output().expect("reap examples/usage");
        let _ = tx.send(Run { output, cpu });
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(run) => run,
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            panic!("examples/usage {server:?} did not exit within {PATIENCE:?}");
        }
    }
}

/// A process's user and system CPU time from `/proc/PID/stat` (fields 14 and 15, in clock ticks
/// of 1/100 s, the fixed `USER_HZ` of Linux's user interface).
fn cpu_time(pid: i32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_usage_program_calls_the_echo_server_and_exits() {
    let echo = example("echo_server");
    let run = run_usage(&echo.to_string_lossy());
    let (stdout, stderr) = (text(&run.output.stdout), text(&run.output.stderr));
    assert!(run.output.status.success(), "usage failed: {}\nstderr: {stderr}", run.output.status);
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).expect("a JSON result");
    assert_eq!(result["content"][0]["text"], "hi", "stdout: {stdout}");
    assert_eq!(result["isError"], false);
}

/// The echo server starts only after a while, so the Usage program has a call waiting and
/// nothing to do for that long. Waiting in `poll(None)` it uses under 10 ms of CPU; the old
/// `poll(Some(Duration::ZERO))` loop used a core for the whole wait (98% in the report; 660 ms
/// of this 3 s wait on a machine with a load of 10 on 2 cores). The bound cannot fail a program
/// that sleeps while it waits: a busy machine stretches the run, it does not add CPU time to a
/// sleeping process.
#[test]
fn the_usage_program_sleeps_while_it_waits() {
    const WAIT: Duration = Duration::from_secs(3);
    let echo = example("echo_server");
    let server = format!("sh -c 'sleep {}; exec \"$0\"' '{}'", WAIT.as_secs(), echo.display());
    let started = std::time::Instant::now();
    let run = run_usage(&server);
    let stderr = text(&run.output.stderr);
    assert!(run.output.status.success(), "usage failed: {}\nstderr: {stderr}", run.output.status);
    assert!(started.elapsed() >= WAIT, "the server answered before it started");
    let Some(cpu) = run.cpu else { return }; // no /proc: nothing to measure with
    let most = Duration::from_millis(150);
    assert!(cpu < most, "usage used {cpu:?} of CPU in a {WAIT:?} wait: it spins");
}

#[test]
fn the_usage_program_says_why_a_failing_server_failed() {
    // Exits at once with a message on stderr, every time it is started.
    let server = "sh -c 'echo no such table: users >&2; exit 3'";
    let run = run_usage(server);
    let stderr = text(&run.output.stderr);
    assert!(!run.output.status.success(), "usage succeeded; stderr: {stderr}");
    assert!(run.output.stdout.is_empty(), "stdout: {}", text(&run.output.stdout));
    // The call's own error, and the server's exit and last words, from TransportLost.
    assert!(stderr.contains("echo failed: "), "stderr: {stderr}");
    let lost = stderr.lines().find(|l| l.starts_with("server lost: ")).unwrap_or_else(|| {
        panic!("no TransportLost line; stderr: {stderr}");
    });
    assert!(lost.contains("code 3") && lost.contains("no such table: users"), "{lost}");
}
