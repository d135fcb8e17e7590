//! Level 0 turns logging off as a null callback does: the callback given with it is not
//! kept, so no record reaches it after `mcpoll_set_log_callback` returned, and its `userdata`
//! may be freed. It was kept, armed, behind a level the `log` macros check before they take
//! the sink: a record already past that check on another thread (or one logged through
//! `log::logger()` directly) called it after the return. In a process of its own: the logger
//! is process-wide.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use mcpoll_capi::{mcpoll_result, mcpoll_set_log_callback};

static CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn counting(_: *mut c_void, _: u32, _: *const c_char, _: *const c_char) {
    CALLS.fetch_add(1, Ordering::SeqCst);
}

/// A record at `level`, handed to the installed logger as one that passed the macros' level
/// check an instant before the level changed.
fn log_past_the_level_check(level: log::Level) {
    log::logger().log(
        &log::Record::builder()
            .level(level)
            .target("mcpoll")
            .args(format_args!("a record"))
            .build(),
    );
}

#[test]
fn level_zero_disarms_the_callback() {
    // SAFETY: a callback of the right signature, callable for the life of the process.
    let r = unsafe { mcpoll_set_log_callback(Some(counting), std::ptr::null_mut(), 3) };
    assert_eq!(r, mcpoll_result::MCPOLL_OK);
    log_past_the_level_check(log::Level::Error);
    assert_eq!(CALLS.load(Ordering::SeqCst), 1, "armed at level 3");

    // A lower level: what lies above it no longer reaches the callback either.
    // SAFETY: as above.
    let r = unsafe { mcpoll_set_log_callback(Some(counting), std::ptr::null_mut(), 1) };
    assert_eq!(r, mcpoll_result::MCPOLL_OK);
    log_past_the_level_check(log::Level::Info);
    assert_eq!(CALLS.load(Ordering::SeqCst), 1, "info is above level 1");

    // SAFETY: as above; level 0 turns logging off.
    let r = unsafe { mcpoll_set_log_callback(Some(counting), std::ptr::null_mut(), 0) };
    assert_eq!(r, mcpoll_result::MCPOLL_OK);
    log_past_the_level_check(log::Level::Error);
    assert_eq!(CALLS.load(Ordering::SeqCst), 1, "the callback was called after level 0");
}
