//! The optional log callback: mcpoll's `log` records, with their levels, handed to C.
//!
//! `log` has one logger per process, so the callback is process-wide too: this is the one
//! piece of global state of the library. While the callback runs on a thread, every entry
//! point called from that thread returns `MCPOLL_REENTRANT` (the host that logged is in the
//! middle of a call).

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

use crate::{guard, mcpoll_result, Fail};

/// The log callback: `level` is 1 (error) to 5 (trace); `target` (the Rust module) and
/// `message` are NUL-terminated and valid only during the call. It must not unwind.
pub type mcpoll_log_callback = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        level: u32,
        target: *const c_char,
        message: *const c_char,
    ),
>;

#[derive(Clone, Copy)]
struct Sink {
    callback: unsafe extern "C" fn(*mut c_void, u32, *const c_char, *const c_char),
    /// The C program's pointer, as an integer: only handed back to it.
    userdata: usize,
}

/// Read-locked for as long as a callback runs, so that turning logging off (which takes it for
/// writing) returns only once no callback runs: the program may then free `userdata`.
static SINK: RwLock<Option<Sink>> = RwLock::new(None);
static INSTALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
    static LINE: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `true` while the log callback runs on this thread.
pub(crate) fn in_callback() -> bool {
    IN_CALLBACK.with(Cell::get)
}

struct Logger;

static LOGGER: Logger = Logger;

impl log::Log for Logger {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        if in_callback() {
            return;
        }
        let held = SINK.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(sink) = *held else { return };
        // Read under the lock the setter holds: a record that passed the `log` macros' check
        // before the level was lowered is not handed to the callback after the setter returned.
        if record.level() > log::max_level() {
            return;
        }
        let _ = LINE.try_with(|line| {
            let Ok(mut line) = line.try_borrow_mut() else { return };
            let (target, message) = &mut *line;
            fill(target, format_args!("{}", record.target()));
            fill(message, *record.args());
            IN_CALLBACK.with(|c| c.set(true));
            // SAFETY: the callback was given by the C program for exactly this; both strings
            // are NUL-terminated and live until it returns. Entry points called from inside
            // it return MCPOLL_REENTRANT (the flag just set).
            unsafe {
                (sink.callback)(
                    sink.userdata as *mut c_void,
                    record.level() as u32,
                    target.as_ptr().cast(),
                    message.as_ptr().cast(),
                )
            };
            IN_CALLBACK.with(|c| c.set(false));
        });
        drop(held);
    }

    fn flush(&self) {}
}

/// Writes `args` into `buf` as a C string: inner NULs become spaces, one NUL at the end.
fn fill(buf: &mut Vec<u8>, args: std::fmt::Arguments<'_>) {
    // A thread's one buffer: a single large line (a trace of a 16 MiB error message) must not
    // hold its room for the thread's life.
    crate::event::clear_for(buf, 0);
    let _ = buf.write_fmt(args);
    for b in buf.iter_mut().filter(|b| **b == 0) {
        *b = b' ';
    }
    buf.push(0);
}

/// Sends mcpoll's log records at `max_level` and above (1 error, 2 warn, 3 info, 4 debug,
/// 5 trace; 0 turns logging off) to `callback`, with `userdata` handed back unchanged. A null
/// callback turns logging off. Process-wide; may be called again to change it. The callback
/// may run on any thread that is inside an mcpoll call, so it must be thread-safe when hosts
/// are used from several threads.
///
/// `MCPOLL_LOGGER_TAKEN` when the process (a Rust program linking this library) installed
/// another `log` logger first.
///
/// Returns once no callback runs on another thread: after turning logging off (or replacing
/// the callback) the old callback is not called again, and its `userdata` may be freed.
///
/// # Safety
/// `callback`, when not null, is a function with that signature, callable until logging is
/// turned off or the process ends; `userdata` is whatever it expects.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_set_log_callback(
    callback: mcpoll_log_callback,
    userdata: *mut c_void,
    max_level: u32,
) -> mcpoll_result {
    guard(|| {
        let level = match max_level {
            0 => log::LevelFilter::Off,
            1 => log::LevelFilter::Error,
            2 => log::LevelFilter::Warn,
            3 => log::LevelFilter::Info,
            4 => log::LevelFilter::Debug,
            5 => log::LevelFilter::Trace,
            _ => return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into()),
        };
        // One lock for the installation and the sink, so two first calls on two threads
        // cannot both try to install the logger.
        // For writing: waits for callbacks running on other threads (this thread's cannot be
        // in one: `guard` returned MCPOLL_REENTRANT then).
        let mut slot = SINK.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !INSTALLED.load(Ordering::Acquire) {
            if log::set_logger(&LOGGER).is_err() {
                return Err(Fail::new(
                    mcpoll_result::MCPOLL_LOGGER_TAKEN,
                    "another logger is installed in this process",
                ));
            }
            INSTALLED.store(true, Ordering::Release);
        }
        // Level 0 is off, as a null callback is: the callback is not kept (kept behind the
        // level, it was still called for a record already past the level check).
        let on = level != log::LevelFilter::Off;
        let sink =
            callback.filter(|_| on).map(|callback| Sink { callback, userdata: userdata as usize });
        *slot = sink;
        // Under the lock, so that two setters on two threads leave one's sink with its level.
        log::set_max_level(if sink.is_some() { level } else { log::LevelFilter::Off });
        drop(slot);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One large log line does not keep its room in the thread's buffer.
    #[test]
    fn a_large_line_gives_its_room_back() {
        let mut buf = Vec::new();
        fill(&mut buf, format_args!("{}", "x".repeat(8 << 20)));
        assert!(buf.capacity() > 8 << 20);
        fill(&mut buf, format_args!("short"));
        assert!(buf.capacity() <= 1 << 20, "{}", buf.capacity());
        assert_eq!(buf, b"short\0");
    }
}
