/*
 * cargo build --release -p mcpoll-capi
 * cc -O2 -Icapi/include examples/c/game_loop.c target/release/libmcpoll_capi.a \
 *    -lgcc_s -lutil -lrt -lpthread -lm -ldl -o game_loop
 * ./game_loop FRAMES HTTP_URL|- PROGRAM [ARGS...]
 *
 * A 60 Hz fixed-step loop (a game's or a robot controller's) that calls a stdio MCP server and,
 * unless HTTP_URL is "-", a Streamable HTTP one, without ever blocking a frame: each frame
 * runs mcpoll_poll(host, 0), drains the events, keeps one echo call in flight per server
 * (a call starts in one frame and ends frames later), then does its own work and sleeps to
 * the next frame. It prints how many calls each server answered and the longest time a frame
 * spent in mcpoll. Exits 0 when every server answered at least one call.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcpoll.h"

#define FRAME_NS 16666667L

static long long ns_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

typedef struct {
  uint64_t id;
  uint64_t in_flight; /* the call in flight, or 0 */
  int answered;
  const char *name;
} server;

static void die(mcpoll_host *host, mcpoll_result r, const char *what) {
  fprintf(stderr, "%s: %s (%s)\n", what, mcpoll_result_name(r),
          host ? mcpoll_last_error(host) : "");
  exit(1);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s FRAMES HTTP_URL|- PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  int frames = atoi(argv[1]);
  mcpoll_host *host = NULL;
  mcpoll_result r = mcpoll_host_new(&host);
  if (r != MCPOLL_OK) die(NULL, r, "host");

  server servers[2] = {{0, 0, 0, "stdio"}, {0, 0, 0, "http"}};
  int n = 1;
  r = mcpoll_add_stdio_server(host, (const char *const *)&argv[3], (size_t)(argc - 3), NULL, 0,
                              NULL, NULL, &servers[0].id);
  if (r != MCPOLL_OK) die(host, r, "stdio server");
  if (strcmp(argv[2], "-") != 0) {
    mcpoll_http_options *http = NULL;
    if ((r = mcpoll_http_options_new(argv[2], &http)) != MCPOLL_OK) die(host, r, "options");
    r = mcpoll_add_http_server(host, http, NULL, &servers[1].id);
    mcpoll_http_options_free(http);
    if (r != MCPOLL_OK) die(host, r, "http server");
    n = 2;
  }

  long long next = ns_now(), worst = 0;
  for (int frame = 0; frame < frames; frame++) {
    long long t0 = ns_now();
    /* MCP's share of the frame: never blocks. */
    if ((r = mcpoll_poll(host, 0)) != MCPOLL_OK) die(host, r, "poll");
    mcpoll_event ev;
    while (mcpoll_next_event(host, &ev) == MCPOLL_OK && ev.kind != MCPOLL_EVENT_NONE) {
      for (int i = 0; i < n; i++) {
        if (ev.server != servers[i].id || ev.call == 0 || ev.call != servers[i].in_flight) continue;
        if (ev.kind == MCPOLL_EVENT_CALL_DONE) {
          servers[i].answered++;
          servers[i].in_flight = 0;
        } else if (ev.kind == MCPOLL_EVENT_CALL_FAILED) {
          fprintf(stderr, "%s call failed: %s\n", servers[i].name, ev.error_message);
          servers[i].in_flight = 0;
        }
      }
    }
    for (int i = 0; i < n; i++) {
      if (servers[i].in_flight != 0) continue;
      char args[64];
      snprintf(args, sizeof args, "{\"text\":\"frame %d\"}", frame);
      r = mcpoll_call_tool(host, servers[i].id, "echo", args, NULL, &servers[i].in_flight);
      if (r != MCPOLL_OK) die(host, r, "call");
    }
    long long spent = ns_now() - t0;
    if (spent > worst) worst = spent;

    /* ... the game's own work for this frame goes here ... */

    next += FRAME_NS;
    struct timespec until = {next / 1000000000LL, next % 1000000000LL};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL);
  }
  int ok = 1;
  for (int i = 0; i < n; i++) {
    printf("%s: %d calls answered\n", servers[i].name, servers[i].answered);
    ok &= servers[i].answered > 0;
  }
  printf("frames: %d, longest mcpoll share of a frame: %lld us\n", frames, worst / 1000);
  mcpoll_host_free(host);
  return ok ? 0 : 1;
}
