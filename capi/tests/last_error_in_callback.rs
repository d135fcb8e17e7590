//! `mcpoll_last_error` called from inside the log callback does not read the host: the call
//! that logged holds it mutably (and writes its last error after), so reading it there
//! aliased that borrow, and during `mcpoll_host_free` read a host being dropped. It says so
//! with a fixed text instead. In a process of its own: the logger is process-wide.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use mcpoll_capi::{
    mcpoll_add_stdio_server, mcpoll_host, mcpoll_host_free, mcpoll_host_new, mcpoll_last_error,
    mcpoll_result, mcpoll_set_log_callback,
};

static HOST: AtomicPtr<mcpoll_host> = AtomicPtr::new(std::ptr::null_mut());
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "C" fn asks_last_error(_: *mut c_void, _: u32, _: *const c_char, _: *const c_char) {
    // SAFETY: the host stays live for the test; the text is NUL-terminated.
    let text = unsafe { CStr::from_ptr(mcpoll_last_error(HOST.load(Ordering::SeqCst))) };
    SEEN.lock().unwrap().push(text.to_string_lossy().into_owned());
}

#[test]
fn the_last_error_is_not_read_from_inside_the_log_callback() {
    let mut host = std::ptr::null_mut();
    // SAFETY: an out-pointer to a local.
    assert_eq!(unsafe { mcpoll_host_new(&mut host) }, mcpoll_result::MCPOLL_OK);
    HOST.store(host, Ordering::SeqCst);
    // SAFETY: a callback of the right signature, callable for the life of the process.
    let r = unsafe { mcpoll_set_log_callback(Some(asks_last_error), std::ptr::null_mut(), 5) };
    assert_eq!(r, mcpoll_result::MCPOLL_OK);
    let argv = [c"true".as_ptr()];
    let mut server = 0u64;
    // SAFETY: a live host, one NUL-terminated argument, no environment, no directory, the
    // default configuration, an out-pointer to a local.
    let r = unsafe {
        mcpoll_add_stdio_server(
            host,
            argv.as_ptr(),
            1,
            std::ptr::null(),
            0,
            std::ptr::null(),
            std::ptr::null(),
            &mut server,
        )
    };
    assert_eq!(r, mcpoll_result::MCPOLL_OK);
    // SAFETY: logging off, then the host freed (not used afterwards).
    unsafe {
        mcpoll_set_log_callback(None, std::ptr::null_mut(), 0);
        mcpoll_host_free(host);
    }
    let seen = SEEN.lock().unwrap();
    assert!(!seen.is_empty(), "starting a server logs");
    for text in seen.iter() {
        assert_eq!(text, "mcpoll_last_error: called from inside the log callback");
    }
}
