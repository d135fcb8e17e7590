//! The fault DSL (`--fault KIND:TOOL[:N]`) and how an armed fault bends the bytes of a reply.
//! Both transports send what `reply_frames` and `emit` make.

use std::io::{self, Write};
use std::process;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use crate::flags::FlagError;
use crate::EXIT_TRUNCATE;

/// What a `--fault` does; see the comment at the top of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    Crash,
    Truncate,
    Garbage,
    UnknownId,
    Duplicate,
    LateAfterCancel,
    Hang,
    Drip,
    Oversize,
    FailFirst,
    ExitOnStart,
    ResetMidSse,
    StatusThenOk,
    CloseBeforeReply,
}

/// The spelling of each kind on the command line.
const FAULT_NAMES: [(&str, FaultKind); 14] = [
    ("crash", FaultKind::Crash),
    ("truncate", FaultKind::Truncate),
    ("garbage", FaultKind::Garbage),
    ("unknown-id", FaultKind::UnknownId),
    ("duplicate", FaultKind::Duplicate),
    ("late-after-cancel", FaultKind::LateAfterCancel),
    ("hang", FaultKind::Hang),
    ("drip", FaultKind::Drip),
    ("oversize", FaultKind::Oversize),
    ("fail-first", FaultKind::FailFirst),
    ("exit-on-start", FaultKind::ExitOnStart),
    ("reset-mid-sse", FaultKind::ResetMidSse),
    ("status-then-ok", FaultKind::StatusThenOk),
    ("close-before-reply", FaultKind::CloseBeforeReply),
];

impl FaultKind {
    fn from_name(name: &str) -> Option<FaultKind> {
        FAULT_NAMES.iter().find(|(n, _)| *n == name).map(|&(_, kind)| kind)
    }

    pub(crate) fn name(self) -> &'static str {
        FAULT_NAMES.iter().find(|(_, k)| *k == self).map_or("?", |&(name, _)| name)
    }

    /// Faults that only an HTTP exchange can show.
    pub(crate) fn http_only(self) -> bool {
        matches!(
            self,
            FaultKind::ResetMidSse | FaultKind::StatusThenOk | FaultKind::CloseBeforeReply
        )
    }

    /// Faults that mean nothing without "the first N calls".
    fn needs_count(self) -> bool {
        matches!(self, FaultKind::FailFirst | FaultKind::StatusThenOk)
    }

    fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// One `--fault KIND:TOOL[:N]`.
#[derive(Debug)]
pub(crate) struct Fault {
    pub(crate) kind: FaultKind,
    pub(crate) tool: String,
    /// Act only on the first N calls of `tool`; `None` is every call.
    pub(crate) limit: Option<u64>,
}

pub(crate) fn parse_fault(spec: &str) -> Result<Fault, FlagError> {
    let bad = |why: &str| FlagError::Bad(format!("`--fault {spec}`: {why}"));
    let mut parts = spec.split(':');
    let kind = parts.next().and_then(FaultKind::from_name).ok_or_else(|| bad("unknown kind"))?;
    let tool = parts.next().unwrap_or("").to_owned();
    let limit = match parts.next() {
        None => None,
        Some(n) => Some(n.parse::<u64>().map_err(|_| bad("N must be a non-negative integer"))?),
    };
    if parts.next().is_some() {
        return Err(bad("too many `:` parts"));
    }
    match (kind, tool.is_empty()) {
        (FaultKind::ExitOnStart, false) => return Err(bad("exit-on-start takes no tool")),
        (FaultKind::ExitOnStart, true) => {}
        (_, true) => return Err(bad("needs a tool, as KIND:TOOL")),
        (_, false) if kind.needs_count() && limit.is_none() => {
            return Err(bad("needs a count, as KIND:TOOL:N"));
        }
        _ => {}
    }
    Ok(Fault { kind, tool, limit })
}

/// The set of faults armed for one `tools/call`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Armed(u32);

impl Armed {
    pub(crate) fn add(&mut self, kind: FaultKind) {
        self.0 |= kind.bit();
    }

    pub(crate) fn has(self, kind: FaultKind) -> bool {
        self.0 & kind.bit() != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The armed kinds by name, for the log.
    pub(crate) fn names(self) -> Vec<&'static str> {
        FAULT_NAMES.iter().filter(|(_, kind)| self.has(*kind)).map(|(name, _)| *name).collect()
    }
}

const GARBAGE_LINE: &str = "%%garbage%%";
/// The id of the `unknown-id` stray reply: the largest integer JSON carries exactly, which no
/// client numbering its requests will reach in a test.
const NEVER_SENT_ID: u64 = 9_007_199_254_740_991;
const OVERSIZE_BYTES: usize = 20 << 20;
const DRIP_GAP: Duration = Duration::from_millis(5);

/// The messages that carry one `tools/call` reply once its faults have bent it, in order: the
/// `garbage` line, the `unknown-id` stray copy, the reply itself (with 20 MiB of text for
/// `oversize`), and the `duplicate`. Empty for `hang`. Both transports send these frames.
pub(crate) fn reply_frames(message: &Value, armed: Armed) -> Vec<String> {
    if armed.has(FaultKind::Hang) {
        return Vec::new();
    }
    let mut frames = Vec::new();
    if armed.has(FaultKind::Garbage) {
        frames.push(GARBAGE_LINE.to_owned());
    }
    if armed.has(FaultKind::UnknownId) {
        let mut stray = message.clone();
        stray["id"] = json!(NEVER_SENT_ID);
        frames.push(stray.to_string());
    }
    let reply = if armed.has(FaultKind::Oversize) {
        let mut big = message.clone();
        big["result"]["content"] = json!([{"type": "text", "text": "x".repeat(OVERSIZE_BYTES)}]);
        big.to_string()
    } else {
        message.to_string()
    };
    if armed.has(FaultKind::Duplicate) {
        frames.push(reply.clone());
    }
    frames.push(reply);
    frames
}

/// Writes a reply's bytes (`head`, then each frame, then `tail`) as its faults say: `drip`
/// writes one byte every 5 ms, and `truncate` stops halfway through the last frame, so the
/// client holds a partial message, and exits with code 8.
pub(crate) fn emit(
    w: &mut impl Write,
    head: &[u8],
    frames: &[&[u8]],
    tail: &[u8],
    armed: Armed,
) -> io::Result<()> {
    let drip = armed.has(FaultKind::Drip);
    put(w, head, drip)?;
    for (i, frame) in frames.iter().enumerate() {
        if i + 1 == frames.len() && armed.has(FaultKind::Truncate) {
            put(w, &frame[..frame.len() / 2], drip)?;
            w.flush()?;
            eprintln!("[fault] truncate: reply cut in half; exiting with code {EXIT_TRUNCATE}");
            process::exit(EXIT_TRUNCATE);
        }
        put(w, frame, drip)?;
    }
    put(w, tail, drip)?;
    w.flush()
}

fn put(w: &mut impl Write, bytes: &[u8], drip: bool) -> io::Result<()> {
    if !drip {
        return w.write_all(bytes);
    }
    for byte in bytes {
        w.write_all(std::slice::from_ref(byte))?;
        w.flush()?;
        thread::sleep(DRIP_GAP);
    }
    Ok(())
}
