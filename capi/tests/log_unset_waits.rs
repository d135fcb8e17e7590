//! Turning the log callback off waits for a callback that is running on another thread: the
//! header lets the program free what `userdata` points to once `mcpoll_set_log_callback(NULL,
//! ...)` has returned, so a callback still running then would use freed memory. In a process
//! of its own: the logger is process-wide.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcpoll_capi::{mcpoll_result, mcpoll_set_log_callback};

static ENTERED: AtomicBool = AtomicBool::new(false);
static UNSETTING: AtomicBool = AtomicBool::new(false);
static UNSET_RETURNED: AtomicBool = AtomicBool::new(false);
static SEEN_AFTER_UNSET: AtomicBool = AtomicBool::new(false);

/// Stays in the callback until the other thread is about to turn logging off, then a while
/// longer (or until the unset returned, which must not happen while it runs), noting whether
/// the unset returned meanwhile. The test passes however long the while is; the while only
/// gives the old code's race room to show.
unsafe extern "C" fn slow_callback(_: *mut c_void, _: u32, _: *const c_char, _: *const c_char) {
    if ENTERED.swap(true, Ordering::SeqCst) {
        return;
    }
    let bound = Instant::now() + Duration::from_secs(60);
    while !UNSETTING.load(Ordering::SeqCst) && Instant::now() < bound {
        std::thread::yield_now();
    }
    let end = Instant::now() + Duration::from_millis(300);
    while Instant::now() < end {
        if UNSET_RETURNED.load(Ordering::SeqCst) {
            SEEN_AFTER_UNSET.store(true, Ordering::SeqCst);
            return;
        }
        std::thread::yield_now();
    }
}

#[test]
fn turning_logging_off_waits_for_a_running_callback() {
    // SAFETY: a callback of the right signature, callable for the life of the process.
    let r = unsafe { mcpoll_set_log_callback(Some(slow_callback), std::ptr::null_mut(), 3) };
    assert_eq!(r, mcpoll_result::MCPOLL_OK);
    let logging = std::thread::spawn(|| log::warn!(target: "mcpoll", "a record"));
    let end = Instant::now() + Duration::from_secs(60);
    while !ENTERED.load(Ordering::SeqCst) {
        assert!(Instant::now() < end, "the callback never ran");
        std::thread::yield_now();
    }
    UNSETTING.store(true, Ordering::SeqCst);
    // SAFETY: a null callback turns logging off.
    let r = unsafe { mcpoll_set_log_callback(None, std::ptr::null_mut(), 0) };
    UNSET_RETURNED.store(true, Ordering::SeqCst);
    assert_eq!(r, mcpoll_result::MCPOLL_OK);
    logging.join().unwrap();
    assert!(!SEEN_AFTER_UNSET.load(Ordering::SeqCst), "the unset returned while the callback ran");
}
