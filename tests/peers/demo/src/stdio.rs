//! The stdio transport: a reader thread for stdin lines, and a writer for stdout.

use std::io::{self, BufRead, Write};
use std::process;
use std::sync::mpsc::{self, Receiver};
use std::thread;

use serde_json::Value;

use crate::faults::{emit, reply_frames, Armed};
use crate::EXIT_IO;

/// Reads stdin line by line on its own thread, so the main loop can wait on "next line or next
/// timer" with `recv_timeout`. EOF (or a read error) drops the sender, which the main loop sees
/// as `Disconnected`.
pub(crate) fn spawn_stdin_reader() -> Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    if sender.send(line).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    eprintln!("[demo] stdin read error: {e}");
                    return;
                }
            }
        }
    });
    receiver
}

/// Writes JSON-RPC messages to stdout, one compact object per line, flushed after each.
pub(crate) struct Output {
    stdout: io::Stdout,
}

impl Output {
    pub(crate) fn new() -> Output {
        Output { stdout: io::stdout() }
    }

    pub(crate) fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut stdout = self.stdout.lock();
        if let Err(e) = stdout.write_all(line.as_bytes()).and_then(|()| stdout.flush()) {
            stdout_gone(&e);
        }
    }

    /// Sends a `tools/call` reply bent by the faults armed for it.
    pub(crate) fn send_faulty(&mut self, message: &Value, armed: Armed) {
        let frames = reply_frames(message, armed);
        if frames.is_empty() {
            eprintln!("[fault] hang: never replying to id={}", message["id"]);
            return;
        }
        let lines: Vec<Vec<u8>> = frames
            .into_iter()
            .map(|frame| {
                let mut line = frame.into_bytes();
                line.push(b'\n');
                line
            })
            .collect();
        let lines: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        if let Err(e) = emit(&mut self.stdout.lock(), b"", &lines, b"", armed) {
            stdout_gone(&e);
        }
    }
}

fn stdout_gone(e: &io::Error) -> ! {
    // The client closed our stdout; nobody can hear us any more.
    eprintln!("[demo] stdout write failed: {e}; exiting");
    process::exit(EXIT_IO);
}
