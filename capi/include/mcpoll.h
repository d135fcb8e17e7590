/*
 * mcpoll.h: the C ABI of mcpoll, a poll-driven MCP (Model Context Protocol) client.
 *
 * Written by hand; capi/tests/header.rs checks that it declares every exported function,
 * every result value, every event kind and constant, and the event struct's fields in order.
 *
 * THE LOOP. A host owns one descriptor (mcpoll_fd) and has one deadline (mcpoll_timeout_ms).
 * Any loop watches the descriptor for readability and wakes at the deadline, then calls
 * mcpoll_poll(host, 0), which never blocks, and drains mcpoll_next_event until it returns an
 * event of kind MCPOLL_EVENT_NONE. Read the deadline again after every call that takes the
 * host as `mcpoll_host *`. With nothing pending the deadline is -1 and the descriptor stays
 * quiet: the loop sleeps. mcpoll_poll(host, N) waits up to N ms itself (-1: no limit).
 *
 * ERRORS. Every function that can fail returns mcpoll_result: MCPOLL_OK (0) or one distinct
 * value per error kind. mcpoll_result_name and mcpoll_result_message describe a value;
 * mcpoll_last_error gives the details of a host's last failure. No function aborts or
 * unwinds into C: null pointers, invalid UTF-8, invalid JSON, unknown ids and calls from
 * inside the log callback give a result; an internal panic gives MCPOLL_PANIC.
 *
 * IDS. Servers, calls and server requests are uint64_t ids, never 0. Server ids are never
 * reused in a host, so an id used after mcpoll_remove_server is MCPOLL_UNKNOWN_SERVER; a call
 * id is known until its CALL_DONE or CALL_FAILED event has been returned, a server request id
 * until it is answered, rejected or expired, or the call it was made for ended.
 *
 * LIFETIMES. Handles (mcpoll_host, mcpoll_config, mcpoll_call_options, mcpoll_http_options)
 * live from their *_new to their *_free; passing a freed handle is undefined behaviour, as
 * with free(3). Options and configurations are copied by the calls they are passed to and may
 * be freed right after. Strings passed in are copied; none is kept. Pointers handed out:
 *   - mcpoll_result_name, mcpoll_result_message, mcpoll_version: static, forever;
 *   - every pointer in an mcpoll_event, mcpoll_tools' JSON and mcpoll_last_error's text: owned
 *     by the host, valid until the next call that takes that host as `mcpoll_host *` (not
 *     const) or until mcpoll_host_free, whichever comes first;
 *   - the log callback's strings: during the callback only.
 *
 * THREADS. A host may move between threads but must not be used by two at once. The log
 * callback is process-wide and runs on the thread that logged, inside an mcpoll call.
 *
 * Build: cargo build --release -p mcpoll-capi
 * Link (static): cc app.c -Icapi/include target/release/libmcpoll_capi.a -lpthread -ldl -lm
 * Link (shared): cc app.c -Icapi/include -Ltarget/release -lmcpoll_capi
 */
#ifndef MCPOLL_H
#define MCPOLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mcpoll_result {
  MCPOLL_OK = 0,
  /* The ABI's own: the caller's mistakes and the library's state. */
  MCPOLL_NULL_POINTER = 1,
  MCPOLL_INVALID_UTF8 = 2,
  MCPOLL_INVALID_JSON = 3,
  MCPOLL_INVALID_ARGUMENT = 4,
  MCPOLL_UNKNOWN_SERVER = 5,
  MCPOLL_UNKNOWN_CALL = 6,
  MCPOLL_UNKNOWN_REQUEST = 7,
  MCPOLL_REENTRANT = 8,
  MCPOLL_PANIC = 9,
  MCPOLL_PENDING = 10,
  MCPOLL_IO = 11,
  MCPOLL_LOGGER_TAKEN = 12,
  MCPOLL_UNSUPPORTED = 13,
  /* Adding a server. */
  MCPOLL_CONFIG_INVALID = 100,
  MCPOLL_SPAWN_FAILED = 101,
  MCPOLL_TOO_MANY_SERVERS = 102,
  MCPOLL_HTTP_URL = 103,
  MCPOLL_HTTP_RESOLVE = 104,
  MCPOLL_HTTP_TLS_SETUP = 105,
  MCPOLL_HTTP_HEADER = 106,
  MCPOLL_HTTP_OAUTH_SETUP = 107,
  /* Starting a call. */
  MCPOLL_OVERLOADED = 200,
  MCPOLL_CLOSED = 201,
  MCPOLL_ARGUMENTS_NOT_OBJECT = 202,
  MCPOLL_NOT_SUPPORTED_BY_ERA = 203,
  MCPOLL_REQUEST_BREAKER_OPEN = 204,
  MCPOLL_REQUEST_DEGRADED = 205,
  MCPOLL_TRACE_CONTEXT = 206,
  /* Cancelling. */
  MCPOLL_CANCEL_NOT_PENDING = 300,
  MCPOLL_CANCEL_HANDSHAKE = 301,
  /* Answering a server request, setting roots. */
  MCPOLL_ANSWER_NOT_PENDING = 400,
  MCPOLL_ANSWER_NOT_OBJECT = 401,
  MCPOLL_ANSWER_MISMATCH = 402,
  /* The capability cache. */
  MCPOLL_CATALOG_NOT_READY = 500,
  MCPOLL_CATALOG_STALE_TOO_LONG = 501,
  MCPOLL_CATALOG_TOO_MANY_REFRESHES = 502,
  MCPOLL_CATALOG_TIMEOUT = 503,
  /* A call's end (event.error): the server answered with a JSON-RPC error (event.rpc_code). */
  MCPOLL_PROTOCOL = 1000,
  /* ... the server broke the protocol or refused access. */
  MCPOLL_PEER_AUTH_REQUIRED = 1100,
  MCPOLL_PEER_FORBIDDEN = 1101,
  MCPOLL_PEER_AUTHORIZATION = 1102,
  MCPOLL_PEER_TOO_LARGE = 1103,
  MCPOLL_PEER_INVALID_RESULT = 1104,
  MCPOLL_PEER_CURSOR_REPEATED = 1105,
  MCPOLL_PEER_NO_COMMON_VERSION = 1106,
  MCPOLL_PEER_VERSION_REFUSED = 1107,
  MCPOLL_PEER_UNDECLARED_INPUT_REQUEST = 1108,
  /* ... the pipe or socket failed. */
  MCPOLL_TRANSPORT_PROCESS_EXIT = 1200,
  MCPOLL_TRANSPORT_CLOSED = 1201,
  MCPOLL_TRANSPORT_HTTP_STATUS = 1202,
  MCPOLL_TRANSPORT_CONNECTION_LOST = 1203,
  MCPOLL_TRANSPORT_CONNECT_FAILED = 1204,
  MCPOLL_TRANSPORT_TLS = 1205,
  MCPOLL_TRANSPORT_BAD_RESPONSE = 1206,
  MCPOLL_TRANSPORT_SESSION_EXPIRED = 1207,
  MCPOLL_TRANSPORT_CLOSED_BY_SERVER = 1208,
  /* ... mcpoll ended the call. */
  MCPOLL_LOCAL_DELIVERY_UNKNOWN = 1300,
  MCPOLL_LOCAL_BREAKER_OPEN = 1301,
  MCPOLL_LOCAL_DEGRADED = 1302,
  MCPOLL_LOCAL_CANCELLED = 1303,
  MCPOLL_LOCAL_DEADLINE_EXCEEDED = 1304,
  MCPOLL_LOCAL_TOO_MANY_PAGES = 1305,
  MCPOLL_LOCAL_HANDSHAKE_FAILED = 1306,
  MCPOLL_LOCAL_TOO_MANY_INPUT_ROUNDS = 1307,
  MCPOLL_LOCAL_INPUT_REJECTED = 1308,
  MCPOLL_LOCAL_TOO_MANY_SERVER_REQUESTS = 1309,
  /* A Rust error kind newer than this header. */
  MCPOLL_UNKNOWN_ERROR = 9999
} mcpoll_result;

typedef enum mcpoll_event_kind {
  MCPOLL_EVENT_NONE = 0, /* no event was queued */
  MCPOLL_EVENT_READY = 1, /* data: the protocol version */
  MCPOLL_EVENT_CALL_DONE = 2, /* call; data: the result object (JSON); is_error */
  MCPOLL_EVENT_CALL_FAILED = 3, /* call; error...; data: the JSON-RPC error's data, if any */
  MCPOLL_EVENT_PROGRESS = 4, /* call; progress, total; data: the message */
  MCPOLL_EVENT_SERVER_REQUEST = 5, /* request, request_kind, call (0: none); data: params */
  MCPOLL_EVENT_SERVER_REQUEST_EXPIRED = 6, /* request */
  MCPOLL_EVENT_TRANSPORT_LOST = 7, /* error...; restart_in_ms */
  MCPOLL_EVENT_CLOSED = 8, /* error... */
  MCPOLL_EVENT_LIST_CHANGED = 9, /* list_kind */
  MCPOLL_EVENT_TOOLS_CHANGED = 10, /* the capability cache's tool catalog changed */
  MCPOLL_EVENT_PROMPTS_CHANGED = 11,
  MCPOLL_EVENT_RESOURCES_CHANGED = 12,
  MCPOLL_EVENT_RESOURCE_UPDATED = 13, /* data: the URI */
  MCPOLL_EVENT_SUBSCRIBED = 14, /* call; data: the notifications (JSON) */
  MCPOLL_EVENT_BREAKER = 15, /* a circuit breaker changed state */
  MCPOLL_EVENT_OTHER = 99 /* an event this header does not describe */
} mcpoll_event_kind;

/* mcpoll_config_set_answers flags. */
#define MCPOLL_ANSWER_ELICITATION_FORM 1
#define MCPOLL_ANSWER_ELICITATION_URL 2
#define MCPOLL_ANSWER_SAMPLING 4
#define MCPOLL_ANSWER_ROOTS 8
#define MCPOLL_ANSWER_ROOTS_LIST_CHANGED 16

/* mcpoll_call_options_set_idempotency values. */
#define MCPOLL_IDEMPOTENCY_DEFAULT 0 /* from the tool's annotations */
#define MCPOLL_IDEMPOTENCY_READ 1
#define MCPOLL_IDEMPOTENCY_IDEMPOTENT 2
#define MCPOLL_IDEMPOTENCY_KEYED 3
#define MCPOLL_IDEMPOTENCY_UNKNOWN 4 /* never re-sent automatically */

typedef struct mcpoll_host mcpoll_host;
typedef struct mcpoll_config mcpoll_config;
typedef struct mcpoll_call_options mcpoll_call_options;
typedef struct mcpoll_http_options mcpoll_http_options;

/*
 * One event. Every pointer is owned by the host and valid until the next call that takes the
 * host as `mcpoll_host *` (copy what must live longer); none is ever NULL ("" when empty).
 */
typedef struct mcpoll_event {
  mcpoll_event_kind kind;
  uint64_t server;
  uint64_t call;          /* 0: none */
  uint64_t request;       /* SERVER_REQUEST(_EXPIRED): the id for mcpoll_answer */
  uint32_t request_kind;  /* 1 form elicitation, 2 URL elicitation, 3 sampling, 4 roots */
  uint32_t list_kind;     /* LIST_CHANGED: 1 tools, 2 prompts, 3 resources */
  mcpoll_result error;    /* CALL_FAILED, TRANSPORT_LOST, CLOSED; else MCPOLL_OK */
  const char *error_kind; /* "protocol", "peer", "transport", "local" */
  const char *error_name; /* the Rust API's name: "cancelled", "process_exit", ... */
  const char *error_message;
  int64_t rpc_code;       /* MCPOLL_PROTOCOL: the JSON-RPC error code */
  int32_t exit_code;      /* MCPOLL_TRANSPORT_PROCESS_EXIT: exit code, or -1 */
  int32_t exit_signal;    /* MCPOLL_TRANSPORT_PROCESS_EXIT: signal, or -1 */
  int64_t restart_in_ms;  /* TRANSPORT_LOST: ms to the restart, or -1 */
  bool is_error;          /* CALL_DONE: the tool reported isError (the call completed) */
  double progress;        /* PROGRESS */
  double total;           /* PROGRESS: NaN when unknown */
  const char *data;       /* NUL-terminated; see mcpoll_event_kind */
  size_t data_len;        /* bytes before the NUL */
} mcpoll_event;

/* Log callback: level 1 error .. 5 trace; target and message valid during the call only. */
typedef void (*mcpoll_log_callback)(void *userdata, uint32_t level, const char *target,
                                    const char *message);

/* ---- library ---- */
const char *mcpoll_version(void);
const char *mcpoll_result_name(uint32_t result);
const char *mcpoll_result_message(uint32_t result);
/* Process-wide; NULL callback or max_level 0 turns logging off. Calls into mcpoll from inside
 * the callback return MCPOLL_REENTRANT. MCPOLL_LOGGER_TAKEN: another Rust logger came first. */
mcpoll_result mcpoll_set_log_callback(mcpoll_log_callback callback, void *userdata,
                                      uint32_t max_level);

/* ---- host ---- */
/* Also sets SIGPIPE to SIG_IGN if it still has its default action (as the Rust runtime does
 * for Rust programs): a write to a dead server's pipe must fail, not kill the program. A
 * handler the program installed is kept. */
mcpoll_result mcpoll_host_new(mcpoll_host **out);
/* Kills its servers' process groups, closes connections and the descriptor. NULL: no-op. */
void mcpoll_host_free(mcpoll_host *host);
/* The last failure's text ("" after a success); NULL for a NULL host. Lifetime: see top. */
const char *mcpoll_last_error(const mcpoll_host *host);

/* argv[0] is the program (PATH lookup), argv[1..argc] its arguments; env holds envc
 * "NAME=value" entries added to the inherited environment (NULL if envc is 0); cwd NULL: the
 * host's. All bytes, copied. config NULL: defaults. Calls may be made at once. */
mcpoll_result mcpoll_add_stdio_server(mcpoll_host *host, const char *const *argv, size_t argc,
                                      const char *const *env, size_t envc, const char *cwd,
                                      const mcpoll_config *config, uint64_t *server);
/* MCPOLL_UNSUPPORTED from a library built without the http feature. */
mcpoll_result mcpoll_add_http_server(mcpoll_host *host, const mcpoll_http_options *options,
                                     const mcpoll_config *config, uint64_t *server);

/* Calls: options may be NULL; the id goes to *call. */
mcpoll_result mcpoll_call_tool(mcpoll_host *host, uint64_t server, const char *name,
                               const char *arguments_json /* NULL: {} */,
                               const mcpoll_call_options *options, uint64_t *call);
mcpoll_result mcpoll_list_tools(mcpoll_host *host, uint64_t server,
                                const mcpoll_call_options *options, uint64_t *call);
mcpoll_result mcpoll_read_resource(mcpoll_host *host, uint64_t server, const char *uri,
                                   const mcpoll_call_options *options, uint64_t *call);
mcpoll_result mcpoll_get_prompt(mcpoll_host *host, uint64_t server, const char *name,
                                const char *arguments_json /* NULL: none */,
                                const mcpoll_call_options *options, uint64_t *call);
/* The tools through the capability cache: MCPOLL_OK and a JSON array in *json (*len bytes,
 * NUL-terminated; lifetime: see top), or MCPOLL_PENDING (poll, then ask again). */
mcpoll_result mcpoll_tools(mcpoll_host *host, uint64_t server, const char **json, size_t *len);
/* The call ends at once with CALL_FAILED / MCPOLL_LOCAL_CANCELLED; the server is told. */
mcpoll_result mcpoll_cancel(mcpoll_host *host, uint64_t server, uint64_t call);

/* Server requests (MCPOLL_EVENT_SERVER_REQUEST), by the event's request id. */
mcpoll_result mcpoll_answer(mcpoll_host *host, uint64_t server, uint64_t request,
                            const char *result_json);
mcpoll_result mcpoll_reject(mcpoll_host *host, uint64_t server, uint64_t request);
/* A ListRootsResult: {"roots":[{"uri":"file:///..."}]}. */
mcpoll_result mcpoll_set_roots(mcpoll_host *host, uint64_t server, const char *roots_json);

/* ---- the loop ---- */
/* Waits at most timeout_ms (0: never blocks; negative: no limit), then does what is due. */
mcpoll_result mcpoll_poll(mcpoll_host *host, int64_t timeout_ms);
/* The descriptor to watch for readability; the host's, valid until mcpoll_host_free. */
mcpoll_result mcpoll_fd(const mcpoll_host *host, int *fd);
/* ms until mcpoll_poll is due although nothing is readable: rounded up, 0 now, -1 never. */
mcpoll_result mcpoll_timeout_ms(const mcpoll_host *host, int64_t *ms);
/* The next event, or kind MCPOLL_EVENT_NONE. Lifetime of its pointers: see top. */
mcpoll_result mcpoll_next_event(mcpoll_host *host, mcpoll_event *event);

/* ---- servers ---- */
/* Returns at once; the process is stopped (stdin closed, SIGTERM, SIGKILL) while you poll. */
mcpoll_result mcpoll_close_server(mcpoll_host *host, uint64_t server);
/* Closes if needed and forgets: the id (and its calls' and requests' ids) become unknown. */
mcpoll_result mcpoll_remove_server(mcpoll_host *host, uint64_t server);
/* Starts a degraded server (its process kept crashing) again now. */
mcpoll_result mcpoll_restart_server(mcpoll_host *host, uint64_t server);
/* The stdio server's process id while it runs (0: not running, or an HTTP server). */
mcpoll_result mcpoll_server_pid(const mcpoll_host *host, uint64_t server, uint32_t *pid);

/* ---- configuration (copied when passed) ---- */
mcpoll_result mcpoll_config_new(mcpoll_config **out);
void mcpoll_config_free(mcpoll_config *config);
mcpoll_result mcpoll_config_set_timeout_ms(mcpoll_config *config, uint64_t ms);
mcpoll_result mcpoll_config_set_answers(mcpoll_config *config, uint32_t flags);
mcpoll_result mcpoll_config_set_restart(mcpoll_config *config, bool enabled,
                                        uint64_t base_delay_ms);
mcpoll_result mcpoll_config_set_max_pending(mcpoll_config *config, size_t max);

/* ---- call options (copied when passed) ---- */
mcpoll_result mcpoll_call_options_new(mcpoll_call_options **out);
void mcpoll_call_options_free(mcpoll_call_options *options);
mcpoll_result mcpoll_call_options_set_timeout_ms(mcpoll_call_options *options, uint64_t ms);
mcpoll_result mcpoll_call_options_set_idempotency(mcpoll_call_options *options,
                                                  uint32_t idempotency);
mcpoll_result mcpoll_call_options_set_idempotency_key(mcpoll_call_options *options,
                                                      const char *key);
mcpoll_result mcpoll_call_options_set_progress(mcpoll_call_options *options, bool progress);

/* ---- HTTP server options (copied when passed) ---- */
mcpoll_result mcpoll_http_options_new(const char *url, mcpoll_http_options **out);
void mcpoll_http_options_free(mcpoll_http_options *options);
mcpoll_result mcpoll_http_options_add_header(mcpoll_http_options *options, const char *name,
                                             const char *value);
mcpoll_result mcpoll_http_options_set_bearer(mcpoll_http_options *options, const char *token);
mcpoll_result mcpoll_http_options_set_ca_file(mcpoll_http_options *options, const char *path);
/* NULL: a direct connection. Without this call: from HTTPS_PROXY / HTTP_PROXY / NO_PROXY. */
mcpoll_result mcpoll_http_options_set_proxy(mcpoll_http_options *options, const char *url);
mcpoll_result mcpoll_http_options_set_client_credentials(mcpoll_http_options *options,
                                                         const char *client_id,
                                                         const char *client_secret);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MCPOLL_H */
