//! Opaque option handles: a server's configuration, one call's options, an HTTP server's
//! options. Each is made with `*_new`, changed with setters, read (never kept) by the calls it
//! is passed to, and freed with `*_free`.

use std::ffi::c_char;
use std::time::Duration;

use mcpoll::{CallOptions, Config, Idempotency, TaskMode};

use crate::{
    free_handle, guard, handle_mut, into_handle, mcpoll_result, opt_os_str_arg, opt_str_arg,
    out_arg, str_arg, Fail,
};

/// A server's configuration (`mcpoll::Config`): timeouts, what server requests the host
/// answers, restarts, limits.
#[derive(Debug, Clone, Default)]
pub struct mcpoll_config {
    pub(crate) config: Config,
}

/// One call's options (`mcpoll::CallOptions`): deadline, idempotency, progress.
#[derive(Debug, Clone, Default)]
pub struct mcpoll_call_options {
    pub(crate) options: CallOptions,
}

/// An HTTP server's options: URL, headers, bearer token, CA file, proxy, client credentials.
#[derive(Clone)]
pub struct mcpoll_http_options {
    // Read only where the HTTP server is added, which a build without `http` refuses.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) bearer: Option<String>,
    pub(crate) ca_file: Option<std::path::PathBuf>,
    /// `None`: from the environment; `Some(None)`: direct; `Some(Some(url))`: that proxy.
    pub(crate) proxy: Option<Option<String>>,
    /// Client id and secret for the OAuth client credentials grant.
    pub(crate) client_credentials: Option<(String, String)>,
}

// `Debug` shows header names, and whether a token or secret is set, never a value. (Not a doc
// comment on the struct: cbindgen copies those into the C header.)
impl std::fmt::Debug for mcpoll_http_options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL's query may hold a key, a header's value a token: names and presence only.
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("mcpoll_http_options")
            .field("url", &format_args!("<{} bytes>", self.url.len()))
            .field("headers", &names)
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("ca_file", &self.ca_file)
            .field("proxy", &self.proxy.as_ref().map(|p| p.as_ref().map(|_| "<set>")))
            .field("client_id", &self.client_credentials.as_ref().map(|(id, _)| id))
            .finish_non_exhaustive()
    }
}

/// `mcpoll_config_set_answers` flag: form-mode elicitation.
pub const MCPOLL_ANSWER_ELICITATION_FORM: u32 = 1;
/// `mcpoll_config_set_answers` flag: URL-mode elicitation.
pub const MCPOLL_ANSWER_ELICITATION_URL: u32 = 2;
/// `mcpoll_config_set_answers` flag: sampling.
pub const MCPOLL_ANSWER_SAMPLING: u32 = 4;
/// `mcpoll_config_set_answers` flag: roots.
pub const MCPOLL_ANSWER_ROOTS: u32 = 8;
/// `mcpoll_config_set_answers` flag: roots, and their `list_changed` notification.
pub const MCPOLL_ANSWER_ROOTS_LIST_CHANGED: u32 = 16;

/// A new configuration with mcpoll's defaults, in `*out`.
///
/// # Safety
/// `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_new(out: *mut *mut mcpoll_config) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(out, std::ptr::null_mut()) }?;
        *out = into_handle(mcpoll_config::default());
        Ok(())
    })
}

/// Frees a configuration (null is ignored). From inside the log callback it does nothing
/// (a call that logged may be reading them): free them after the callback returned.
///
/// # Safety
/// `config` is null or a live handle from `mcpoll_config_new`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_free(config: *mut mcpoll_config) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(config) }
}

/// Runs a setter on a live handle.
///
/// # Safety
/// `p` is null or a live handle of type `T`, not used elsewhere during the call.
unsafe fn set<T>(p: *mut T, f: impl FnOnce(&mut T) -> Result<(), Fail>) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        let handle = unsafe { handle_mut(p) }?;
        f(handle)
    })
}

/// The default deadline of a call made without one (milliseconds, more than 0).
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_timeout_ms(
    config: *mut mcpoll_config,
    ms: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            if ms == 0 {
                return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into());
            }
            c.config.default_timeout = Duration::from_millis(ms);
            Ok(())
        })
    }
}

/// The server requests the host answers (`MCPOLL_ANSWER_*` flags, or-ed). The server sees them
/// as the client's capabilities; each one comes as an `MCPOLL_EVENT_SERVER_REQUEST`.
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_answers(
    config: *mut mcpoll_config,
    flags: u32,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            if flags >= 32 {
                return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into());
            }
            let a = &mut c.config.answers;
            a.elicitation_form = flags & MCPOLL_ANSWER_ELICITATION_FORM != 0;
            a.elicitation_url = flags & MCPOLL_ANSWER_ELICITATION_URL != 0;
            a.sampling = flags & MCPOLL_ANSWER_SAMPLING != 0;
            a.roots = flags & (MCPOLL_ANSWER_ROOTS | MCPOLL_ANSWER_ROOTS_LIST_CHANGED) != 0;
            a.roots_list_changed = flags & MCPOLL_ANSWER_ROOTS_LIST_CHANGED != 0;
            Ok(())
        })
    }
}

/// Whether a crashed stdio server is restarted, and the delay before the first restart
/// (milliseconds; it doubles for each crash in the crash window, up to 10 s, or up to this
/// delay when it is longer).
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_restart(
    config: *mut mcpoll_config,
    enabled: bool,
    base_delay_ms: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            let base = Duration::from_millis(base_delay_ms);
            c.config.restart.enabled = enabled;
            c.config.restart.base_delay = base;
            // The cap (10 s by default) would otherwise cut a longer first delay: a 30 s
            // delay asked for came after 10 s. From the default, not the last cap: a shorter
            // delay set later doubles up to 10 s again, as the header says.
            let default_cap = mcpoll::RestartPolicy::default().max_delay;
            c.config.restart.max_delay = default_cap.max(base);
            Ok(())
        })
    }
}

/// When a crashing stdio server is degraded: `exits` exits within `window_ms` (at least 1)
/// suspend its restarts (at most 64 exits are counted: a larger `exits` never degrades it); its pending calls fail with `MCPOLL_LOCAL_DEGRADED` and new calls
/// are refused with `MCPOLL_REQUEST_DEGRADED` until `mcpoll_restart_server`, or until the one
/// restart the engine tries by itself after 60 s.
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_crash_loop(
    config: *mut mcpoll_config,
    exits: u32,
    window_ms: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            if exits == 0 {
                return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into());
            }
            c.config.restart.crash_loop_exits = exits;
            c.config.restart.crash_loop_window = Duration::from_millis(window_ms);
            Ok(())
        })
    }
}

/// How many calls are sent at once (`max_in_flight`, at least 1, checked when the server is
/// added) and how many more wait in the queue (`max_queued`); past both, a call is refused
/// with `MCPOLL_OVERLOADED`, and a held call let go with `mcpoll_allow_call` stays held
/// (`MCPOLL_AUTHORIZE_OVERLOADED`).
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_in_flight(
    config: *mut mcpoll_config,
    max_in_flight: usize,
    max_queued: usize,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            c.config.max_in_flight = max_in_flight;
            c.config.max_queued = max_queued;
            Ok(())
        })
    }
}

/// The most calls pending on one server at once (more than 0).
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_max_pending(
    config: *mut mcpoll_config,
    max: usize,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            c.config.max_pending = max;
            Ok(())
        })
    }
}

/// The circuit breakers: `failure_threshold` consecutive transport failures or timeouts of
/// one kind of call (reads, writes) open its breaker (0 turns breakers off); an open breaker
/// refuses calls (`MCPOLL_REQUEST_BREAKER_OPEN`) for `cool_down_ms`, then lets one through.
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_breaker(
    config: *mut mcpoll_config,
    failure_threshold: u32,
    cool_down_ms: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            c.config.breaker.failure_threshold = failure_threshold;
            c.config.breaker.cool_down = Duration::from_millis(cool_down_ms);
            Ok(())
        })
    }
}

/// The largest message accepted from the server, in bytes (at least 1024, checked when the
/// server is added): a larger reply fails its call with `MCPOLL_PEER_TOO_LARGE`.
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_max_message_bytes(
    config: *mut mcpoll_config,
    bytes: usize,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            c.config.max_message_bytes = bytes;
            Ok(())
        })
    }
}

/// The most pages one listing (`mcpoll_list_tools`) follows (at least 1, checked when the
/// server is added): a listing with more fails with `MCPOLL_LOCAL_TOO_MANY_PAGES`.
///
/// # Safety
/// `config` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_config_set_max_pages(
    config: *mut mcpoll_config,
    pages: usize,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(config, |c| {
            c.config.max_pages = pages;
            Ok(())
        })
    }
}

/// New call options (the server's default deadline, idempotency from the tool's annotations,
/// no progress), in `*out`.
///
/// # Safety
/// `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_options_new(
    out: *mut *mut mcpoll_call_options,
) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(out, std::ptr::null_mut()) }?;
        *out = into_handle(mcpoll_call_options::default());
        Ok(())
    })
}

/// Frees call options (null is ignored). From inside the log callback it does nothing
/// (a call that logged may be reading them): free them after the callback returned.
///
/// # Safety
/// `options` is null or a live handle from `mcpoll_call_options_new`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_options_free(options: *mut mcpoll_call_options) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(options) }
}

/// The call's deadline, in milliseconds from when the call is made (0: the server's default).
///
/// # Safety
/// `options` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_options_set_timeout_ms(
    options: *mut mcpoll_call_options,
    ms: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            o.options.timeout = (ms > 0).then(|| Duration::from_millis(ms));
            Ok(())
        })
    }
}

/// `mcpoll_call_options_set_idempotency`: from the tool's annotations (the default).
pub const MCPOLL_IDEMPOTENCY_DEFAULT: u32 = 0;
/// Reads nothing changes: safe to send again.
pub const MCPOLL_IDEMPOTENCY_READ: u32 = 1;
/// Sending it twice has the effect of sending it once.
pub const MCPOLL_IDEMPOTENCY_IDEMPOTENT: u32 = 2;
/// A write carrying an idempotency key the server deduplicates on.
pub const MCPOLL_IDEMPOTENCY_KEYED: u32 = 3;
/// Never re-sent automatically.
pub const MCPOLL_IDEMPOTENCY_UNKNOWN: u32 = 4;

/// How safe the call is to send twice (`MCPOLL_IDEMPOTENCY_*`), overriding the tool's
/// annotations.
///
/// # Safety
/// `options` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_options_set_idempotency(
    options: *mut mcpoll_call_options,
    idempotency: u32,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            o.options.idempotency = match idempotency {
                MCPOLL_IDEMPOTENCY_DEFAULT => None,
                MCPOLL_IDEMPOTENCY_READ => Some(Idempotency::Read),
                MCPOLL_IDEMPOTENCY_IDEMPOTENT => Some(Idempotency::Idempotent),
                MCPOLL_IDEMPOTENCY_KEYED => Some(Idempotency::Keyed),
                MCPOLL_IDEMPOTENCY_UNKNOWN => Some(Idempotency::Unknown),
                _ => return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into()),
            };
            Ok(())
        })
    }
}

/// An idempotency key placed in the arguments (null clears it); it makes a write safe to
/// retry. The string is copied.
///
/// # Safety
/// `options` is null or a live handle; `key` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_options_set_idempotency_key(
    options: *mut mcpoll_call_options,
    key: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            // SAFETY: the caller's contract.
            o.options.idempotency_key = opt_str_arg(key)?.map(str::to_owned);
            Ok(())
        })
    }
}

/// Ask the server for progress notifications (`MCPOLL_EVENT_PROGRESS`).
///
/// # Safety
/// `options` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_options_set_progress(
    options: *mut mcpoll_call_options,
    progress: bool,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            o.options.progress = progress;
            Ok(())
        })
    }
}

/// `mcpoll_call_options_set_task`: as the tool and the configuration say (the default).
pub const MCPOLL_TASK_AUTO: u32 = 0;
/// Ask for the tool call to run as a task on the server (MCP tasks), which the server may
/// decline; a task is polled to its end within the call's deadline.
pub const MCPOLL_TASK_PREFER: u32 = 1;
/// A plain call: no task is asked for or accepted.
pub const MCPOLL_TASK_OFF: u32 = 2;

/// Whether a tool call may run as a task on the server (`MCPOLL_TASK_*`; other values give
/// `MCPOLL_INVALID_ARGUMENT`). With `MCPOLL_TASK_PREFER`, `ttl_ms` is the task lifetime asked
/// for on 2025-11-25 (0: none); it is ignored otherwise. The call still ends with
/// `MCPOLL_EVENT_CALL_DONE` or `_CALL_FAILED` (`MCPOLL_PEER_TASK_CANCELLED` when the server
/// cancelled the task). Other methods ignore it.
///
/// # Safety
/// `options` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_options_set_task(
    options: *mut mcpoll_call_options,
    mode: u32,
    ttl_ms: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            o.options.task = match mode {
                MCPOLL_TASK_AUTO => TaskMode::Auto,
                MCPOLL_TASK_PREFER => {
                    TaskMode::Prefer { ttl: (ttl_ms > 0).then(|| Duration::from_millis(ttl_ms)) }
                }
                MCPOLL_TASK_OFF => TaskMode::Off,
                _ => return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into()),
            };
            Ok(())
        })
    }
}

/// W3C trace context carried in the call's `_meta`: `traceparent` (null clears the trace
/// context) and `tracestate` (null: none); copied. A malformed `traceparent` is refused when
/// the call is made (`MCPOLL_TRACE_CONTEXT`).
///
/// # Safety
/// `options` is null or a live handle; `traceparent` and `tracestate` are null or
/// NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_options_set_trace(
    options: *mut mcpoll_call_options,
    traceparent: *const c_char,
    tracestate: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            // SAFETY: the caller's contract.
            let (parent, state) = (opt_str_arg(traceparent)?, opt_str_arg(tracestate)?);
            o.options.trace = parent.map(|p| mcpoll::TraceContext {
                traceparent: p.to_owned(),
                tracestate: state.map(str::to_owned),
                baggage: None,
            });
            Ok(())
        })
    }
}

/// New HTTP server options for `url` (copied; checked when the server is added), in `*out`.
///
/// # Safety
/// `url` is null or a NUL-terminated string; `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_http_options_new(
    url: *const c_char,
    out: *mut *mut mcpoll_http_options,
) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        // `out` first: a URL refused must still leave `*out` null for the caller's cleanup.
        let (out, url) = unsafe { (out_arg(out, std::ptr::null_mut())?, str_arg(url)?) };
        *out = into_handle(mcpoll_http_options {
            url: url.to_owned(),
            headers: Vec::new(),
            bearer: None,
            ca_file: None,
            proxy: None,
            client_credentials: None,
        });
        Ok(())
    })
}

/// Frees HTTP server options (null is ignored). From inside the log callback it does nothing
/// (a call that logged may be reading them): free them after the callback returned.
///
/// # Safety
/// `options` is null or a live handle from `mcpoll_http_options_new`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_http_options_free(options: *mut mcpoll_http_options) {
    // SAFETY: the caller's contract.
    unsafe { free_handle(options) }
}

/// Adds a header sent with every request (copied; checked when the server is added).
///
/// # Safety
/// `options` is null or a live handle; `name` and `value` are null or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_http_options_add_header(
    options: *mut mcpoll_http_options,
    name: *const c_char,
    value: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            // SAFETY: the caller's contract.
            let (name, value) = (str_arg(name)?, str_arg(value)?);
            o.headers.push((name.to_owned(), value.to_owned()));
            Ok(())
        })
    }
}

/// A static bearer token (`Authorization: Bearer ...`; copied; null removes it).
///
/// # Safety
/// `options` is null or a live handle; `token` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_http_options_set_bearer(
    options: *mut mcpoll_http_options,
    token: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            // SAFETY: the caller's contract.
            o.bearer = opt_str_arg(token)?.map(str::to_owned);
            Ok(())
        })
    }
}

/// A PEM file of CA certificates to trust instead of the built-in roots (copied; read when
/// the server is added; null returns to the built-in roots). The path is bytes, as the file
/// system's are: it need not be UTF-8.
///
/// # Safety
/// `options` is null or a live handle; `path` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_http_options_set_ca_file(
    options: *mut mcpoll_http_options,
    path: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            // SAFETY: the caller's contract.
            o.ca_file = opt_os_str_arg(path)?.map(Into::into);
            Ok(())
        })
    }
}

/// The HTTP proxy: a `http://host:port` URL, or null for a direct connection. Without this
/// call the proxy comes from the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`).
///
/// # Safety
/// `options` is null or a live handle; `url` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_http_options_set_proxy(
    options: *mut mcpoll_http_options,
    url: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            // SAFETY: the caller's contract.
            o.proxy = Some(opt_str_arg(url)?.map(str::to_owned));
            Ok(())
        })
    }
}

/// OAuth with the client credentials grant, as a pre-registered client (copied): tokens are
/// fetched from the server's authorization server on demand and refreshed before they expire.
///
/// # Safety
/// `options` is null or a live handle; `client_id` and `client_secret` are null or
/// NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_http_options_set_client_credentials(
    options: *mut mcpoll_http_options,
    client_id: *const c_char,
    client_secret: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        set(options, |o| {
            // SAFETY: the caller's contract.
            let (id, secret) = (str_arg(client_id)?, str_arg(client_secret)?);
            o.client_credentials = Some((id.to_owned(), secret.to_owned()));
            Ok(())
        })
    }
}

#[cfg(feature = "http")]
impl mcpoll_http_options {
    /// The Rust options these stand for.
    pub(crate) fn build(&self) -> mcpoll::HttpOptions {
        let mut opts = mcpoll::HttpOptions::new(self.url.clone());
        for (name, value) in &self.headers {
            opts = opts.header(name.clone(), value.clone());
        }
        if let Some(token) = &self.bearer {
            opts = opts.bearer(token.clone());
        }
        opts.tls.ca_file = self.ca_file.clone();
        match &self.proxy {
            None => {}
            Some(None) => opts.proxy = mcpoll::ProxyChoice::Direct,
            Some(Some(url)) => opts.proxy = mcpoll::ProxyChoice::Url(url.clone()),
        }
        if let Some((id, secret)) = &self.client_credentials {
            let client = mcpoll::oauth::PreRegistered::with_secret(id.clone(), secret.clone());
            opts = opts
                .oauth(mcpoll::oauth::OAuthConfig::client_credentials(self.url.clone(), client));
        }
        opts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA file's path is bytes, as the file system's are: a Latin-1 name was refused as
    /// `MCPOLL_INVALID_UTF8`, so a valid path could not be used.
    #[test]
    fn a_ca_file_path_need_not_be_utf8() {
        let mut options = std::ptr::null_mut();
        // SAFETY: a NUL-terminated URL and a valid out pointer.
        let made = unsafe { mcpoll_http_options_new(c"https://h/mcp".as_ptr(), &mut options) };
        assert_eq!(made, mcpoll_result::MCPOLL_OK);
        let path = c"/tmp/caf\xe9.pem";
        // SAFETY: a live handle and a NUL-terminated path.
        let set = unsafe { mcpoll_http_options_set_ca_file(options, path.as_ptr()) };
        assert_eq!(set, mcpoll_result::MCPOLL_OK);
        {
            use std::os::unix::ffi::OsStrExt;
            // SAFETY: the live handle made above, no other reference to it.
            let o = unsafe { &*options };
            let kept = o.ca_file.as_deref().map(|p| p.as_os_str().as_bytes());
            assert_eq!(kept, Some(&b"/tmp/caf\xe9.pem"[..]));
        }
        // SAFETY: the handle made above, not used afterwards.
        unsafe { mcpoll_http_options_free(options) };
    }

    /// Options hold a bearer token, a client secret, header values and a URL whose query may
    /// carry a key: `Debug` shows none of them (the derived one showed all).
    #[test]
    fn debug_shows_no_secret() {
        let options = mcpoll_http_options {
            url: "https://h/mcp?api_key=s3cret-url".into(),
            headers: vec![("X-Api-Key".into(), "s3cret-header".into())],
            bearer: Some("s3cret-token".into()),
            ca_file: None,
            proxy: Some(Some("http://proxy:3128".into())),
            client_credentials: Some(("client".into(), "s3cret-client".into())),
        };
        let shown = format!("{options:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("X-Api-Key") && shown.contains("client"), "{shown}");
    }

    /// A URL refused (not UTF-8) still leaves `*out` null, for a cleanup path that frees it.
    #[test]
    fn a_refused_url_leaves_the_out_handle_null() {
        let mut options = std::ptr::NonNull::<mcpoll_http_options>::dangling().as_ptr();
        // SAFETY: a URL that is not UTF-8 but NUL-terminated, and a valid out-pointer.
        let r = unsafe { mcpoll_http_options_new(c"\xff".as_ptr(), &mut options) };
        assert_eq!(r, mcpoll_result::MCPOLL_INVALID_UTF8);
        assert!(options.is_null(), "a cleanup path may free what it holds");
    }

    /// A first restart delay longer than the engine's cap (10 s) is honoured, not cut to it,
    /// and a shorter one set later doubles up to the default cap again.
    #[test]
    fn a_long_restart_delay_is_not_cut_to_the_cap() {
        let mut config: *mut mcpoll_config = std::ptr::null_mut();
        // SAFETY: `config` is a valid place for the handle, then the live handle it holds.
        unsafe {
            assert_eq!(mcpoll_config_new(&mut config), mcpoll_result::MCPOLL_OK);
            assert_eq!(mcpoll_config_set_restart(config, true, 30_000), mcpoll_result::MCPOLL_OK);
            let restart = (*config).config.restart;
            assert_eq!(restart.base_delay, Duration::from_secs(30));
            assert!(restart.max_delay >= restart.base_delay, "{restart:?}");
            assert_eq!(mcpoll_config_set_restart(config, true, 50), mcpoll_result::MCPOLL_OK);
            assert_eq!((*config).config.restart.base_delay, Duration::from_millis(50));
            let default_cap = mcpoll::RestartPolicy::default().max_delay;
            assert_eq!((*config).config.restart.max_delay, default_cap, "the raised cap goes");
            mcpoll_config_free(config);
        }
    }
}
