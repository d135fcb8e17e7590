/*
 * cargo build --release -p mcpoll-capi
 * cc -O2 -Icapi/include examples/c/poll_loop.c target/release/libmcpoll_capi.a \
 *    -lgcc_s -lutil -lrt -lpthread -lm -ldl -o poll_loop
 * ./poll_loop CALLS PROGRAM [ARGS...]
 *
 * A plain poll(2) loop that serves a UDP socket of its own and hosts an MCP server beside it:
 * one pollfd for the socket, one for mcpoll_fd, and the timeout from mcpoll_timeout_ms. When
 * the host's descriptor is readable or its deadline is due, mcpoll_poll(host, 0) does the
 * work; the socket is served as usual. Each answered call sends the program a datagram, and
 * the next call starts when that datagram arrives, so both kinds of input drive the loop.
 * With nothing pending the timeout is -1: the loop sleeps until the socket or a server speaks.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcpoll.h"

static void check(mcpoll_host *host, mcpoll_result r, const char *what) {
  if (r == MCPOLL_OK) return;
  /* No host yet (its creation failed): no last error either, and printf takes no NULL. */
  const char *detail = host ? mcpoll_last_error(host) : "";
  fprintf(stderr, "%s: %s (%s)\n", what, mcpoll_result_name(r), detail ? detail : "");
  exit(1);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s CALLS PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  int calls = atoi(argv[1]);

  /* The program's own socket: UDP on 127.0.0.1, sending to itself. */
  int sock = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (sock < 0 || bind(sock, (struct sockaddr *)&addr, sizeof addr) != 0 ||
      getsockname(sock, (struct sockaddr *)&addr, &len) != 0) {
    perror("socket");
    return 1;
  }

  mcpoll_host *host = NULL;
  check(NULL, mcpoll_host_new(&host), "host");
  uint64_t server = 0, call = 0;
  check(host, mcpoll_add_stdio_server(host, (const char *const *)&argv[2], (size_t)(argc - 2),
                                      NULL, 0, NULL, NULL, &server), "server");
  check(host, mcpoll_call_tool(host, server, "echo", "{\"text\":\"0\"}", NULL, &call), "call");

  int answered = 0, datagrams = 0, wakeups = 0;
  while (datagrams < calls) {
    int fd;
    int64_t due;
    check(host, mcpoll_fd(host, &fd), "fd");
    check(host, mcpoll_timeout_ms(host, &due), "timeout");
    struct pollfd fds[2] = {{.fd = sock, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    int ready = poll(fds, 2, due > 60000 ? 60000 : (int)due);
    if (ready < 0) {
      perror("poll");
      return 1;
    }
    wakeups++;
    if (fds[0].revents & POLLIN) { /* the program's own input */
      char buf[64];
      ssize_t got = recv(sock, buf, sizeof buf, 0);
      if (got > 0 && ++datagrams < calls) {
        char args[64];
        snprintf(args, sizeof args, "{\"text\":\"%d\"}", datagrams);
        check(host, mcpoll_call_tool(host, server, "echo", args, NULL, &call), "call");
      }
    }
    /* The host's turn: readable, or the deadline is due (mcpoll_poll is cheap either way). */
    check(host, mcpoll_poll(host, 0), "poll");
    mcpoll_event ev;
    while (mcpoll_next_event(host, &ev) == MCPOLL_OK && ev.kind != MCPOLL_EVENT_NONE) {
      if (ev.kind == MCPOLL_EVENT_CALL_DONE && ev.call == call) {
        answered++;
        sendto(sock, "done", 4, 0, (struct sockaddr *)&addr, sizeof addr);
      } else if (ev.kind == MCPOLL_EVENT_CALL_FAILED) {
        fprintf(stderr, "call failed: %s\n", ev.error_message);
        return 1;
      }
    }
  }
  printf("calls answered: %d, datagrams: %d, loop wake-ups: %d\n", answered, datagrams, wakeups);
  mcpoll_host_free(host);
  close(sock);
  return answered == calls ? 0 : 1;
}
