//! The C ABI of mcpoll: a host of MCP servers that any loop in any language can drive through
//! one descriptor, one deadline and one non-blocking call.
//!
//! This crate is the only place with `unsafe` code: mcpoll itself is `#![forbid(unsafe_code)]`.
//! Every entry point
//!
//! * runs its body under `catch_unwind`, so no panic crosses into C (`MCPOLL_PANIC` instead);
//! * checks every pointer for null (`MCPOLL_NULL_POINTER`), every string for UTF-8
//!   (`MCPOLL_INVALID_UTF8`; argv, environment and paths excepted: they are bytes on Unix) and
//!   JSON for syntax (`MCPOLL_INVALID_JSON`);
//! * looks ids up in tables of this crate: servers are numbered from 1 and never renumbered, so
//!   an id used after its server was removed is `MCPOLL_UNKNOWN_SERVER`, never a different
//!   server; a call id or server request id that is over is `MCPOLL_UNKNOWN_CALL` or
//!   `MCPOLL_UNKNOWN_REQUEST`;
//! * refuses to run from inside the log callback (`MCPOLL_REENTRANT`): the host is in the middle
//!   of a call then.
//!
//! What C must still get right: pass live handles (a freed or forged pointer is undefined
//! behaviour, as with `free`), use one host from one thread at a time, and keep borrowed
//! pointers only as long as `include/mcpoll.h` says. The header is written by hand;
//! `tests/header.rs` checks that it declares every exported symbol and every result value.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations)]
// The C names of the types are part of the ABI.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

mod event;
mod host;
mod logging;
mod options;
mod result;

pub use event::{mcpoll_event, mcpoll_event_kind};
pub use host::*;
pub use logging::{mcpoll_log_callback, mcpoll_set_log_callback};
pub use options::*;
pub use result::{mcpoll_result, mcpoll_result_message, mcpoll_result_name};

/// What a failed body returns: the result and, for a host's `mcpoll_last_error`, the text.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) code: mcpoll_result,
    pub(crate) message: String,
}

impl Fail {
    pub(crate) fn new(code: mcpoll_result, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

impl From<mcpoll_result> for Fail {
    fn from(code: mcpoll_result) -> Self {
        let message = code.message_str().to_owned();
        Self { code, message }
    }
}

/// Runs an entry point's body: not from inside the log callback, and no panic escapes.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Fail>) -> mcpoll_result {
    if logging::in_callback() {
        return mcpoll_result::MCPOLL_REENTRANT;
    }
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => mcpoll_result::MCPOLL_OK,
        Ok(Err(fail)) => fail.code,
        Err(_) => mcpoll_result::MCPOLL_PANIC,
    }
}

/// A C string argument as UTF-8.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that stays valid and unchanged for `'a`.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char) -> Result<&'a str, Fail> {
    // SAFETY: the caller's contract, passed through.
    let bytes = unsafe { bytes_arg(p) }?;
    std::str::from_utf8(bytes).map_err(|_| mcpoll_result::MCPOLL_INVALID_UTF8.into())
}

/// A C string argument as bytes (without its NUL).
///
/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn bytes_arg<'a>(p: *const c_char) -> Result<&'a [u8], Fail> {
    if p.is_null() {
        return Err(mcpoll_result::MCPOLL_NULL_POINTER.into());
    }
    // SAFETY: not null, and NUL-terminated and valid for 'a by the caller's contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// An optional C string argument (null: `None`) as UTF-8.
///
/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn opt_str_arg<'a>(p: *const c_char) -> Result<Option<&'a str>, Fail> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract, passed through.
    unsafe { str_arg(p) }.map(Some)
}

/// A JSON argument: UTF-8 and well-formed JSON.
///
/// # Safety
/// As [`str_arg`].
pub(crate) unsafe fn json_arg(p: *const c_char) -> Result<Box<serde_json::value::RawValue>, Fail> {
    // SAFETY: the caller's contract, passed through.
    let text = unsafe { str_arg(p) }?;
    serde_json::value::RawValue::from_string(text.to_owned())
        .map_err(|e| Fail::new(mcpoll_result::MCPOLL_INVALID_JSON, e.to_string()))
}

/// An out-parameter.
///
/// # Safety
/// `p` is null or valid for writes of a `T` and not aliased for `'a`.
pub(crate) unsafe fn out_arg<'a, T>(p: *mut T) -> Result<&'a mut T, Fail> {
    // SAFETY: the caller's contract; null is refused by `as_mut`.
    unsafe { p.as_mut() }.ok_or_else(|| mcpoll_result::MCPOLL_NULL_POINTER.into())
}

/// A handle argument, shared.
///
/// # Safety
/// `p` is null or a live handle of type `T` from this library, not used mutably elsewhere for
/// `'a`.
pub(crate) unsafe fn handle_ref<'a, T>(p: *const T) -> Result<&'a T, Fail> {
    // SAFETY: the caller's contract; null is refused by `as_ref`.
    unsafe { p.as_ref() }.ok_or_else(|| mcpoll_result::MCPOLL_NULL_POINTER.into())
}

/// An optional handle argument (null: `None`).
///
/// # Safety
/// As [`handle_ref`].
pub(crate) unsafe fn opt_handle_ref<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: the caller's contract.
    unsafe { p.as_ref() }
}

/// Boxes a new handle for C.
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Frees a handle from [`into_handle`]; null is ignored. Not from inside the log callback
/// (the handle might be in use): the handle is then left alone.
///
/// # Safety
/// `p` is null or a live handle of type `T` from [`into_handle`], not used afterwards.
pub(crate) unsafe fn free_handle<T>(p: *mut T) {
    if p.is_null() || logging::in_callback() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `p` came from `Box::into_raw` (the caller's contract) and is given up here.
        drop(unsafe { Box::from_raw(p) });
    }));
}

/// The library's version, a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn mcpoll_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
