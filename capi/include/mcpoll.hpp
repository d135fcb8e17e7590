/*
 * mcpoll.hpp: a thin C++17 layer over mcpoll.h. RAII for the host, exceptions for results,
 * std::string in, nothing else: the loop and the events are the C ones (mcpoll_event's
 * pointers keep their C lifetime, until the next non-const call on the host).
 */
#ifndef MCPOLL_HPP
#define MCPOLL_HPP

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "mcpoll.h"

namespace mcpoll {

/* A result other than MCPOLL_OK, with the host's text when there is one. */
class Error : public std::runtime_error {
 public:
  Error(mcpoll_result result, const std::string &what) : std::runtime_error(what), result_(result) {}
  mcpoll_result result() const noexcept { return result_; }

 private:
  mcpoll_result result_;
};

inline void check(mcpoll_result r, const mcpoll_host *host = nullptr) {
  if (r == MCPOLL_OK) return;
  const char *detail = host != nullptr ? mcpoll_last_error(host) : mcpoll_result_message(r);
  throw Error(r, std::string(mcpoll_result_name(r)) + ": " + detail);
}

/* Owns an mcpoll_host; movable, not copyable. */
class Host {
 public:
  Host() {
    mcpoll_host *h = nullptr;
    check(mcpoll_host_new(&h));
    host_.reset(h);
  }

  mcpoll_host *get() const noexcept { return host_.get(); }

  uint64_t add_stdio_server(const std::vector<std::string> &argv,
                            const mcpoll_config *config = nullptr) {
    std::vector<const char *> args;
    for (const auto &a : argv) args.push_back(a.c_str());
    uint64_t server = 0;
    check(mcpoll_add_stdio_server(get(), args.data(), args.size(), nullptr, 0, nullptr, config,
                                  &server),
          get());
    return server;
  }

  uint64_t add_http_server(const std::string &url, const mcpoll_config *config = nullptr) {
    mcpoll_http_options *raw = nullptr;
    check(mcpoll_http_options_new(url.c_str(), &raw));
    std::unique_ptr<mcpoll_http_options, void (*)(mcpoll_http_options *)> options(
        raw, mcpoll_http_options_free);
    uint64_t server = 0;
    check(mcpoll_add_http_server(get(), options.get(), config, &server), get());
    return server;
  }

  uint64_t call_tool(uint64_t server, const std::string &name, const std::string &arguments,
                     const mcpoll_call_options *options = nullptr) {
    uint64_t call = 0;
    check(mcpoll_call_tool(get(), server, name.c_str(), arguments.c_str(), options, &call),
          get());
    return call;
  }

  void cancel(uint64_t server, uint64_t call) { check(mcpoll_cancel(get(), server, call), get()); }

  void answer(uint64_t server, uint64_t request, const std::string &result) {
    check(mcpoll_answer(get(), server, request, result.c_str()), get());
  }

  /* 0: never blocks; negative: until something happens. */
  void poll(int64_t timeout_ms = 0) { check(mcpoll_poll(get(), timeout_ms), get()); }

  int fd() const {
    int fd = -1;
    check(mcpoll_fd(get(), &fd));
    return fd;
  }

  /* Milliseconds until poll is due although fd() is not readable; -1: never. */
  int64_t timeout_ms() const {
    int64_t ms = -1;
    check(mcpoll_timeout_ms(get(), &ms));
    return ms;
  }

  /* Nothing to do now: a loop may skip poll() while true (and poll now and then anyway). */
  bool is_idle() const {
    bool idle = false;
    check(mcpoll_is_idle(get(), &idle));
    return idle;
  }

  /* The next event into `event`; false when none is queued. */
  bool next_event(mcpoll_event &event) {
    check(mcpoll_next_event(get(), &event), get());
    return event.kind != MCPOLL_EVENT_NONE;
  }

  void close_server(uint64_t server) { check(mcpoll_close_server(get(), server), get()); }
  void remove_server(uint64_t server) { check(mcpoll_remove_server(get(), server), get()); }

 private:
  struct Free {
    void operator()(mcpoll_host *h) const noexcept { mcpoll_host_free(h); }
  };
  std::unique_ptr<mcpoll_host, Free> host_;
};

}  // namespace mcpoll

#endif /* MCPOLL_HPP */
