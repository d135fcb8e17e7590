//! `mcpoll_host`: the host handle and its verbs. Servers, calls and server requests are
//! integers in C; the tables here map them to the Rust handles.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, OsStr};
use std::hash::{BuildHasherDefault, Hasher};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use mcpoll::{CallId, CallOptions, Host, ServerId, ServerRequestId, StdioCommand};

use crate::event::{fill, mcpoll_event, EventBuffers};
use crate::options::{mcpoll_call_options, mcpoll_config, mcpoll_http_options};
use crate::{
    bytes_arg, guard, handle_mut, handle_ref, into_handle, json_arg, mcpoll_result, opt_handle_ref,
    opt_json_arg, opt_os_str_arg, opt_str_arg, out_arg, str_arg, Fail,
};

/// A host of MCP servers with its own poll (see `mcpoll_fd`). One thread at a time.
#[derive(Debug)]
pub struct mcpoll_host {
    host: Host,
    servers: Vec<Entry>,
    /// The id of the next server added: ids start at 1 and are never reused.
    next_server: u64,
    /// Where the last event's pointers point.
    event: EventBuffers,
    /// The last `mcpoll_tools` answer, NUL-terminated.
    listing: Vec<u8>,
    /// The last failure's text, NUL-terminated ("" after a success).
    last_error: Vec<u8>,
}

/// One server: its C id, its Rust handle, and its calls and server requests in flight.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    server: ServerId,
    pub(crate) calls: HashMap<u64, CallId, BuildHasherDefault<IdHasher>>,
    /// Server requests waiting for the host, with the call each belongs to (0: none): a
    /// call's requests are forgotten when it ends.
    pub(crate) requests: HashMap<u64, (ServerRequestId, u64), BuildHasherDefault<IdHasher>>,
}

/// The hasher of the id tables: one multiply per id. The keys are call and request ids the
/// engine made (never a value a peer chose), so SipHash's defence against chosen keys buys
/// nothing here, and its cost showed in the per-call instruction count.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl IdHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(Self::K);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(Self::K);
    }
}

impl Entry {
    /// Forgets an ended call and the server requests made for it.
    pub(crate) fn call_ended(&mut self, call: u64) {
        self.calls.remove(&call);
        if !self.requests.is_empty() {
            self.requests.retain(|_, (_, c)| *c != call);
        }
    }
}

impl mcpoll_host {
    fn entry(&mut self, id: u64) -> Result<&mut Entry, Fail> {
        let found = self.servers.iter_mut().find(|e| e.id == id);
        found.ok_or_else(|| mcpoll_result::MCPOLL_UNKNOWN_SERVER.into())
    }

    fn add(&mut self, server: ServerId) -> u64 {
        let id = self.next_server;
        self.next_server += 1;
        let entry = Entry { id, server, calls: HashMap::default(), requests: HashMap::default() };
        self.servers.push(entry);
        id
    }

    /// The Rust handles of call `call` on server `server`, while the call is known.
    fn held(&self, server: u64, call: u64) -> Result<(ServerId, CallId), Fail> {
        let entry = self.servers.iter().find(|e| e.id == server);
        let entry = entry.ok_or(mcpoll_result::MCPOLL_UNKNOWN_SERVER)?;
        let id = *entry.calls.get(&call).ok_or(mcpoll_result::MCPOLL_UNKNOWN_CALL)?;
        Ok((entry.server, id))
    }

    /// Starts a call on server `id` and records it.
    fn call(
        &mut self,
        id: u64,
        out: &mut u64,
        start: impl FnOnce(&mut Host, ServerId) -> Result<CallId, mcpoll::RequestError>,
    ) -> Result<(), Fail> {
        let found = self.servers.iter_mut().find(|e| e.id == id);
        let entry = found.ok_or(mcpoll_result::MCPOLL_UNKNOWN_SERVER)?;
        let call = start(&mut self.host, entry.server)?;
        entry.calls.insert(call.get(), call);
        *out = call.get();
        Ok(())
    }
}

/// Runs a body on a live host, keeping its last error.
///
/// # Safety
/// `host` is null or a live host handle, not used elsewhere during the call.
unsafe fn with_host(
    host: *mut mcpoll_host,
    body: impl FnOnce(&mut mcpoll_host) -> Result<(), Fail>,
) -> mcpoll_result {
    let code = guard(|| {
        // SAFETY: the caller's contract.
        let h = unsafe { handle_mut(host) }?;
        let result = body(h);
        crate::event::clear_for(&mut h.last_error, 0);
        if let Err(fail) = &result {
            h.last_error.extend(fail.message.bytes().map(|b| if b == 0 { b' ' } else { b }));
        }
        h.last_error.push(0);
        result
    });
    if code == mcpoll_result::MCPOLL_PANIC && !host.is_null() {
        // SAFETY: as above; the body is over, so nothing else borrows the host.
        let h = unsafe { &mut *host };
        h.last_error.clear();
        h.last_error.extend_from_slice(b"internal error (panic)\0");
    }
    code
}

/// [`with_host`] for a body that needs server `server`'s Rust handle.
///
/// # Safety
/// As [`with_host`].
unsafe fn with_server(
    host: *mut mcpoll_host,
    server: u64,
    body: impl FnOnce(&mut mcpoll_host, ServerId) -> Result<(), Fail>,
) -> mcpoll_result {
    // SAFETY: the caller's contract, passed through.
    unsafe {
        with_host(host, |h| {
            let id = h.entry(server)?.server;
            body(h, id)
        })
    }
}

/// The call options behind a nullable handle.
///
/// # Safety
/// `options` is null or a live handle.
unsafe fn call_options<'a>(options: *const mcpoll_call_options) -> &'a CallOptions {
    static DEFAULT: std::sync::OnceLock<CallOptions> = std::sync::OnceLock::new();
    // SAFETY: the caller's contract.
    match unsafe { opt_handle_ref(options) } {
        Some(o) => &o.options,
        None => DEFAULT.get_or_init(CallOptions::default),
    }
}

/// The configuration behind a nullable handle (copied: the handle is not kept).
///
/// # Safety
/// `config` is null or a live handle.
unsafe fn config_of(config: *const mcpoll_config) -> mcpoll::Config {
    // SAFETY: the caller's contract.
    unsafe { opt_handle_ref(config) }.map(|c| c.config.clone()).unwrap_or_default()
}

/// `count` pointers from `p` (which may be null when `count` is 0).
///
/// # Safety
/// `p` is null or valid for reads of `count` pointers.
unsafe fn ptr_array<'a>(
    p: *const *const c_char,
    count: usize,
) -> Result<&'a [*const c_char], Fail> {
    if count == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(mcpoll_result::MCPOLL_NULL_POINTER.into());
    }
    if count > isize::MAX as usize / std::mem::size_of::<*const c_char>() {
        // No such array fits in memory: `from_raw_parts` requires this.
        return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into());
    }
    // SAFETY: not null, and valid for `count` reads by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, count) })
}

/// A new host with a poll of its own, in `*out`. Free it with `mcpoll_host_free`.
///
/// When SIGPIPE still has its default action (terminate), it is set to be ignored, as the
/// Rust runtime does for Rust programs: a write to the pipe of a server process that just died
/// must fail with `EPIPE`, not kill the program. A handler the program installed is kept.
///
/// # Safety
/// `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_host_new(out: *mut *mut mcpoll_host) -> mcpoll_result {
    // SAFETY: the caller's contract, passed through.
    unsafe { new_host(out, || Host::new().map_err(io_fail)) }
}

/// A new host as `mcpoll_host_new` makes, whose tool cache has other bounds: after a failed
/// refresh a catalog is served at most `max_stale_ms` past its freshness (then
/// `mcpoll_tools` gives `MCPOLL_CATALOG_STALE_TOO_LONG`), and at most `max_refreshes` (at
/// least 1) catalog refreshes run at once over every server (one more gives
/// `MCPOLL_CATALOG_TOO_MANY_REFRESHES`). `mcpoll_host_new` uses 300000 ms and 64.
/// `MCPOLL_INVALID_ARGUMENT` for a `max_refreshes` of 0 or a `max_stale_ms` over 366 days.
///
/// # Safety
/// `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_host_new_with_cache(
    max_stale_ms: u64,
    max_refreshes: usize,
    out: *mut *mut mcpoll_host,
) -> mcpoll_result {
    // SAFETY: the caller's contract, passed through.
    unsafe {
        new_host(out, || {
            if max_refreshes == 0 {
                return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into());
            }
            let cache = mcpoll::CacheConfig {
                max_stale: Duration::from_millis(max_stale_ms),
                max_refreshes,
                ..Default::default()
            };
            Host::with_cache(cache).map_err(|e| match e.kind() {
                // The cache's own bounds refused (no system call failed): say which.
                std::io::ErrorKind::InvalidInput => {
                    Fail::new(mcpoll_result::MCPOLL_INVALID_ARGUMENT, e.to_string())
                }
                _ => io_fail(e),
            })
        })
    }
}

/// A host from `make` in `*out`.
///
/// # Safety
/// `out` is null or valid for a write.
unsafe fn new_host(
    out: *mut *mut mcpoll_host,
    make: impl FnOnce() -> Result<Host, Fail>,
) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { out_arg(out, std::ptr::null_mut()) }?;
        ignore_sigpipe();
        let host = make()?;
        *out = into_handle(mcpoll_host {
            host,
            servers: Vec::new(),
            next_server: 1,
            event: EventBuffers::default(),
            listing: Vec::new(),
            last_error: vec![0],
        });
        Ok(())
    })
}

/// An I/O error as `MCPOLL_IO`, with its text.
fn io_fail(e: std::io::Error) -> Fail {
    Fail::new(mcpoll_result::MCPOLL_IO, e.to_string())
}

/// Sets SIGPIPE to be ignored when its action is the default.
fn ignore_sigpipe() {
    // SAFETY: `sigaction` with a null new action only reads the current one into `current`,
    // a zeroed `sigaction` struct we own. Then `signal` installs `SIG_IGN`, which runs no code
    // in the handler context; a race with another thread installing a handler between the
    // two calls can only replace that handler with "ignore", which is what the program asked
    // this library for by not handling SIGPIPE.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_DFL
        {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    }
}

/// Frees a host (null is ignored): its servers' process groups are killed, its connections
/// closed, its descriptor closed. Every pointer it handed out dies with it. From inside the
/// log callback it does nothing (the host may be in the middle of the call that logged):
/// free it after the callback returned.
///
/// # Safety
/// `host` is null or a live host handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_host_free(host: *mut mcpoll_host) {
    // SAFETY: the caller's contract.
    unsafe { crate::free_handle(host) }
}

/// The text of the host's last failure ("" when its last call that takes the host as
/// `mcpoll_host *` succeeded; the calls that take it as `const mcpoll_host *` leave it as it
/// is): NUL-terminated, valid until the next call that takes the host as `mcpoll_host *`.
/// Null for a null host. From inside the log callback (the host may be in the middle of a
/// call) the host is not read: a fixed text says so.
///
/// # Safety
/// `host` is null or a live host handle.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_last_error(host: *const mcpoll_host) -> *const c_char {
    if crate::logging::in_callback() {
        // The call that logged holds the host mutably: reading it here would alias that.
        return c"mcpoll_last_error: called from inside the log callback".as_ptr();
    }
    // SAFETY: the caller's contract.
    match unsafe { host.as_ref() } {
        Some(h) if !h.last_error.is_empty() => h.last_error.as_ptr().cast(),
        Some(_) => c"".as_ptr(),
        None => std::ptr::null(),
    }
}

/// Starts a stdio server: `argv[0]` is the program (looked up in `PATH`), `argv[1..argc]` its
/// arguments; `env` holds `envc` `"NAME=value"` strings added to the inherited environment
/// (null when `envc` is 0); `cwd` is its working directory (null: the host's). argv, env and
/// cwd are bytes, not necessarily UTF-8; all are copied. `config` may be null (defaults). The
/// server's id goes to `*server`; calls may be made at once and are sent when it is ready.
///
/// # Safety
/// `host` is a live host or null; `argv` holds `argc` NUL-terminated strings; `env` holds
/// `envc`; `cwd` is null or NUL-terminated; `config` is null or live; `server` is null or
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_add_stdio_server(
    host: *mut mcpoll_host,
    argv: *const *const c_char,
    argc: usize,
    env: *const *const c_char,
    envc: usize,
    cwd: *const c_char,
    config: *const mcpoll_config,
    server: *mut u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            let out = out_arg(server, 0)?;
            let argv = ptr_array(argv, argc)?;
            let (&program, args) = argv
                .split_first()
                .ok_or(Fail::new(mcpoll_result::MCPOLL_INVALID_ARGUMENT, "argc is 0"))?;
            let mut command = StdioCommand::new(OsStr::from_bytes(bytes_arg(program)?));
            for &arg in args {
                command = command.arg(OsStr::from_bytes(bytes_arg(arg)?));
            }
            for &pair in ptr_array(env, envc)? {
                let pair = bytes_arg(pair)?;
                let eq = pair.iter().position(|&b| b == b'=').filter(|&i| i > 0);
                let eq = eq.ok_or(Fail::new(
                    mcpoll_result::MCPOLL_INVALID_ARGUMENT,
                    "an environment entry is not NAME=value",
                ))?;
                command =
                    command.env(OsStr::from_bytes(&pair[..eq]), OsStr::from_bytes(&pair[eq + 1..]));
            }
            if let Some(cwd) = opt_os_str_arg(cwd)? {
                command = command.current_dir(cwd);
            }
            let id = h.host.add_stdio_server(command, config_of(config))?;
            *out = h.add(id);
            Ok(())
        })
    }
}

/// Adds a Streamable HTTP server (options copied; `config` may be null). Its id goes to
/// `*server`. `MCPOLL_UNSUPPORTED` from a library built without HTTP.
///
/// # Safety
/// `host` and `options` are live handles or null; `config` is null or live; `server` is null
/// or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_add_http_server(
    host: *mut mcpoll_host,
    options: *const mcpoll_http_options,
    config: *const mcpoll_config,
    server: *mut u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            let out = out_arg(server, 0)?;
            let options = handle_ref(options)?;
            #[cfg(feature = "http")]
            {
                let id = h.host.add_http_server(options.build(), config_of(config))?;
                *out = h.add(id);
                Ok(())
            }
            #[cfg(not(feature = "http"))]
            {
                let _ = (h, out, options, config_of(config));
                Err(mcpoll_result::MCPOLL_UNSUPPORTED.into())
            }
        })
    }
}

/// Calls tool `name` with `arguments` (a JSON object; null: `{}`); `options` may be null. The
/// call's id goes to `*call`; it ends with `MCPOLL_EVENT_CALL_DONE` or `_CALL_FAILED`.
/// Arguments that are not one JSON value give `MCPOLL_ARGUMENTS_NOT_JSON`, a value that is not
/// an object `MCPOLL_ARGUMENTS_NOT_OBJECT`.
///
/// # Safety
/// `host` is live or null; strings are null or NUL-terminated; `options` is null or live;
/// `call` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_call_tool(
    host: *mut mcpoll_host,
    server: u64,
    name: *const c_char,
    arguments: *const c_char,
    options: *const mcpoll_call_options,
    call: *mut u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            let (out, name) = (out_arg(call, 0)?, str_arg(name)?);
            // The engine checks the text once, as it writes it: no parse and no copy here.
            let arguments = if arguments.is_null() { "{}" } else { str_arg(arguments)? };
            let opts = call_options(options);
            h.call(server, out, |host, id| host.call_tool_json(id, name, arguments, opts))
        })
    }
}

/// Lists every tool (`tools/list`, every page) as a call: the result object comes with
/// `MCPOLL_EVENT_CALL_DONE`. `mcpoll_tools` asks the capability cache instead.
///
/// # Safety
/// As `mcpoll_call_tool`.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_list_tools(
    host: *mut mcpoll_host,
    server: u64,
    options: *const mcpoll_call_options,
    call: *mut u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            let out = out_arg(call, 0)?;
            let opts = call_options(options);
            h.call(server, out, |host, id| host.list_tools(id, opts))
        })
    }
}

/// The server's tools through the capability cache: `MCPOLL_OK` with `*json` a JSON array of
/// the tool definitions (`*len` bytes, NUL-terminated, valid until the next call that takes
/// the host as `mcpoll_host *`), or `MCPOLL_PENDING` while the cache lists them (poll, then
/// ask again), or `MCPOLL_CATALOG_NOT_READY` before the server was first ready.
///
/// # Safety
/// `host` is live or null; `json` and `len` are null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_tools(
    host: *mut mcpoll_host,
    server: u64,
    json: *mut *const c_char,
    len: *mut usize,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            let (json, len) = (out_arg(json, std::ptr::null())?, out_arg(len, 0)?);
            let id = h.entry(server)?.server;
            let view = h.host.tool_catalog(id)?.ok_or(mcpoll_result::MCPOLL_PENDING)?;
            let buf = &mut h.listing;
            let need = view.definitions().map(|d| d.len() + 1).sum::<usize>() + 1;
            crate::event::clear_for(buf, need);
            buf.push(b'[');
            for (i, definition) in view.definitions().enumerate() {
                if i > 0 {
                    buf.push(b',');
                }
                buf.extend_from_slice(definition.as_bytes());
            }
            buf.push(b']');
            *len = buf.len();
            buf.push(0);
            *json = buf.as_ptr().cast();
            Ok(())
        })
    }
}

/// Reads the resource at `uri`; the result object comes with `MCPOLL_EVENT_CALL_DONE`.
///
/// # Safety
/// As `mcpoll_call_tool`.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_read_resource(
    host: *mut mcpoll_host,
    server: u64,
    uri: *const c_char,
    options: *const mcpoll_call_options,
    call: *mut u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            let (out, uri) = (out_arg(call, 0)?, str_arg(uri)?);
            let opts = call_options(options);
            h.call(server, out, |host, id| host.read_resource(id, uri, opts))
        })
    }
}

/// Gets prompt `name` with `arguments` (a JSON object of strings, or null).
///
/// # Safety
/// As `mcpoll_call_tool`.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_get_prompt(
    host: *mut mcpoll_host,
    server: u64,
    name: *const c_char,
    arguments: *const c_char,
    options: *const mcpoll_call_options,
    call: *mut u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            let (out, name) = (out_arg(call, 0)?, str_arg(name)?);
            let arguments = opt_json_arg(arguments)?;
            let opts = call_options(options);
            h.call(server, out, |host, id| host.get_prompt(id, name, arguments.as_deref(), opts))
        })
    }
}

/// Sends an extension request `method` (a name with no verb of its own in mcpoll, such as
/// `"lab/skills_list"`) with `params` (a JSON object, or null for none); the result object
/// comes with `MCPOLL_EVENT_CALL_DONE`. `MCPOLL_INVALID_METHOD` for an empty name, one of
/// MCP's own methods, or one with a byte outside printable ASCII.
///
/// # Safety
/// As `mcpoll_call_tool`.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_request(
    host: *mut mcpoll_host,
    server: u64,
    method: *const c_char,
    params: *const c_char,
    options: *const mcpoll_call_options,
    call: *mut u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            let (out, method) = (out_arg(call, 0)?, str_arg(method)?);
            let params = opt_json_arg(params)?;
            let opts = call_options(options);
            h.call(server, out, |host, id| host.request(id, method, params.as_deref(), opts))
        })
    }
}

/// `mcpoll_set_policy`: every call is sent (no policy asks).
pub const MCPOLL_CONFIRM_NEVER: u32 = 0;
/// Ask before a tool that may destroy or overwrite (not read-only and not
/// `destructiveHint: false`, or not in the tool cache).
pub const MCPOLL_CONFIRM_DESTRUCTIVE: u32 = 1;
/// Ask before every tool call.
pub const MCPOLL_CONFIRM_ALWAYS: u32 = 2;

/// Installs the local authorization policy of server `server`, or the host's (for servers
/// with none of their own) when `server` is 0: `confirm` (`MCPOLL_CONFIRM_*`) says which tool
/// calls are held unsent and asked about with `MCPOLL_EVENT_AUTHORIZATION_ASKED`; answer with
/// `mcpoll_allow_call` or `mcpoll_deny_call`, in this frame or a later one (the call's
/// deadline runs meanwhile). Replaces the policy installed before.
///
/// # Safety
/// `host` is live or null.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_set_policy(
    host: *mut mcpoll_host,
    server: u64,
    confirm: u32,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_host(host, |h| {
            let confirm = match confirm {
                MCPOLL_CONFIRM_NEVER => mcpoll::Confirm::Never,
                MCPOLL_CONFIRM_DESTRUCTIVE => mcpoll::Confirm::Destructive,
                MCPOLL_CONFIRM_ALWAYS => mcpoll::Confirm::Always,
                _ => return Err(mcpoll_result::MCPOLL_INVALID_ARGUMENT.into()),
            };
            let policy = mcpoll::DefaultPolicy::new(confirm);
            if server == 0 {
                h.host.set_policy(policy);
            } else {
                let id = h.entry(server)?.server;
                h.host.set_server_policy(id, policy);
            }
            Ok(())
        })
    }
}

/// Disables `count` tools of a server by name (copied): calls to them end at once, unsent,
/// with `MCPOLL_LOCAL_AUTHORIZATION_DENIED`, and the tool cache leaves them out.
///
/// # Safety
/// `host` is live or null; `names` holds `count` NUL-terminated strings (null when `count`
/// is 0).
#[no_mangle]
pub unsafe extern "C" fn mcpoll_disable_tools(
    host: *mut mcpoll_host,
    server: u64,
    names: *const *const c_char,
    count: usize,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_server(host, server, |h, id| {
            // The array is checked before anything is sized by `count`: a null `names` with a
            // huge count is a null pointer, not an allocation that aborts.
            let names = ptr_array(names, count)?;
            let tools = names.iter().map(|&name| Ok(str_arg(name)?.to_owned()));
            let tools = tools.collect::<Result<Vec<_>, Fail>>()?;
            h.host.disable_tools(id, tools);
            Ok(())
        })
    }
}

/// Lets a call held for authorization (`MCPOLL_EVENT_AUTHORIZATION_ASKED`) go.
/// `MCPOLL_AUTHORIZE_NOT_HELD` when the call is not held (already answered, or never asked
/// about); `MCPOLL_AUTHORIZE_OVERLOADED` when the queue has no room now: it stays held, ask
/// again later. An open circuit breaker ends it (`MCPOLL_LOCAL_BREAKER_OPEN`).
///
/// # Safety
/// `host` is live or null.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_allow_call(
    host: *mut mcpoll_host,
    server: u64,
    call: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_host(host, |h| {
            let (server, id) = h.held(server, call)?;
            h.host.allow_call(server, id)?;
            Ok(())
        })
    }
}

/// Refuses a call held for authorization: it ends unsent with
/// `MCPOLL_LOCAL_AUTHORIZATION_DENIED`, its message carrying `reason` (copied; NULL gives
/// none).
///
/// # Safety
/// `host` is live or null; `reason` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_deny_call(
    host: *mut mcpoll_host,
    server: u64,
    call: u64,
    reason: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract, for every argument.
    unsafe {
        with_host(host, |h| {
            // NULL is no reason: refused as a null pointer, a program that ignored the
            // result believed the call denied while it stayed held until its deadline.
            let reason = opt_str_arg(reason)?.unwrap_or_default();
            let (server, id) = h.held(server, call)?;
            h.host.deny_call(server, id, reason)?;
            Ok(())
        })
    }
}

/// Cancels a call: it ends at once with `MCPOLL_EVENT_CALL_FAILED` (`MCPOLL_LOCAL_CANCELLED`),
/// and the server is told.
///
/// # Safety
/// `host` is live or null.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_cancel(
    host: *mut mcpoll_host,
    server: u64,
    call: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_host(host, |h| {
            let entry = h.servers.iter().find(|e| e.id == server);
            let entry = entry.ok_or(mcpoll_result::MCPOLL_UNKNOWN_SERVER)?;
            let id = *entry.calls.get(&call).ok_or(mcpoll_result::MCPOLL_UNKNOWN_CALL)?;
            h.host.cancel(entry.server, id)?;
            Ok(())
        })
    }
}

/// Answers a server request (`MCPOLL_EVENT_SERVER_REQUEST`) with `result` (a JSON object: an
/// `ElicitResult`, a `CreateMessageResult`, a `ListRootsResult`).
///
/// # Safety
/// `host` is live or null; `result` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_answer(
    host: *mut mcpoll_host,
    server: u64,
    request: u64,
    result: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_host(host, |h| {
            let result = json_arg(result)?;
            respond(h, server, request, |host, s, r| host.answer(s, r, &result))
        })
    }
}

/// Refuses a server request: the server gets an error answer.
///
/// # Safety
/// `host` is live or null.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_reject(
    host: *mut mcpoll_host,
    server: u64,
    request: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe { with_host(host, |h| respond(h, server, request, |host, s, r| host.reject(s, r))) }
}

fn respond(
    h: &mut mcpoll_host,
    server: u64,
    request: u64,
    f: impl FnOnce(&mut Host, ServerId, ServerRequestId) -> Result<(), mcpoll::AnswerError>,
) -> Result<(), Fail> {
    let found = h.servers.iter_mut().find(|e| e.id == server);
    let entry = found.ok_or(mcpoll_result::MCPOLL_UNKNOWN_SERVER)?;
    let (id, _) = *entry.requests.get(&request).ok_or(mcpoll_result::MCPOLL_UNKNOWN_REQUEST)?;
    match f(&mut h.host, entry.server, id) {
        Ok(()) => {
            entry.requests.remove(&request);
            Ok(())
        }
        Err(mcpoll::AnswerError::NotPending) => {
            entry.requests.remove(&request);
            Err(mcpoll::AnswerError::NotPending.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Sets the roots offered to the server (a `ListRootsResult`: `{"roots":[{"uri":"file:///..."}]}`);
/// the server is told they changed when it asked to be.
///
/// # Safety
/// `host` is live or null; `roots` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_set_roots(
    host: *mut mcpoll_host,
    server: u64,
    roots: *const c_char,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_server(host, server, |h, id| {
            h.host.set_roots(id, &json_arg(roots)?)?;
            Ok(())
        })
    }
}

/// Waits at most `timeout_ms` (0: not at all; negative: until something happens) for I/O or
/// the next deadline, then does the work that is due. Drain `mcpoll_next_event` after it.
///
/// # Safety
/// `host` is live or null.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_poll(host: *mut mcpoll_host, timeout_ms: i64) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_host(host, |h| {
            let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
            h.host.poll(timeout).map_err(|e| Fail::new(mcpoll_result::MCPOLL_IO, e.to_string()))
        })
    }
}

/// The descriptor to watch for readability in the program's own loop (`poll(2)`, libuv,
/// asyncio's `add_reader`, ...): when it is readable, call `mcpoll_poll(host, 0)`. It belongs
/// to the host (never read, write or close it) and lives as long as the host.
///
/// # Safety
/// `host` is live or null; `fd` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_fd(host: *const mcpoll_host, fd: *mut c_int) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (fd, h) = unsafe { (out_arg(fd, -1)?, handle_ref(host)?) };
        *fd = h.host.as_raw_fd();
        Ok(())
    })
}

/// Milliseconds until the host must be polled although its descriptor is not readable, in
/// `*ms`: rounded up, 0 when due now (a deadline passed, or an event waits for
/// mcpoll_next_event: a cancel, or a call the policy refused or holds for an ask, queues one
/// with no I/O to wake the loop), -1 when nothing is due (sleep until the descriptor is
/// readable). Read it again after every call that takes the host as `mcpoll_host *`.
///
/// # Safety
/// `host` is live or null; `ms` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_timeout_ms(
    host: *const mcpoll_host,
    ms: *mut i64,
) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (ms, h) = unsafe { (out_arg(ms, -1)?, handle_ref(host)?) };
        *ms = match h.host.poll_timeout() {
            _ if h.host.has_events() => 0,
            None => -1,
            Some(t) => {
                let left = t.saturating_duration_since(Instant::now());
                let whole = left.as_millis() + u128::from(left.subsec_nanos() % 1_000_000 != 0);
                i64::try_from(whole).unwrap_or(i64::MAX)
            }
        };
        Ok(())
    })
}

/// Whether the host has nothing to do now, in `*idle`: no call pending, nothing waiting to be
/// written, no event queued, no deadline due. A loop that runs every frame may skip
/// `mcpoll_poll` while it is true (no system call then), and poll now and then anyway, at the
/// rate what servers send unasked needs an answer (every few hundred milliseconds is plenty
/// for `ping`). The answer costs the servers something happened to since the last poll, not
/// every server the host keeps.
///
/// # Safety
/// `host` is live or null; `idle` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_is_idle(
    host: *const mcpoll_host,
    idle: *mut bool,
) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (idle, h) = unsafe { (out_arg(idle, false)?, handle_ref(host)?) };
        *idle = h.host.is_idle();
        Ok(())
    })
}

/// The next event into `*event`, or an event of kind `MCPOLL_EVENT_NONE` when none is queued.
/// Its pointers are valid until the next call that takes the host as `mcpoll_host *`.
///
/// # Safety
/// `host` is live or null; `event` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_next_event(
    host: *mut mcpoll_host,
    event: *mut mcpoll_event,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_host(host, |h| {
            let out = out_arg(event, mcpoll_event::none())?;
            let mcpoll_host { host, servers, event: bufs, .. } = h;
            while let Some((id, e)) = host.poll_event() {
                // Every server the host has is in the table (added and removed together).
                if let Some(entry) = servers.iter_mut().find(|s| s.server == id) {
                    fill(out, bufs, entry, e);
                    break;
                }
            }
            Ok(())
        })
    }
}

/// Closes a server: its calls fail, its process is stopped (stdin closed, then SIGTERM and
/// SIGKILL to its process group), its connections close. Returns at once; keep polling. Its
/// id stays valid (calls on it give `MCPOLL_CLOSED`) until `mcpoll_remove_server`.
///
/// # Safety
/// `host` is live or null.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_close_server(host: *mut mcpoll_host, server: u64) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_server(host, server, |h, id| {
            h.host.close_server(id);
            Ok(())
        })
    }
}

/// Closes (if needed) and forgets a server: its queued events are dropped, and its id, its
/// calls' ids and its requests' ids are unknown from now on.
///
/// # Safety
/// `host` is live or null.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_remove_server(
    host: *mut mcpoll_host,
    server: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_server(host, server, |h, id| {
            h.host.remove_server(id);
            h.servers.retain(|e| e.id != server);
            Ok(())
        })
    }
}

/// Starts a degraded stdio server (one whose process kept crashing) again now.
///
/// # Safety
/// `host` is live or null.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_restart_server(
    host: *mut mcpoll_host,
    server: u64,
) -> mcpoll_result {
    // SAFETY: the caller's contract.
    unsafe {
        with_server(host, server, |h, id| {
            h.host.restart(id);
            Ok(())
        })
    }
}

/// The process id of a stdio server while it runs, in `*pid` (0: not running, or HTTP).
///
/// # Safety
/// `host` is live or null; `pid` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn mcpoll_server_pid(
    host: *const mcpoll_host,
    server: u64,
    pid: *mut u32,
) -> mcpoll_result {
    guard(|| {
        // SAFETY: the caller's contract.
        let (pid, h) = unsafe { (out_arg(pid, 0)?, handle_ref(host)?) };
        let entry = h.servers.iter().find(|e| e.id == server);
        let entry = entry.ok_or(mcpoll_result::MCPOLL_UNKNOWN_SERVER)?;
        *pid = h.host.pid(entry.server).unwrap_or(0);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Out-parameters are written through the pointer before any reference to them is made:
    /// C passes the address of an uninitialised variable, whose bytes may be no valid value
    /// (a `bool` of 0xAB, an event kind past the enum). A reference to such memory is
    /// undefined behaviour even unread, which only Miri would show; this runs the calls over
    /// garbage and checks what comes back.
    #[test]
    fn out_parameters_over_garbage_come_back_valid() {
        // SAFETY: live handles; each out-pointer is to a local of the right size and
        // alignment (filled with garbage bytes); read only after the call wrote it.
        unsafe {
            let mut host = std::mem::MaybeUninit::<*mut mcpoll_host>::uninit();
            assert_eq!(mcpoll_host_new(host.as_mut_ptr()), mcpoll_result::MCPOLL_OK);
            let host = host.assume_init();
            let mut idle = std::mem::MaybeUninit::<bool>::uninit();
            idle.as_mut_ptr().cast::<u8>().write(0xAB);
            assert_eq!(mcpoll_is_idle(host, idle.as_mut_ptr()), mcpoll_result::MCPOLL_OK);
            assert!(idle.assume_init(), "a host with no server is idle");
            let mut event = std::mem::MaybeUninit::<mcpoll_event>::uninit();
            event.as_mut_ptr().cast::<u8>().write_bytes(0xAB, size_of::<mcpoll_event>());
            assert_eq!(mcpoll_next_event(host, event.as_mut_ptr()), mcpoll_result::MCPOLL_OK);
            let event = event.assume_init();
            assert_eq!(event.kind, crate::event::mcpoll_event_kind::MCPOLL_EVENT_NONE);
            mcpoll_host_free(host);
        }
    }

    /// A library built without the `http` feature refuses HTTP servers with a result of its
    /// own (`cargo test -p mcpoll-capi --no-default-features --lib` runs this).
    #[cfg(not(feature = "http"))]
    #[test]
    fn without_http_an_http_server_is_unsupported() {
        // SAFETY: live handles and valid out-pointers, freed at the end.
        unsafe {
            let mut host = std::ptr::null_mut();
            assert_eq!(mcpoll_host_new(&mut host), mcpoll_result::MCPOLL_OK);
            let mut options = std::ptr::null_mut();
            let url = c"http://127.0.0.1:9/mcp".as_ptr();
            let r = crate::options::mcpoll_http_options_new(url, &mut options);
            assert_eq!(r, mcpoll_result::MCPOLL_OK);
            let mut server = 0;
            let r = mcpoll_add_http_server(host, options, std::ptr::null(), &mut server);
            assert_eq!(r, mcpoll_result::MCPOLL_UNSUPPORTED);
            crate::options::mcpoll_http_options_free(options);
            mcpoll_host_free(host);
        }
    }

    /// Null handles and out-pointers are results, never a crash.
    #[test]
    fn null_pointers_are_results() {
        let mut server = 0;
        // SAFETY: every pointer is null or valid; null is what is being tested.
        unsafe {
            assert_eq!(mcpoll_host_new(std::ptr::null_mut()), mcpoll_result::MCPOLL_NULL_POINTER);
            let r = mcpoll_add_stdio_server(
                std::ptr::null_mut(),
                std::ptr::null(),
                1,
                std::ptr::null(),
                0,
                std::ptr::null(),
                std::ptr::null(),
                &mut server,
            );
            assert_eq!(r, mcpoll_result::MCPOLL_NULL_POINTER);
            let mut host = std::ptr::null_mut();
            assert_eq!(mcpoll_host_new(&mut host), mcpoll_result::MCPOLL_OK);
            let r = mcpoll_add_stdio_server(
                host,
                std::ptr::null(),
                1,
                std::ptr::null(),
                0,
                std::ptr::null(),
                std::ptr::null(),
                &mut server,
            );
            assert_eq!(r, mcpoll_result::MCPOLL_NULL_POINTER);
            assert!(!mcpoll_last_error(host).is_null());
            assert!(mcpoll_last_error(std::ptr::null()).is_null());
            assert_eq!(
                mcpoll_timeout_ms(host, std::ptr::null_mut()),
                mcpoll_result::MCPOLL_NULL_POINTER
            );
            let mut ms = 0;
            assert_eq!(mcpoll_timeout_ms(host, &mut ms), mcpoll_result::MCPOLL_OK);
            assert_eq!(ms, -1, "a host with nothing to do has no deadline");
            // A null host still leaves each of these getters' out-value set (the functions
            // that take a live host's lock check the host before their out-values).
            let (mut ms, mut fd, mut idle, mut pid) = (7, 7, true, 7);
            let null = std::ptr::null();
            assert_eq!(mcpoll_timeout_ms(null, &mut ms), mcpoll_result::MCPOLL_NULL_POINTER);
            assert_eq!(mcpoll_fd(null, &mut fd), mcpoll_result::MCPOLL_NULL_POINTER);
            assert_eq!(mcpoll_is_idle(null, &mut idle), mcpoll_result::MCPOLL_NULL_POINTER);
            assert_eq!(mcpoll_server_pid(null, 1, &mut pid), mcpoll_result::MCPOLL_NULL_POINTER);
            assert_eq!((ms, fd, idle, pid), (-1, -1, false, 0));
            mcpoll_host_free(host);
        }
    }

    /// A cache bound out of range is an invalid argument, not an I/O failure.
    #[test]
    fn a_cache_bound_out_of_range_is_an_invalid_argument() {
        let mut host = std::ptr::null_mut();
        let days_367 = 367 * 86_400_000;
        // SAFETY: a valid out-pointer; no host is made.
        let r = unsafe { mcpoll_host_new_with_cache(days_367, 64, &mut host) };
        assert_eq!(r, mcpoll_result::MCPOLL_INVALID_ARGUMENT);
        assert!(host.is_null());
    }

    /// A null array with a huge count is a null pointer, not an allocation of `count` names
    /// (which aborted, or panicked past `isize::MAX`); a count no array can have is refused.
    #[test]
    fn an_array_is_checked_before_its_count_sizes_anything() {
        // SAFETY: live handles and valid pointers, but for the null array under test.
        unsafe {
            let mut host = std::ptr::null_mut();
            assert_eq!(mcpoll_host_new(&mut host), mcpoll_result::MCPOLL_OK);
            let argv = [c"cat".as_ptr()];
            let mut server = 0;
            let r = mcpoll_add_stdio_server(
                host,
                argv.as_ptr(),
                1,
                std::ptr::null(),
                0,
                std::ptr::null(),
                std::ptr::null(),
                &mut server,
            );
            assert_eq!(r, mcpoll_result::MCPOLL_OK);
            let r = mcpoll_disable_tools(host, server, std::ptr::null(), usize::MAX);
            assert_eq!(r, mcpoll_result::MCPOLL_NULL_POINTER);
            let r = mcpoll_disable_tools(host, server, argv.as_ptr(), usize::MAX);
            assert_eq!(r, mcpoll_result::MCPOLL_INVALID_ARGUMENT);
            mcpoll_host_free(host);
        }
    }
}
