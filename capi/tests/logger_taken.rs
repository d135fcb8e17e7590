//! `MCPOLL_LOGGER_TAKEN`: a Rust program that links the C ABI (here as an rlib) and installed
//! a `log` logger of its own first. A C program cannot meet it (the only Rust code in it is
//! this library, and a second Rust library has its own copy of `log`), so it is tested here,
//! in a process of its own.

use std::ffi::{c_char, c_void};

use mcpoll_capi::{mcpoll_result, mcpoll_set_log_callback};

struct Other;

impl log::Log for Other {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        false
    }
    fn log(&self, _: &log::Record<'_>) {}
    fn flush(&self) {}
}

static OTHER: Other = Other;

unsafe extern "C" fn callback(_: *mut c_void, _: u32, _: *const c_char, _: *const c_char) {}

#[test]
fn a_logger_installed_first_gives_logger_taken() {
    log::set_logger(&OTHER).expect("the first logger of this process");
    // SAFETY: a callback of the right signature, callable for the life of the process.
    let r = unsafe { mcpoll_set_log_callback(Some(callback), std::ptr::null_mut(), 3) };
    assert_eq!(r, mcpoll_result::MCPOLL_LOGGER_TAKEN);
    // Still taken on a second try; a bad level is refused before the logger is looked at.
    // SAFETY: as above.
    let r = unsafe { mcpoll_set_log_callback(Some(callback), std::ptr::null_mut(), 3) };
    assert_eq!(r, mcpoll_result::MCPOLL_LOGGER_TAKEN);
    // SAFETY: as above.
    let r = unsafe { mcpoll_set_log_callback(Some(callback), std::ptr::null_mut(), 9) };
    assert_eq!(r, mcpoll_result::MCPOLL_INVALID_ARGUMENT);
}
