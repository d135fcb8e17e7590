/*
 * The C ABI from C, against the project's SDK peers: calls over stdio and HTTP, the tool
 * cache, cancellation, a crash and restart, a server request answered from C, roots, the
 * error results a C program can cause, and the lifetime rules. The loop is poll(2) on
 * mcpoll_fd plus mcpoll_timeout_ms. Driven by capi/tests/c_api.rs (also under valgrind):
 *
 *   api_test PEERS_DIR HTTP_URL PLAIN_HTTP_URL AUTH_HTTP_URL ODD_SERVER ODD_HTTP_URL
 *
 * PLAIN_HTTP_URL is an HTTP server that is not an MCP server (it answers POST with 501);
 * AUTH_HTTP_URL the Python SDK peer protected by OAuth, whose authorization server is absent;
 * ODD_SERVER capi/tests/c/odd_server.py, a stdio server that breaks the protocol on purpose;
 * ODD_HTTP_URL capi/tests/c/odd_http.py (scheme, host and port), its HTTP counterpart.
 *
 * Every mcpoll_result value is provoked here and checked exactly, except these, which a C
 * program cannot meet through this ABI:
 *   MCPOLL_UNKNOWN_ERROR: no error maps to it (result.rs tests that every variant has a value).
 *   MCPOLL_UNSUPPORTED: only from a library built without HTTP; this one has it (the Rust
 *     test without_http_an_http_server_is_unsupported covers it).
 *   MCPOLL_LOGGER_TAKEN: needs a second `log` logger in the process, which only Rust code
 *     linking the library can install (capi/tests/logger_taken.rs).
 *   MCPOLL_TOO_MANY_SERVERS: the host's token range is 0..usize::MAX; no program adds that
 *     many servers (only an embedded Rust host is given a small range).
 *   MCPOLL_HTTP_RESOLVE: no longer returned: names resolve when a connection is first needed,
 *     and a failure is MCPOLL_TRANSPORT_CONNECT_FAILED.
 *   MCPOLL_SERVER_ROOTS: only from roots given in a configuration file, which the C ABI does
 *     not load (mcpoll_set_roots answers MCPOLL_ANSWER_MISMATCH).
 *   MCPOLL_CANCEL_HANDSHAKE: the probe and handshake requests have no call id in C.
 *   MCPOLL_NOT_SUPPORTED_BY_ERA: only from server/discover, subscriptions/listen, ping, and
 *     a listing of a method that lists nothing; C can ask for none of them (its one listing
 *     is tools/list, and mcpoll_request refuses MCP's own methods).
 *   MCPOLL_INVALID_TASK_ID: only from resuming a task by id, which has no verb here.
 *   MCPOLL_TRANSPORT_CLOSED_BY_SERVER: only ends a subscriptions/listen call.
 *   MCPOLL_LOCAL_UNANSWERED: only the Rust blocking helpers end a call that way.
 *   MCPOLL_CATALOG_TIMEOUT: only the Rust blocking catalog helpers wait.
 *
 * Exits 0 when every check passed; prints the failed check and exits 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "mcpoll.h"

static int checks;

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    checks++;                                                                            \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#define EXPECT(call, want)                                                               \
  do {                                                                                   \
    mcpoll_result got_ = (call);                                                         \
    checks++;                                                                            \
    if (got_ != (want)) {                                                                \
      fprintf(stderr, "%s:%d: %s gave %s, expected %s\n", __FILE__, __LINE__, #call,     \
              mcpoll_result_name(got_), mcpoll_result_name(want));                       \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#define OK(call) EXPECT(call, MCPOLL_OK)

static double now_s(void);
static double started;
/* A section of the test, with the time since the start (for slow CI machines). */
#define STEP(name) fprintf(stderr, "[%6.2f s] %s\n", now_s() - started, name)

/* An event copied out of the host (its pointers die at the next mutating call). */
typedef struct {
  mcpoll_event_kind kind;
  uint64_t server, call, request;
  uint32_t request_kind;
  mcpoll_result error;
  int32_t exit_signal;
  int64_t rpc_code;
  bool is_error;
  uint32_t list_kind;
  int64_t restart_in_ms;
  char message[512];
  char data[2048];
} seen_event;

#define MAX_SEEN 1024
static seen_event seen[MAX_SEEN];
static size_t n_seen;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* One turn of the program's loop: poll(2) on the descriptor until readable or the deadline
 * (at most cap_ms), then mcpoll_poll(host, 0) and every event. */
static void turn(mcpoll_host *host, int cap_ms) {
  int fd = -1;
  int64_t due = -1;
  OK(mcpoll_fd(host, &fd));
  OK(mcpoll_timeout_ms(host, &due));
  int wait = (due >= 0 && due < cap_ms) ? (int)due : cap_ms;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int n = poll(&p, 1, wait);
  CHECK(n >= 0);
  OK(mcpoll_poll(host, 0));
  mcpoll_event ev;
  for (;;) {
    OK(mcpoll_next_event(host, &ev));
    if (ev.kind == MCPOLL_EVENT_NONE) break;
    /* Lifetime rules: never NULL, NUL-terminated at data_len. */
    CHECK(ev.data != NULL && ev.error_kind != NULL && ev.error_name != NULL);
    CHECK(ev.error_message != NULL && ev.data[ev.data_len] == '\0');
    CHECK(ev.server != 0);
    CHECK(n_seen < MAX_SEEN);
    seen_event *s = &seen[n_seen++];
    s->kind = ev.kind;
    s->server = ev.server;
    s->call = ev.call;
    s->request = ev.request;
    s->request_kind = ev.request_kind;
    s->error = ev.error;
    s->exit_signal = ev.exit_signal;
    s->rpc_code = ev.rpc_code;
    s->is_error = ev.is_error;
    s->list_kind = ev.list_kind;
    s->restart_in_ms = ev.restart_in_ms;
    snprintf(s->message, sizeof s->message, "%s", ev.error_message);
    snprintf(s->data, sizeof s->data, "%s", ev.data);
  }
}

/* Turns until an event of `kind` (for `call`, when not 0) was seen; returns it. */
static seen_event *wait_for(mcpoll_host *host, uint64_t server, mcpoll_event_kind kind,
                            uint64_t call) {
  double until = now_s() + 60;
  for (;;) {
    for (size_t i = 0; i < n_seen; i++) {
      seen_event *s = &seen[i];
      if (s->server == server && s->kind == kind && (call == 0 || s->call == call)) {
        return s;
      }
    }
    if (now_s() > until) {
      fprintf(stderr, "no event of kind %d for call %llu within 60 s\n", kind,
              (unsigned long long)call);
      exit(1);
    }
    turn(host, 200);
  }
}

/* The call's end: its CALL_DONE (checked not failed) or its CALL_FAILED. */
static seen_event *end_of(mcpoll_host *host, uint64_t server, uint64_t call) {
  double until = now_s() + 60;
  for (;;) {
    for (size_t i = 0; i < n_seen; i++) {
      seen_event *s = &seen[i];
      if (s->call == call && s->server == server &&
          (s->kind == MCPOLL_EVENT_CALL_DONE || s->kind == MCPOLL_EVENT_CALL_FAILED)) {
        return s;
      }
    }
    CHECK(now_s() < until);
    turn(host, 200);
  }
}

static const char *done_text(mcpoll_host *host, uint64_t server, uint64_t call) {
  seen_event *e = end_of(host, server, call);
  if (e->kind != MCPOLL_EVENT_CALL_DONE) {
    fprintf(stderr, "call %llu failed: %s\n", (unsigned long long)call,
            mcpoll_result_name(e->error));
    exit(1);
  }
  return e->data;
}

static uint64_t echo(mcpoll_host *host, uint64_t server, const char *text) {
  char args[256];
  snprintf(args, sizeof args, "{\"text\":\"%s\"}", text);
  uint64_t call = 0;
  OK(mcpoll_call_tool(host, server, "echo", args, NULL, &call));
  CHECK(call != 0);
  return call;
}

/* Log callback: counts records, and checks that calling in gives MCPOLL_REENTRANT. */
static int logged;
static mcpoll_result reentrant_result = MCPOLL_OK;
static mcpoll_host *log_host;

static void on_log(void *userdata, uint32_t level, const char *target, const char *message) {
  CHECK(userdata == &logged);
  CHECK(level >= 1 && level <= 5 && target != NULL && message != NULL);
  logged++;
  if (log_host != NULL) reentrant_result = mcpoll_poll(log_host, 0);
}

static void many_calls(mcpoll_host *host, uint64_t server, int n) {
  uint64_t calls[64];
  char text[32];
  for (int done = 0; done < n;) {
    int batch = n - done < 16 ? n - done : 16;
    for (int i = 0; i < batch; i++) {
      snprintf(text, sizeof text, "n%d", done + i);
      calls[i] = echo(host, server, text);
    }
    for (int i = 0; i < batch; i++) {
      snprintf(text, sizeof text, "\"text\":\"n%d\"", done + i);
      CHECK(strstr(done_text(host, server, calls[i]), text) != NULL);
    }
    done += batch;
    n_seen = 0; /* every call of the batch ended: forget the events */
  }
}

static void errors_without_a_server(mcpoll_host *host) {
  uint64_t call = 0, server = 0;
  mcpoll_call_options *opts = NULL;
  mcpoll_config *config = NULL;
  mcpoll_http_options *http = NULL;
  EXPECT(mcpoll_host_new(NULL), MCPOLL_NULL_POINTER);
  EXPECT(mcpoll_poll(NULL, 0), MCPOLL_NULL_POINTER);
  bool idle = false;
  EXPECT(mcpoll_is_idle(NULL, &idle), MCPOLL_NULL_POINTER);
  EXPECT(mcpoll_is_idle(host, NULL), MCPOLL_NULL_POINTER);
  OK(mcpoll_is_idle(host, &idle));
  CHECK(idle); /* no server: nothing to do */
  EXPECT(mcpoll_call_tool(host, 1, "echo", "{}", NULL, NULL), MCPOLL_NULL_POINTER);
  EXPECT(mcpoll_call_tool(host, 1, NULL, "{}", NULL, &call), MCPOLL_NULL_POINTER);
  EXPECT(mcpoll_call_tool(host, 12345, "echo", "{}", NULL, &call), MCPOLL_UNKNOWN_SERVER);
  CHECK(strlen(mcpoll_last_error(host)) > 0);
  EXPECT(mcpoll_cancel(host, 12345, 1), MCPOLL_UNKNOWN_SERVER);
  EXPECT(mcpoll_call_tool(host, 1, "\xff\xfe", "{}", NULL, &call), MCPOLL_INVALID_UTF8);
  EXPECT(mcpoll_get_prompt(host, 1, "greet", "{\"name\":", NULL, &call), MCPOLL_INVALID_JSON);
  OK(mcpoll_call_options_new(&opts));
  EXPECT(mcpoll_call_options_set_idempotency(opts, 77), MCPOLL_INVALID_ARGUMENT);
  OK(mcpoll_call_options_set_idempotency(opts, MCPOLL_IDEMPOTENCY_READ));
  OK(mcpoll_call_options_set_idempotency_key(opts, "k-1"));
  OK(mcpoll_call_options_set_idempotency_key(opts, NULL));
  OK(mcpoll_call_options_set_timeout_ms(opts, 1000));
  mcpoll_call_options_free(opts);
  mcpoll_call_options_free(NULL);
  const char *argv_missing[] = {"/nonexistent/mcp-server"};
  EXPECT(mcpoll_add_stdio_server(host, argv_missing, 0, NULL, 0, NULL, NULL, &server),
         MCPOLL_INVALID_ARGUMENT);
  mcpoll_result spawned = mcpoll_add_stdio_server(host, argv_missing, 1, NULL, 0, NULL, NULL,
                                                  &server);
  if (getenv("MCPOLL_UNDER_VALGRIND") != NULL && spawned == MCPOLL_OK) {
    /* valgrind runs the child's failed exec as an exit: the server is added, then fails. */
    OK(mcpoll_remove_server(host, server));
  } else {
    EXPECT(spawned, MCPOLL_SPAWN_FAILED);
  }
  const char *bad_env[] = {"NO_EQUALS_SIGN"};
  EXPECT(mcpoll_add_stdio_server(host, argv_missing, 1, bad_env, 1, NULL, NULL, &server),
         MCPOLL_INVALID_ARGUMENT);
  OK(mcpoll_config_new(&config));
  EXPECT(mcpoll_config_set_timeout_ms(config, 0), MCPOLL_INVALID_ARGUMENT);
  EXPECT(mcpoll_config_set_answers(config, 1u << 9), MCPOLL_INVALID_ARGUMENT);
  OK(mcpoll_config_set_max_pending(config, 0));
  const char *argv_true[] = {"true"};
  EXPECT(mcpoll_add_stdio_server(host, argv_true, 1, NULL, 0, NULL, config, &server),
         MCPOLL_CONFIG_INVALID);
  /* A server that never answers, allowed one pending call: the handshake is that call. */
  OK(mcpoll_config_set_max_pending(config, 1));
  const char *argv_mute[] = {"sleep", "600"};
  OK(mcpoll_add_stdio_server(host, argv_mute, 2, NULL, 0, NULL, config, &server));
  EXPECT(mcpoll_call_tool(host, server, "echo", "{}", NULL, &call), MCPOLL_OVERLOADED);
  OK(mcpoll_remove_server(host, server));
  mcpoll_config_free(config);
  OK(mcpoll_http_options_new("ftp://example.com/mcp", &http));
  EXPECT(mcpoll_add_http_server(host, http, NULL, &server), MCPOLL_HTTP_URL);
  mcpoll_http_options_free(http);
  OK(mcpoll_http_options_new("http://127.0.0.1:9/mcp", &http));
  OK(mcpoll_http_options_add_header(http, "bad header", "x"));
  EXPECT(mcpoll_add_http_server(host, http, NULL, &server), MCPOLL_HTTP_HEADER);
  mcpoll_http_options_free(http);
  OK(mcpoll_http_options_new("https://127.0.0.1:9/mcp", &http));
  OK(mcpoll_http_options_set_ca_file(http, "/nonexistent/ca.pem"));
  EXPECT(mcpoll_add_http_server(host, http, NULL, &server), MCPOLL_HTTP_TLS_SETUP);
  mcpoll_http_options_free(http);
  OK(mcpoll_http_options_new("http://127.0.0.1:9/mcp", &http));
  OK(mcpoll_http_options_set_bearer(http, "token\r\nX-Injected: 1"));
  EXPECT(mcpoll_add_http_server(host, http, NULL, &server), MCPOLL_HTTP_BEARER_TOKEN);
  mcpoll_http_options_free(http);
  /* The OAuth flow needs a resource URL without a fragment (the transport drops it). */
  OK(mcpoll_http_options_new("http://127.0.0.1:9/mcp#part", &http));
  OK(mcpoll_http_options_set_client_credentials(http, "id", "secret"));
  EXPECT(mcpoll_add_http_server(host, http, NULL, &server), MCPOLL_HTTP_OAUTH_SETUP);
  mcpoll_http_options_free(http);
  EXPECT(mcpoll_http_options_new(NULL, &http), MCPOLL_NULL_POINTER);
  EXPECT(mcpoll_set_log_callback(on_log, &logged, 6), MCPOLL_INVALID_ARGUMENT);
  /* Names and messages of every value are static strings. */
  CHECK(strcmp(mcpoll_result_name(MCPOLL_LOCAL_CANCELLED), "MCPOLL_LOCAL_CANCELLED") == 0);
  CHECK(strcmp(mcpoll_result_name(4242), "MCPOLL_?") == 0);
  CHECK(strlen(mcpoll_result_message(MCPOLL_PANIC)) > 0);
  CHECK(strlen(mcpoll_version()) > 0);
}

/* MCPOLL_PANIC from a real unwind: debug builds of the library panic inside every entry point
 * while MCPOLL_CAPI_TEST_PANIC is set (a test hook; release builds have none). The driver
 * sets MCPOLL_C_TEST_HOOKS=1 when the library is a debug build. */
static void panic_is_a_result(void) {
  if (getenv("MCPOLL_C_TEST_HOOKS") == NULL) {
    fprintf(stderr, "(no test hooks in this build: MCPOLL_PANIC not provoked)\n");
    return;
  }
  mcpoll_host *h = NULL;
  OK(mcpoll_host_new(&h));
  CHECK(setenv("MCPOLL_CAPI_TEST_PANIC", "1", 1) == 0);
  EXPECT(mcpoll_poll(h, 0), MCPOLL_PANIC);
  CHECK(strstr(mcpoll_last_error(h), "panic") != NULL);
  mcpoll_config *config = NULL;
  EXPECT(mcpoll_config_new(&config), MCPOLL_PANIC);
  CHECK(config == NULL);
  CHECK(unsetenv("MCPOLL_CAPI_TEST_PANIC") == 0);
  OK(mcpoll_poll(h, 0));
  mcpoll_host_free(h);
}

/* MCPOLL_IO from the operating system: with every descriptor of the process in use, the host
 * cannot make its poll (epoll_create1 fails with EMFILE). */
static void io_is_a_result(void) {
  struct rlimit old, low;
  CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
  low = old;
  low.rlim_cur = 64;
  CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
  int fds[64];
  int n = 0;
  while (n < 64) {
    int fd = dup(0);
    if (fd < 0) {
      CHECK(errno == EMFILE);
      break;
    }
    fds[n++] = fd;
  }
  CHECK(n < 64); /* the limit was reached */
  mcpoll_host *h = NULL;
  EXPECT(mcpoll_host_new(&h), MCPOLL_IO);
  CHECK(h == NULL);
  while (n > 0) close(fds[--n]);
  CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
  OK(mcpoll_host_new(&h));
  mcpoll_host_free(h);
}

/* The local authorization policy from C: calls held and asked about, allowed or denied;
 * disabled tools; an extension request by method name. */
static void policy_and_extensions(mcpoll_host *host, uint64_t py) {
  uint64_t call = 0, other = 0;
  n_seen = 0;
  EXPECT(mcpoll_set_policy(host, py, 7), MCPOLL_INVALID_ARGUMENT);
  EXPECT(mcpoll_set_policy(host, 424242, MCPOLL_CONFIRM_ALWAYS), MCPOLL_UNKNOWN_SERVER);
  OK(mcpoll_set_policy(host, py, MCPOLL_CONFIRM_ALWAYS));
  call = echo(host, py, "asked");
  /* A command that queues an event (here the ask) with no I/O to come makes the deadline 0:
   * a loop that sleeps on the descriptor and the deadline must not sleep through it. */
  int64_t due = -1;
  OK(mcpoll_timeout_ms(host, &due));
  CHECK(due == 0);
  seen_event *asked = wait_for(host, py, MCPOLL_EVENT_AUTHORIZATION_ASKED, call);
  CHECK(strcmp(asked->data, "echo") == 0 && asked->list_kind == 1);
  OK(mcpoll_allow_call(host, py, call));
  EXPECT(mcpoll_allow_call(host, py, call), MCPOLL_AUTHORIZE_NOT_HELD);
  CHECK(strstr(done_text(host, py, call), "asked") != NULL);
  EXPECT(mcpoll_allow_call(host, py, call), MCPOLL_UNKNOWN_CALL);
  /* A NULL reason is none: the call is denied all the same (it was refused as a null
   * pointer, and the call stayed held). */
  call = echo(host, py, "denied quietly");
  wait_for(host, py, MCPOLL_EVENT_AUTHORIZATION_ASKED, call);
  OK(mcpoll_deny_call(host, py, call, NULL));
  CHECK(end_of(host, py, call)->error == MCPOLL_LOCAL_AUTHORIZATION_DENIED);
  call = echo(host, py, "denied");
  wait_for(host, py, MCPOLL_EVENT_AUTHORIZATION_ASKED, call);
  OK(mcpoll_deny_call(host, py, call, "not from this C test"));
  seen_event *denied = end_of(host, py, call);
  CHECK(denied->kind == MCPOLL_EVENT_CALL_FAILED);
  CHECK(denied->error == MCPOLL_LOCAL_AUTHORIZATION_DENIED);
  CHECK(strstr(denied->message, "not from this C test") != NULL);
  /* The host-wide policy applies to servers without one of their own. */
  OK(mcpoll_set_policy(host, py, MCPOLL_CONFIRM_NEVER));
  OK(mcpoll_set_policy(host, 0, MCPOLL_CONFIRM_NEVER));
  /* A call that is pending but was never held is not the host's to allow. */
  OK(mcpoll_call_tool(host, py, "slow", "{\"ms\":3000}", NULL, &other));
  EXPECT(mcpoll_allow_call(host, py, other), MCPOLL_AUTHORIZE_NOT_HELD);
  OK(mcpoll_cancel(host, py, other));
  due = -1;
  OK(mcpoll_timeout_ms(host, &due));
  CHECK(due == 0);
  /* Cancelled, but its end not yet handed out: the id is still known, the call is over. */
  EXPECT(mcpoll_cancel(host, py, other), MCPOLL_CANCEL_NOT_PENDING);
  CHECK(end_of(host, py, other)->error == MCPOLL_LOCAL_CANCELLED);
  /* A disabled tool is refused locally, never sent. */
  const char *disabled[] = {"add"};
  OK(mcpoll_disable_tools(host, py, disabled, 1));
  OK(mcpoll_call_tool(host, py, "add", "{\"a\":1,\"b\":2}", NULL, &call));
  due = -1;
  OK(mcpoll_timeout_ms(host, &due));
  CHECK(due == 0);
  CHECK(end_of(host, py, call)->error == MCPOLL_LOCAL_AUTHORIZATION_DENIED);

  /* Extension requests by method name. */
  EXPECT(mcpoll_request(host, py, "tools/call", NULL, NULL, &call), MCPOLL_INVALID_METHOD);
  EXPECT(mcpoll_request(host, py, "", NULL, NULL, &call), MCPOLL_INVALID_METHOD);
  EXPECT(mcpoll_request(host, py, "lab/skills_list", "{\"x\":", NULL, &call),
         MCPOLL_INVALID_JSON);
  OK(mcpoll_request(host, py, "lab/skills_list", "{\"from\":\"c\"}", NULL, &call));
  const char *skills = done_text(host, py, call);
  CHECK(strstr(skills, "lab-skill") != NULL && strstr(skills, "\"from\":\"c\"") != NULL);

  /* Trace context: a well-formed traceparent goes out with the call, a malformed one is
   * refused before anything is sent. */
  mcpoll_call_options *opts = NULL;
  OK(mcpoll_call_options_new(&opts));
  OK(mcpoll_call_options_set_trace(opts, "not-a-traceparent", NULL));
  EXPECT(mcpoll_call_tool(host, py, "echo", "{\"text\":\"t\"}", opts, &call),
         MCPOLL_TRACE_CONTEXT);
  OK(mcpoll_call_options_set_trace(opts, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                                   "vendor=c"));
  OK(mcpoll_call_tool(host, py, "echo", "{\"text\":\"traced\"}", opts, &call));
  mcpoll_call_options_free(opts);
  CHECK(strstr(done_text(host, py, call), "traced") != NULL);
  n_seen = 0;
}

/* Starts the stdio peer `script` with `config` (freed here) and waits until it is ready. */
static uint64_t start_ready(mcpoll_host *host, const char *script, mcpoll_config *config) {
  const char *args[] = {script};
  uint64_t s = 0;
  OK(mcpoll_add_stdio_server(host, args, 1, NULL, 0, NULL, config, &s));
  mcpoll_config_free(config);
  n_seen = 0;
  wait_for(host, s, MCPOLL_EVENT_READY, 0);
  return s;
}

/* A held call let go while the server has no room (one call in flight, no queue) stays held:
 * MCPOLL_AUTHORIZE_OVERLOADED; once the call in flight is over, it goes. */
static void authorize_overloaded(mcpoll_host *host, const char *script) {
  mcpoll_config *config = NULL;
  OK(mcpoll_config_new(&config));
  OK(mcpoll_config_set_in_flight(config, 1, 0));
  uint64_t s = start_ready(host, script, config), slow = 0, call = 0;
  OK(mcpoll_set_policy(host, s, MCPOLL_CONFIRM_ALWAYS));
  OK(mcpoll_call_tool(host, s, "slow", "{\"ms\":30000}", NULL, &slow));
  wait_for(host, s, MCPOLL_EVENT_AUTHORIZATION_ASKED, slow);
  OK(mcpoll_allow_call(host, s, slow));
  call = echo(host, s, "waited");
  wait_for(host, s, MCPOLL_EVENT_AUTHORIZATION_ASKED, call);
  EXPECT(mcpoll_allow_call(host, s, call), MCPOLL_AUTHORIZE_OVERLOADED);
  OK(mcpoll_cancel(host, s, slow));
  CHECK(end_of(host, s, slow)->error == MCPOLL_LOCAL_CANCELLED);
  OK(mcpoll_allow_call(host, s, call));
  CHECK(strstr(done_text(host, s, call), "waited") != NULL);
  OK(mcpoll_remove_server(host, s));
  n_seen = 0;
}

/* Calls tool `name` (the slow tool when null) with `options` (progress turned on here),
 * waits until the server runs it (its first progress report), kills the server's process
 * group, and returns the call's end. */
static seen_event *crash_during_a_call(mcpoll_host *host, uint64_t s, const char *name,
                                       mcpoll_call_options *options) {
  uint64_t call = 0;
  uint32_t pid = 0;
  OK(mcpoll_call_options_set_progress(options, true));
  if (name == NULL) {
    OK(mcpoll_call_tool(host, s, "slow", "{\"ms\":30000}", options, &call));
  } else {
    OK(mcpoll_call_tool(host, s, name, NULL, options, &call));
  }
  wait_for(host, s, MCPOLL_EVENT_PROGRESS, call);
  OK(mcpoll_server_pid(host, s, &pid));
  CHECK(pid > 0 && kill(-(pid_t)pid, SIGKILL) == 0);
  return end_of(host, s, call);
}

/* A crash in the middle of a call that is not safe to send twice: the call ends with
 * MCPOLL_LOCAL_DELIVERY_UNKNOWN, which counts against the circuit breaker (threshold 1 here):
 * the next write is refused (MCPOLL_REQUEST_BREAKER_OPEN), and a held call let go while it is
 * open ends with MCPOLL_LOCAL_BREAKER_OPEN. */
static void breaker_from_a_crash(mcpoll_host *host, const char *script) {
  mcpoll_config *config = NULL;
  OK(mcpoll_config_new(&config));
  OK(mcpoll_config_set_restart(config, true, 50));
  OK(mcpoll_config_set_breaker(config, 1, 600000));
  uint64_t s = start_ready(host, script, config), call = 0;
  mcpoll_call_options *write = NULL;
  OK(mcpoll_call_options_new(&write));
  OK(mcpoll_call_options_set_idempotency(write, MCPOLL_IDEMPOTENCY_UNKNOWN));
  seen_event *lost = crash_during_a_call(host, s, NULL, write);
  CHECK(lost->kind == MCPOLL_EVENT_CALL_FAILED && lost->error == MCPOLL_LOCAL_DELIVERY_UNKNOWN);
  wait_for(host, s, MCPOLL_EVENT_BREAKER, 0);
  EXPECT(mcpoll_call_tool(host, s, "echo", "{\"text\":\"w\"}", write, &call),
         MCPOLL_REQUEST_BREAKER_OPEN);
  OK(mcpoll_set_policy(host, s, MCPOLL_CONFIRM_ALWAYS));
  OK(mcpoll_call_tool(host, s, "echo", "{\"text\":\"held\"}", write, &call));
  wait_for(host, s, MCPOLL_EVENT_AUTHORIZATION_ASKED, call);
  OK(mcpoll_allow_call(host, s, call));
  CHECK(end_of(host, s, call)->error == MCPOLL_LOCAL_BREAKER_OPEN);
  mcpoll_call_options_free(write);
  OK(mcpoll_remove_server(host, s));
  n_seen = 0;
}

/* A server that crashes once too often (the crash-loop bound is 1 here) is degraded: the call
 * it was running fails with MCPOLL_LOCAL_DEGRADED, new calls are refused with
 * MCPOLL_REQUEST_DEGRADED, and mcpoll_restart_server brings it back. */
static void degraded_after_a_crash(mcpoll_host *host, const char *script) {
  mcpoll_config *config = NULL;
  OK(mcpoll_config_new(&config));
  OK(mcpoll_config_set_restart(config, true, 50));
  EXPECT(mcpoll_config_set_crash_loop(config, 0, 60000), MCPOLL_INVALID_ARGUMENT);
  OK(mcpoll_config_set_crash_loop(config, 1, 600000));
  uint64_t s = start_ready(host, script, config), call = 0;
  mcpoll_call_options *read = NULL;
  OK(mcpoll_call_options_new(&read));
  OK(mcpoll_call_options_set_idempotency(read, MCPOLL_IDEMPOTENCY_READ));
  seen_event *end = crash_during_a_call(host, s, NULL, read);
  mcpoll_call_options_free(read);
  CHECK(end->kind == MCPOLL_EVENT_CALL_FAILED && end->error == MCPOLL_LOCAL_DEGRADED);
  seen_event *lost = wait_for(host, s, MCPOLL_EVENT_TRANSPORT_LOST, 0);
  CHECK(lost->restart_in_ms == -1);
  EXPECT(mcpoll_call_tool(host, s, "echo", "{\"text\":\"x\"}", NULL, &call),
         MCPOLL_REQUEST_DEGRADED);
  n_seen = 0;
  OK(mcpoll_restart_server(host, s));
  wait_for(host, s, MCPOLL_EVENT_READY, 0);
  CHECK(strstr(done_text(host, s, echo(host, s, "back")), "back") != NULL);
  OK(mcpoll_remove_server(host, s));
  n_seen = 0;
}

/* A call kept for a retry across a restart, with room for one pending request only: the
 * restarted server's era probe has a slot of its own (it used to take the call's, and the
 * call ended with MCPOLL_LOCAL_HANDSHAKE_FAILED), so the call is sent again, and since
 * odd_server.py's tool never answers, it ends at its deadline. */
static void kept_across_a_restart(mcpoll_host *host, const char *odd_script) {
  mcpoll_config *config = NULL;
  OK(mcpoll_config_new(&config));
  OK(mcpoll_config_set_restart(config, true, 50));
  OK(mcpoll_config_set_max_pending(config, 1));
  const char *args[] = {"python3", odd_script, "modern"};
  uint64_t s = 0;
  OK(mcpoll_add_stdio_server(host, args, 3, NULL, 0, NULL, config, &s));
  mcpoll_config_free(config);
  n_seen = 0;
  wait_for(host, s, MCPOLL_EVENT_READY, 0);
  mcpoll_call_options *read = NULL;
  OK(mcpoll_call_options_new(&read));
  OK(mcpoll_call_options_set_idempotency(read, MCPOLL_IDEMPOTENCY_READ));
  OK(mcpoll_call_options_set_timeout_ms(read, 10000));
  seen_event *end = crash_during_a_call(host, s, "hang", read);
  mcpoll_call_options_free(read);
  CHECK(end->kind == MCPOLL_EVENT_CALL_FAILED);
  EXPECT(end->error, MCPOLL_LOCAL_DEADLINE_EXCEEDED);
  OK(mcpoll_remove_server(host, s));
  n_seen = 0;
}

/* A reply larger than the server's max_message_bytes fails its call (MCPOLL_PEER_TOO_LARGE). */
static void too_large(mcpoll_host *host, const char *script) {
  mcpoll_config *config = NULL;
  OK(mcpoll_config_new(&config));
  OK(mcpoll_config_set_max_message_bytes(config, 100));
  const char *args[] = {script};
  uint64_t s = 0, call = 0;
  EXPECT(mcpoll_add_stdio_server(host, args, 1, NULL, 0, NULL, config, &s),
         MCPOLL_CONFIG_INVALID);
  OK(mcpoll_config_set_max_message_bytes(config, 8192));
  s = start_ready(host, script, config);
  static char big[10000 + 32];
  strcpy(big, "{\"text\":\"");
  memset(big + 9, 'x', 10000);
  strcpy(big + 9 + 10000, "\"}");
  OK(mcpoll_call_tool(host, s, "echo", big, NULL, &call));
  seen_event *e = end_of(host, s, call);
  CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED && e->error == MCPOLL_PEER_TOO_LARGE);
  OK(mcpoll_remove_server(host, s));
  n_seen = 0;
}

/* HTTP servers that cannot be reached: nothing listens (MCPOLL_TRANSPORT_CONNECT_FAILED), and
 * TLS to a port that speaks plain HTTP (MCPOLL_TRANSPORT_TLS). */
static void http_unreachable(mcpoll_host *host, const char *url) {
  mcpoll_http_options *http = NULL;
  mcpoll_call_options *opts = NULL;
  uint64_t s = 0, call = 0;
  OK(mcpoll_call_options_new(&opts));
  OK(mcpoll_call_options_set_timeout_ms(opts, 120000));
  OK(mcpoll_http_options_new("http://127.0.0.1:9/mcp", &http));
  OK(mcpoll_http_options_set_proxy(http, NULL));
  OK(mcpoll_add_http_server(host, http, NULL, &s));
  mcpoll_http_options_free(http);
  n_seen = 0;
  OK(mcpoll_call_tool(host, s, "echo", "{\"text\":\"x\"}", opts, &call));
  seen_event *e = end_of(host, s, call);
  CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED && e->error == MCPOLL_TRANSPORT_CONNECT_FAILED);
  OK(mcpoll_remove_server(host, s));

  char tls_url[512];
  CHECK(strncmp(url, "http://", 7) == 0);
  snprintf(tls_url, sizeof tls_url, "https://%s", url + 7);
  OK(mcpoll_http_options_new(tls_url, &http));
  OK(mcpoll_http_options_set_proxy(http, NULL));
  OK(mcpoll_add_http_server(host, http, NULL, &s));
  mcpoll_http_options_free(http);
  n_seen = 0;
  OK(mcpoll_call_tool(host, s, "echo", "{\"text\":\"x\"}", opts, &call));
  e = end_of(host, s, call);
  CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED && e->error == MCPOLL_TRANSPORT_TLS);
  OK(mcpoll_remove_server(host, s));
  mcpoll_call_options_free(opts);
  n_seen = 0;
}

/* An HTTP server that is not an MCP server: every POST gets 501 and an HTML page, so the
 * call fails with MCPOLL_TRANSPORT_HTTP_STATUS and the tool cache has no catalog to give. */
static void http_not_mcp(mcpoll_host *host, const char *url) {
  mcpoll_http_options *http = NULL;
  mcpoll_call_options *opts = NULL;
  uint64_t s = 0, call = 0;
  OK(mcpoll_call_options_new(&opts));
  OK(mcpoll_call_options_set_timeout_ms(opts, 120000));
  OK(mcpoll_http_options_new(url, &http));
  OK(mcpoll_http_options_set_proxy(http, NULL));
  OK(mcpoll_add_http_server(host, http, NULL, &s));
  mcpoll_http_options_free(http);
  n_seen = 0;
  OK(mcpoll_call_tool(host, s, "echo", "{\"text\":\"x\"}", opts, &call));
  seen_event *e = end_of(host, s, call);
  CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED && e->error == MCPOLL_TRANSPORT_HTTP_STATUS);
  CHECK(strstr(e->message, "501") != NULL);
  const char *json = NULL;
  size_t len = 0;
  /* It was never ready, so the tool cache has nothing to list from. */
  EXPECT(mcpoll_tools(host, s, &json, &len), MCPOLL_CATALOG_NOT_READY);
  OK(mcpoll_remove_server(host, s));
  mcpoll_call_options_free(opts);
  n_seen = 0;
}

/* The OAuth-protected peer: a bearer token it does not accept (MCPOLL_PEER_AUTH_REQUIRED),
 * and the client credentials grant against an authorization server that is not there
 * (MCPOLL_PEER_AUTHORIZATION). */
static void http_auth(mcpoll_host *host, const char *url) {
  mcpoll_http_options *http = NULL;
  mcpoll_call_options *opts = NULL;
  uint64_t s = 0, call = 0;
  OK(mcpoll_call_options_new(&opts));
  OK(mcpoll_call_options_set_timeout_ms(opts, 120000));
  for (int round = 0; round < 2; round++) {
    OK(mcpoll_http_options_new(url, &http));
    OK(mcpoll_http_options_set_proxy(http, NULL));
    if (round == 0) {
      OK(mcpoll_http_options_set_bearer(http, "not-the-token"));
    } else {
      OK(mcpoll_http_options_set_client_credentials(http, "id", "secret"));
    }
    OK(mcpoll_add_http_server(host, http, NULL, &s));
    mcpoll_http_options_free(http);
    n_seen = 0;
    OK(mcpoll_call_tool(host, s, "echo", "{\"text\":\"x\"}", opts, &call));
    seen_event *e = end_of(host, s, call);
    CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED);
    CHECK(e->error == (round == 0 ? MCPOLL_PEER_AUTH_REQUIRED : MCPOLL_PEER_AUTHORIZATION));
    OK(mcpoll_remove_server(host, s));
  }
  mcpoll_call_options_free(opts);
  n_seen = 0;
}

/* odd_server.py: no common protocol version; a version refused although listed; then a
 * reply nested too deep and a listing whose cursor repeats. */
static void odd_server(mcpoll_host *host, const char *script) {
  static const struct {
    const char *mode;
    mcpoll_result want;
  } rounds[] = {
      {"old", MCPOLL_PEER_NO_COMMON_VERSION},
      {"refuse", MCPOLL_PEER_VERSION_REFUSED},
      {"odd", MCPOLL_PEER_TOO_DEEP},
  };
  uint64_t s = 0, call = 0;
  for (size_t round = 0; round < sizeof rounds / sizeof rounds[0]; round++) {
    const char *args[] = {"python3", script, rounds[round].mode};
    OK(mcpoll_add_stdio_server(host, args, 3, NULL, 0, NULL, NULL, &s));
    n_seen = 0;
    OK(mcpoll_call_tool(host, s, "echo", "{\"text\":\"x\"}", NULL, &call));
    seen_event *e = end_of(host, s, call);
    CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED);
    EXPECT(e->error, rounds[round].want);
    if (strcmp(rounds[round].mode, "odd") == 0) {
      OK(mcpoll_list_tools(host, s, NULL, &call));
      e = end_of(host, s, call);
      CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED && e->error == MCPOLL_PEER_CURSOR_REPEATED);
    }
    OK(mcpoll_remove_server(host, s));
  }
  n_seen = 0;
}

/* Calls tool `name` of server `s` with `options` and checks that it fails with `want`. */
static void call_fails(mcpoll_host *host, uint64_t s, const char *name,
                       const mcpoll_call_options *options, mcpoll_result want) {
  uint64_t call = 0;
  OK(mcpoll_call_tool(host, s, name, NULL, options, &call));
  seen_event *e = end_of(host, s, call);
  CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED);
  EXPECT(e->error, want);
}

/* odd_server.py in 2026-07-28 (see its tools): input requests that are malformed, undeclared,
 * endless, too many at once, or rejected from C; a task cancelled by the server; a listing
 * that never ends (the page limit is 5 here). */
static void odd_modern_server(mcpoll_host *host, const char *script) {
  mcpoll_config *config = NULL;
  OK(mcpoll_config_new(&config));
  OK(mcpoll_config_set_answers(config, MCPOLL_ANSWER_ELICITATION_FORM));
  OK(mcpoll_config_set_max_pages(config, 5));
  const char *args[] = {"python3", script, "modern"};
  uint64_t s = 0, call = 0;
  OK(mcpoll_add_stdio_server(host, args, 3, NULL, 0, NULL, config, &s));
  mcpoll_config_free(config);
  n_seen = 0;
  call_fails(host, s, "bare", NULL, MCPOLL_PEER_INVALID_RESULT);
  call_fails(host, s, "undeclared", NULL, MCPOLL_PEER_UNDECLARED_INPUT_REQUEST);
  call_fails(host, s, "rounds", NULL, MCPOLL_LOCAL_TOO_MANY_INPUT_ROUNDS);
  call_fails(host, s, "flood", NULL, MCPOLL_LOCAL_TOO_MANY_SERVER_REQUESTS);
  /* A task nobody asked for is no result; one asked for ends as the server cancelled it. */
  call_fails(host, s, "task", NULL, MCPOLL_PEER_INVALID_RESULT);
  mcpoll_call_options *task = NULL;
  OK(mcpoll_call_options_new(&task));
  EXPECT(mcpoll_call_options_set_task(task, 9, 0), MCPOLL_INVALID_ARGUMENT);
  OK(mcpoll_call_options_set_task(task, MCPOLL_TASK_PREFER, 0));
  call_fails(host, s, "task", task, MCPOLL_PEER_TASK_CANCELLED);
  mcpoll_call_options_free(task);
  /* An input request rejected from C ends its call. */
  OK(mcpoll_call_tool(host, s, "ask", NULL, NULL, &call));
  seen_event *asked = wait_for(host, s, MCPOLL_EVENT_SERVER_REQUEST, call);
  OK(mcpoll_reject(host, s, asked->request));
  seen_event *e = end_of(host, s, call);
  CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED);
  EXPECT(e->error, MCPOLL_LOCAL_INPUT_REJECTED);
  OK(mcpoll_list_tools(host, s, NULL, &call));
  e = end_of(host, s, call);
  CHECK(e->kind == MCPOLL_EVENT_CALL_FAILED);
  EXPECT(e->error, MCPOLL_LOCAL_TOO_MANY_PAGES);
  OK(mcpoll_remove_server(host, s));
  n_seen = 0;
}

/* The tool cache's bounds, on a host of its own (mcpoll_host_new_with_cache): no stale
 * catalog served after a failed refresh, and one refresh at a time over every server. */
static void catalog_bounds(const char *script) {
  mcpoll_host *h = NULL;
  EXPECT(mcpoll_host_new_with_cache(0, 0, &h), MCPOLL_INVALID_ARGUMENT);
  OK(mcpoll_host_new_with_cache(0, 1, &h));
  const char *once_args[] = {"python3", script, "once"};
  /* The cache keys a stdio server by its program: through env(1), a key of its own. */
  const char *mute_args[] = {"env", "python3", script, "mute"};
  uint64_t once = 0, mute = 0;
  OK(mcpoll_add_stdio_server(h, once_args, 3, NULL, 0, NULL, NULL, &once));
  OK(mcpoll_add_stdio_server(h, mute_args, 4, NULL, 0, NULL, NULL, &mute));
  n_seen = 0;
  wait_for(h, once, MCPOLL_EVENT_READY, 0);
  wait_for(h, mute, MCPOLL_EVENT_READY, 0);
  /* Listed once, fresh for 1 ms; its refresh fails, and it may not be served stale. */
  const char *json = NULL;
  size_t len = 0;
  mcpoll_result r;
  double until = now_s() + 60;
  while ((r = mcpoll_tools(h, once, &json, &len)) == MCPOLL_PENDING || r == MCPOLL_OK) {
    CHECK(now_s() < until);
    turn(h, 10);
  }
  EXPECT(r, MCPOLL_CATALOG_STALE_TOO_LONG);
  /* The silent server's listing holds the one refresh allowed. */
  EXPECT(mcpoll_tools(h, mute, &json, &len), MCPOLL_PENDING);
  EXPECT(mcpoll_tools(h, once, &json, &len), MCPOLL_CATALOG_TOO_MANY_REFRESHES);
  mcpoll_host_free(h);
  n_seen = 0;
}

/* odd_http.py (see its paths): refused credentials, a broken response, a connection closed
 * without a response (the call is safe to send again: it is, twice more, then fails), a
 * session the server forgot, a resource that moved to an authorization server the client
 * has no credentials for. */
static void odd_http(mcpoll_host *host, const char *base) {
  static const struct {
    const char *path;
    mcpoll_result want;
  } paths[] = {
      {"/forbidden", MCPOLL_PEER_FORBIDDEN},
      {"/garbage", MCPOLL_TRANSPORT_BAD_RESPONSE},
      {"/hangup", MCPOLL_TRANSPORT_CONNECTION_LOST},
      {"/expire", MCPOLL_TRANSPORT_SESSION_EXPIRED},
      /* The client credentials were given for the first authorization server only. */
      {"/moved", MCPOLL_LOCAL_OAUTH_SETUP},
  };
  mcpoll_call_options *opts = NULL;
  OK(mcpoll_call_options_new(&opts));
  OK(mcpoll_call_options_set_timeout_ms(opts, 120000));
  OK(mcpoll_call_options_set_idempotency(opts, MCPOLL_IDEMPOTENCY_READ));
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, paths[i].path);
    mcpoll_http_options *http = NULL;
    uint64_t s = 0;
    OK(mcpoll_http_options_new(url, &http));
    OK(mcpoll_http_options_set_proxy(http, NULL));
    if (strcmp(paths[i].path, "/moved") == 0) {
      OK(mcpoll_http_options_set_client_credentials(http, "id", "secret"));
    }
    OK(mcpoll_add_http_server(host, http, NULL, &s));
    mcpoll_http_options_free(http);
    n_seen = 0;
    STEP(paths[i].path);
    call_fails(host, s, "echo", opts, paths[i].want);
    OK(mcpoll_remove_server(host, s));
  }
  mcpoll_call_options_free(opts);
  n_seen = 0;
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr,
            "usage: %s PEERS_DIR HTTP_URL PLAIN_HTTP_URL AUTH_HTTP_URL ODD_SERVER ODD_HTTP_URL\n",
            argv[0]);
    return 2;
  }
  char stdio_script[4096];
  snprintf(stdio_script, sizeof stdio_script, "%s/run-py-stdio.sh", argv[1]);

  started = now_s();
  mcpoll_host *host = NULL;
  OK(mcpoll_host_new(&host));
  STEP("errors without a server");
  errors_without_a_server(host);
  STEP("panic and io");
  panic_is_a_result();
  io_is_a_result();

  STEP("stdio peer");
  /* ---- stdio: the Python SDK peer, answering sampling from C ---- */
  mcpoll_config *config = NULL;
  OK(mcpoll_config_new(&config));
  OK(mcpoll_config_set_answers(config, MCPOLL_ANSWER_SAMPLING | MCPOLL_ANSWER_ROOTS));
  OK(mcpoll_config_set_restart(config, true, 50));
  const char *args[] = {stdio_script};
  const char *env[] = {"MCPOLL_C_TEST=1"};
  uint64_t py = 0;
  OK(mcpoll_add_stdio_server(host, args, 1, env, 1, "/", config, &py));
  mcpoll_config_free(config); /* copied: may go at once */
  CHECK(py != 0);
  CHECK(strcmp(mcpoll_last_error(host), "") == 0);
  seen_event *ready = wait_for(host, py, MCPOLL_EVENT_READY, 0);
  CHECK(strlen(ready->data) > 0);

  STEP("tool cache");
  /* The tool cache: pending until listed, then a JSON array with echo. */
  const char *tools = NULL;
  size_t tools_len = 0;
  mcpoll_result r = mcpoll_tools(host, py, &tools, &tools_len);
  CHECK(r == MCPOLL_PENDING || r == MCPOLL_OK);
  for (double until = now_s() + 60; r == MCPOLL_PENDING; r = mcpoll_tools(host, py, &tools, &tools_len)) {
    CHECK(now_s() < until);
    turn(host, 100);
  }
  OK(r);
  CHECK(tools[0] == '[' && tools[tools_len - 1] == ']' && tools[tools_len] == '\0');
  CHECK(strstr(tools, "\"echo\"") != NULL);
  /* Lifetime rules: const calls leave the borrowed JSON alone. */
  int fd;
  int64_t ms;
  uint32_t pid = 0;
  OK(mcpoll_fd(host, &fd));
  OK(mcpoll_timeout_ms(host, &ms));
  OK(mcpoll_server_pid(host, py, &pid));
  CHECK(pid > 0);
  CHECK(tools[0] == '[' && strstr(tools, "\"echo\"") != NULL);

  STEP("calls");
  /* Calls: echo (many), add, a listing, a resource, a prompt, an isError result. */
  many_calls(host, py, 200);
  uint64_t call = 0;
  OK(mcpoll_call_tool(host, py, "add", "{\"a\":2,\"b\":3}", NULL, &call));
  bool idle = true;
  OK(mcpoll_is_idle(host, &idle));
  CHECK(!idle); /* a call is pending */
  CHECK(strstr(done_text(host, py, call), "\"sum\":5") != NULL);
  /* Idle again once the call ended and its event was taken (what the server may send
   * unasked meanwhile is polled for, within a bound). */
  double idle_by = now_s() + 60;
  for (;;) {
    OK(mcpoll_is_idle(host, &idle));
    if (idle) break;
    CHECK(now_s() < idle_by);
    turn(host, 50);
  }
  OK(mcpoll_list_tools(host, py, NULL, &call));
  CHECK(strstr(done_text(host, py, call), "\"slow\"") != NULL);
  OK(mcpoll_read_resource(host, py, "lab://readme", NULL, &call));
  CHECK(strstr(done_text(host, py, call), "\"contents\"") != NULL);
  OK(mcpoll_get_prompt(host, py, "greet", "{\"name\":\"Ann\"}", NULL, &call));
  CHECK(strstr(done_text(host, py, call), "Ann") != NULL);
  OK(mcpoll_call_tool(host, py, "fail", NULL, NULL, &call));
  seen_event *fail = end_of(host, py, call);
  CHECK(fail->kind == MCPOLL_EVENT_CALL_DONE && fail->is_error);
  EXPECT(mcpoll_call_tool(host, py, "echo", "[1]", NULL, &call), MCPOLL_ARGUMENTS_NOT_OBJECT);
  EXPECT(mcpoll_call_tool(host, py, "echo", "{\"text\":", NULL, &call), MCPOLL_ARGUMENTS_NOT_JSON);
  /* A JSON-RPC error answer: the call fails with MCPOLL_PROTOCOL and the error's code. */
  OK(mcpoll_read_resource(host, py, "lab://no-such-resource", NULL, &call));
  seen_event *refused = end_of(host, py, call);
  CHECK(refused->kind == MCPOLL_EVENT_CALL_FAILED && refused->error == MCPOLL_PROTOCOL);
  CHECK(refused->rpc_code != 0);
  EXPECT(mcpoll_cancel(host, py, 987654321), MCPOLL_UNKNOWN_CALL);
  EXPECT(mcpoll_answer(host, py, 987654321, "{}"), MCPOLL_UNKNOWN_REQUEST);

  STEP("deadline");
  /* A deadline: the slow tool with 300 ms to run. */
  mcpoll_call_options *opts = NULL;
  OK(mcpoll_call_options_new(&opts));
  OK(mcpoll_call_options_set_timeout_ms(opts, 300));
  OK(mcpoll_call_tool(host, py, "slow", "{\"ms\":5000}", opts, &call));
  mcpoll_call_options_free(opts);
  seen_event *late = end_of(host, py, call);
  CHECK(late->kind == MCPOLL_EVENT_CALL_FAILED && late->error == MCPOLL_LOCAL_DEADLINE_EXCEEDED);

  STEP("cancel");
  /* Cancellation after the first progress report. */
  OK(mcpoll_call_options_new(&opts));
  OK(mcpoll_call_options_set_progress(opts, true));
  OK(mcpoll_call_tool(host, py, "slow", "{\"ms\":3000}", opts, &call));
  mcpoll_call_options_free(opts);
  wait_for(host, py, MCPOLL_EVENT_PROGRESS, call);
  OK(mcpoll_cancel(host, py, call));
  seen_event *cancelled = end_of(host, py, call);
  CHECK(cancelled->kind == MCPOLL_EVENT_CALL_FAILED);
  CHECK(cancelled->error == MCPOLL_LOCAL_CANCELLED);
  /* The ended call's id is unknown from now on (once its end was handed out). */
  EXPECT(mcpoll_cancel(host, py, call), MCPOLL_UNKNOWN_CALL);

  STEP("server request");
  /* A server request answered from C: the peer samples the client's model. */
  n_seen = 0;
  OK(mcpoll_call_tool(host, py, "sample", "{}", NULL, &call));
  seen_event *asked = wait_for(host, py, MCPOLL_EVENT_SERVER_REQUEST, 0);
  CHECK(asked->request_kind == 3 && asked->request != 0);
  CHECK(strstr(asked->data, "Say hello") != NULL);
  EXPECT(mcpoll_answer(host, py, asked->request, "[1]"), MCPOLL_ANSWER_NOT_OBJECT);
  EXPECT(mcpoll_answer(host, py, asked->request, "{\"role\":"), MCPOLL_INVALID_JSON);
  OK(mcpoll_answer(host, py, asked->request,
                   "{\"role\":\"assistant\",\"model\":\"c\",\"content\":"
                   "{\"type\":\"text\",\"text\":\"hello from C\"}}"));
  EXPECT(mcpoll_answer(host, py, asked->request, "{}"), MCPOLL_UNKNOWN_REQUEST);
  CHECK(strstr(done_text(host, py, call), "hello from C") != NULL);

  STEP("roots");
  /* A call's server requests end with it: cancelled while it waits for the answer, its
   * request id is unknown afterwards. */
  n_seen = 0;
  OK(mcpoll_call_tool(host, py, "sample", "{}", NULL, &call));
  asked = wait_for(host, py, MCPOLL_EVENT_SERVER_REQUEST, call);
  OK(mcpoll_cancel(host, py, call));
  /* Its end not handed out yet, the request id is known, but the request is over. */
  EXPECT(mcpoll_answer(host, py, asked->request, "{}"), MCPOLL_ANSWER_NOT_PENDING);
  CHECK(end_of(host, py, call)->error == MCPOLL_LOCAL_CANCELLED);
  EXPECT(mcpoll_answer(host, py, asked->request, "{}"), MCPOLL_UNKNOWN_REQUEST);

  /* Roots set from C, answered by the engine when the peer asks. */
  OK(mcpoll_set_roots(host, py, "{\"roots\":[{\"uri\":\"file:///tmp\"}]}"));
  EXPECT(mcpoll_set_roots(host, py, "{\"roots\":[{\"uri\":\"http://x\"}]}"),
         MCPOLL_ANSWER_MISMATCH);
  OK(mcpoll_call_tool(host, py, "roots", "{}", NULL, &call));
  CHECK(strstr(done_text(host, py, call), "file:///tmp") != NULL);

  STEP("policy and extension requests");
  policy_and_extensions(host, py);

  STEP("log and crash");
  /* The log callback, through a crash (a spawn logs): records arrive with their levels, and
   * calling in from the callback gives MCPOLL_REENTRANT. */
  OK(mcpoll_set_log_callback(on_log, &logged, 5));
  log_host = host;
  /* A crash: the process group is killed; TRANSPORT_LOST names the signal, and a restart
   * serves the next call. */
  n_seen = 0;
  OK(mcpoll_server_pid(host, py, &pid));
  CHECK(kill(-(pid_t)pid, SIGKILL) == 0);
  seen_event *lost = wait_for(host, py, MCPOLL_EVENT_TRANSPORT_LOST, 0);
  CHECK(lost->error == MCPOLL_TRANSPORT_PROCESS_EXIT && lost->exit_signal == SIGKILL);
  CHECK(strstr(done_text(host, py, echo(host, py, "again")), "again") != NULL);
  uint32_t pid2 = 0;
  OK(mcpoll_server_pid(host, py, &pid2));
  CHECK(pid2 != 0 && pid2 != pid);

  log_host = NULL;
  CHECK(logged > 0);
  CHECK(reentrant_result == MCPOLL_REENTRANT);
  OK(mcpoll_set_log_callback(NULL, NULL, 0));

  STEP("a server that breaks the protocol");
  odd_server(host, argv[5]);
  STEP("a 2026-07-28 server that breaks the protocol");
  odd_modern_server(host, argv[5]);
  STEP("tool cache bounds");
  catalog_bounds(argv[5]);

  STEP("breaker, degraded");
  breaker_from_a_crash(host, stdio_script);
  authorize_overloaded(host, stdio_script);
  degraded_after_a_crash(host, stdio_script);
  STEP("handshake failed");
  kept_across_a_restart(host, argv[5]);
  STEP("too large");
  too_large(host, stdio_script);

  STEP("http");
  /* ---- HTTP: the Python SDK peer over Streamable HTTP ---- */
  mcpoll_http_options *http = NULL;
  OK(mcpoll_http_options_new(argv[2], &http));
  OK(mcpoll_http_options_add_header(http, "X-Test", "c"));
  OK(mcpoll_http_options_set_proxy(http, NULL));
  uint64_t web = 0;
  OK(mcpoll_add_http_server(host, http, NULL, &web));
  mcpoll_http_options_free(http);
  CHECK(web != 0 && web != py);
  wait_for(host, web, MCPOLL_EVENT_READY, 0);
  many_calls(host, web, 100);
  /* Both servers at once. */
  uint64_t a = echo(host, py, "to stdio"), b = echo(host, web, "to http");
  CHECK(strstr(done_text(host, web, b), "to http") != NULL);
  CHECK(strstr(done_text(host, py, a), "to stdio") != NULL);

  STEP("http unreachable");
  http_unreachable(host, argv[2]);
  STEP("http not mcp");
  http_not_mcp(host, argv[3]);
  STEP("http auth");
  http_auth(host, argv[4]);
  STEP("an HTTP server that breaks the protocol");
  odd_http(host, argv[6]);

  STEP("close and remove");
  /* Closing and removing: a pending call fails as the transport closes, calls on a closed
   * server are refused; a removed id is unknown. */
  OK(mcpoll_call_tool(host, web, "slow", "{\"ms\":30000}", NULL, &call));
  OK(mcpoll_close_server(host, web));
  seen_event *closed = end_of(host, web, call);
  CHECK(closed->kind == MCPOLL_EVENT_CALL_FAILED && closed->error == MCPOLL_TRANSPORT_CLOSED);
  EXPECT(mcpoll_call_tool(host, web, "echo", "{}", NULL, &call), MCPOLL_CLOSED);
  OK(mcpoll_remove_server(host, web));
  EXPECT(mcpoll_call_tool(host, web, "echo", "{}", NULL, &call), MCPOLL_UNKNOWN_SERVER);
  EXPECT(mcpoll_remove_server(host, web), MCPOLL_UNKNOWN_SERVER);
  OK(mcpoll_remove_server(host, py));
  /* Until the removed process is reaped, there is a deadline; then idle. */
  n_seen = 0;
  for (double until = now_s() + 60;;) {
    OK(mcpoll_timeout_ms(host, &ms));
    if (ms < 0) break;
    CHECK(now_s() < until);
    turn(host, 100);
  }
  CHECK(n_seen == 0);

  STEP("free");
  mcpoll_host_free(host);
  mcpoll_host_free(NULL);
  printf("c api: %d checks passed\n", checks);
  return 0;
}
