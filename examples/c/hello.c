#include <stdio.h>
#include "mcpoll.h"

int main(int argc, char **argv) { /* ./hello PROGRAM [ARGS...]: calls its echo tool */
  mcpoll_host *host;
  uint64_t server, call;
  mcpoll_event ev;
  if (argc < 2 || mcpoll_host_new(&host) != MCPOLL_OK) return 2;
  if (mcpoll_add_stdio_server(host, (const char *const *)&argv[1], argc - 1, NULL, 0, NULL,
                              NULL, &server) != MCPOLL_OK ||
      mcpoll_call_tool(host, server, "echo", "{\"text\":\"hello\"}", NULL, &call) != MCPOLL_OK) {
    fprintf(stderr, "%s\n", mcpoll_last_error(host));
    return 1;
  }
  for (;;) {
    mcpoll_poll(host, -1); /* or: poll(2) on mcpoll_fd until mcpoll_timeout_ms */
    while (mcpoll_next_event(host, &ev) == MCPOLL_OK && ev.kind != MCPOLL_EVENT_NONE) {
      if (ev.call != call) continue;
      int ok = ev.kind == MCPOLL_EVENT_CALL_DONE;
      printf("%s\n", ok ? ev.data : ev.error_message);
      mcpoll_host_free(host);
      return ok ? 0 : 1;
    }
  }
}
