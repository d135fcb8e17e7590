//! The peak memory of `mcpoll tools` on a listing of 100,000 tools (issue 21): the whole
//! process, read from the kernel (`VmHWM`, the high-water mark of its resident set), must stay
//! under four times the listing's JSON.
//!
//! The peak is read without a race: the CLI renders the whole listing before it prints, so the
//! test leaves the CLI's stdout unread until the CLI is blocked writing to it (its
//! `/proc/PID/syscall` names `write` on fd 1). Everything the CLI allocates is allocated by then,
//! and its high-water mark can only have been reached.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOOLS: u64 = 100_000;

/// The bytes of the listing `demo_server --bulk-tools N` serves, as one `{"tools":[...]}`.
fn listing_bytes(count: u64) -> usize {
    let tools: Vec<serde_json::Value> = (0..count)
        .map(|i| {
            serde_json::json!({
                "name": format!("bulk_{i:06}"),
                "description": format!("Generated tool {i} of a large listing."),
                "inputSchema": {"type": "object"},
            })
        })
        .collect();
    serde_json::json!({ "tools": tools }).to_string().len()
}

/// A `/proc/PID/status` field in kB.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Whether the process is inside `write(1, ...)` (syscall 1 on x86_64, 64 on aarch64).
fn writing_stdout(pid: u32) -> bool {
    let Ok(syscall) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let mut words = syscall.split_whitespace();
    let write = if cfg!(target_arch = "aarch64") { "64" } else { "1" };
    words.next() == Some(write) && words.next() == Some("0x1")
}

#[test]
fn tools_listing_of_100k_tools_peaks_under_four_times_its_size() {
    let server =
        format!("{} --bulk-tools {TOOLS}", common::demo_server().program().to_string_lossy());
    let mut child = Command::new(common::cli())
        .args(["--timeout", "600000", "--stdio", &server, "tools"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcpoll");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(600);
    let peak_kb = loop {
        if writing_stdout(pid) {
            break status_kb(pid, "VmHWM:").expect("VmHWM of a running process");
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("mcpoll ended before printing the listing: {status}, stderr: {err}");
        }
        assert!(Instant::now() < deadline, "mcpoll never printed the listing");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(out.lines().count() as u64, TOOLS, "one line per tool");
    assert!(out.lines().last().unwrap().starts_with("bulk_099999  Generated tool 99999"));

    let listing = listing_bytes(TOOLS);
    let peak = peak_kb as usize * 1024;
    println!(
        "listing {listing} bytes, mcpoll tools peak {peak} bytes ({:.1}x)",
        peak as f64 / listing as f64
    );
    assert!(peak < 4 * listing, "peak {peak} bytes for a listing of {listing} bytes");
}
