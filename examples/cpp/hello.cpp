// cargo build --release -p mcpoll-capi
// c++ -std=c++17 -Icapi/include examples/cpp/hello.cpp target/release/libmcpoll_capi.a
//     -lgcc_s -lutil -lrt -lpthread -lm -ldl -o hello_cpp     (one line)
// ./hello_cpp PROGRAM [ARGS...]
//
// The C++ layer (capi/include/mcpoll.hpp): calls the echo tool of a stdio server, waits with
// poll(2) on the host's descriptor and deadline, prints the result; a bad call shows the
// exception a result other than MCPOLL_OK becomes.
#include <poll.h>

#include <cstdio>
#include <string>
#include <vector>

#include "mcpoll.hpp"

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  try {
    mcpoll::Host host;
    uint64_t server = host.add_stdio_server(std::vector<std::string>(argv + 1, argv + argc));
    try {
      host.call_tool(server, "echo", "[not an object]");
    } catch (const mcpoll::Error &e) {
      std::printf("refused: %s\n", e.result() == MCPOLL_ARGUMENTS_NOT_JSON ? "not JSON" : e.what());
    }
    uint64_t call = host.call_tool(server, "echo", R"({"text":"hello from C++"})");
    for (;;) {
      pollfd p{host.fd(), POLLIN, 0};
      int64_t due = host.timeout_ms();
      ::poll(&p, 1, due < 0 || due > 1000 ? 1000 : static_cast<int>(due));
      host.poll(0);
      mcpoll_event ev;
      while (host.next_event(ev)) {
        if (ev.call != call) continue;
        bool ok = ev.kind == MCPOLL_EVENT_CALL_DONE;
        std::printf("%s\n", ok ? ev.data : ev.error_message);
        return ok ? 0 : 1;
      }
    }
  } catch (const mcpoll::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
