#!/usr/bin/env python3
# cargo build --release -p mcpoll-capi
# python3 examples/python/asyncio_host.py target/release/libmcpoll_capi.so PROGRAM [ARGS...]
"""An mcpoll host inside an asyncio loop, through the C ABI with ctypes (no other package).

The loop watches the host's descriptor with `loop.add_reader` and wakes at the host's deadline
with `loop.call_later`; each wake-up runs `mcpoll_poll(host, 0)` (never blocks) and resolves
the futures of the calls that ended. Calls are coroutines: `await host.call_tool(...)`. This is
how an rclpy node, or any asyncio program, would embed it. Runs ten echo calls at once on the
stdio server given on the command line and prints their texts.
"""

import asyncio
import ctypes
import json
import sys

MCPOLL_OK = 0
EVENT_NONE, EVENT_READY, EVENT_CALL_DONE, EVENT_CALL_FAILED = 0, 1, 2, 3


class Event(ctypes.Structure):
    """`mcpoll_event`, field for field (include/mcpoll.h)."""

    _fields_ = [
        ("kind", ctypes.c_int),
        ("server", ctypes.c_uint64),
        ("call", ctypes.c_uint64),
        ("request", ctypes.c_uint64),
        ("request_kind", ctypes.c_uint32),
        ("list_kind", ctypes.c_uint32),
        ("error", ctypes.c_int),
        ("error_kind", ctypes.c_char_p),
        ("error_name", ctypes.c_char_p),
        ("error_message", ctypes.c_char_p),
        ("rpc_code", ctypes.c_int64),
        ("exit_code", ctypes.c_int32),
        ("exit_signal", ctypes.c_int32),
        ("restart_in_ms", ctypes.c_int64),
        ("is_error", ctypes.c_bool),
        ("progress", ctypes.c_double),
        ("total", ctypes.c_double),
        ("data", ctypes.POINTER(ctypes.c_char)),
        ("data_len", ctypes.c_size_t),
    ]


class McpError(Exception):
    pass


class Host:
    """A host whose descriptor and deadline are watched by an asyncio loop."""

    def __init__(self, lib_path, loop):
        self.lib = lib = ctypes.CDLL(lib_path)
        p, u64, i64 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64
        lib.mcpoll_host_new.argtypes = [ctypes.POINTER(p)]
        lib.mcpoll_host_free.argtypes = [p]
        lib.mcpoll_last_error.argtypes = [p]
        lib.mcpoll_last_error.restype = ctypes.c_char_p
        lib.mcpoll_result_name.restype = ctypes.c_char_p
        lib.mcpoll_fd.argtypes = [p, ctypes.POINTER(ctypes.c_int)]
        lib.mcpoll_timeout_ms.argtypes = [p, ctypes.POINTER(i64)]
        lib.mcpoll_poll.argtypes = [p, i64]
        lib.mcpoll_next_event.argtypes = [p, ctypes.POINTER(Event)]
        lib.mcpoll_add_stdio_server.argtypes = [
            p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, ctypes.c_char_p, p,
            ctypes.POINTER(u64),
        ]
        lib.mcpoll_call_tool.argtypes = [
            p, u64, ctypes.c_char_p, ctypes.c_char_p, p, ctypes.POINTER(u64),
        ]
        self.loop = loop
        self.host = p()
        self._check(lib.mcpoll_host_new(ctypes.byref(self.host)))
        fd = ctypes.c_int()
        self._check(lib.mcpoll_fd(self.host, ctypes.byref(fd)))
        self.fd = fd.value
        loop.add_reader(self.fd, self._pump)
        self.timer = None
        self.waiting = {}  # (server, call) -> future
        self.ready = {}  # server -> future

    def _check(self, result):
        if result != MCPOLL_OK:
            name = self.lib.mcpoll_result_name(result).decode()
            detail = self.lib.mcpoll_last_error(self.host) if self.host else b""
            raise McpError(f"{name}: {(detail or b'').decode()}")

    def _pump(self):
        """The host's turn: readable or due. Never blocks."""
        self._check(self.lib.mcpoll_poll(self.host, 0))
        ev = Event()
        while True:
            self._check(self.lib.mcpoll_next_event(self.host, ctypes.byref(ev)))
            if ev.kind == EVENT_NONE:
                break
            # The event's bytes live until the next call on the host: copy them now.
            data = ctypes.string_at(ev.data, ev.data_len).decode()
            if ev.kind == EVENT_READY and ev.server in self.ready:
                self.ready.pop(ev.server).set_result(data)
            fut = self.waiting.pop((ev.server, ev.call), None)
            if fut is None or fut.done():
                continue
            if ev.kind == EVENT_CALL_DONE:
                fut.set_result(json.loads(data))
            elif ev.kind == EVENT_CALL_FAILED:
                fut.set_exception(McpError(ev.error_message.decode()))
        self._arm()

    def _arm(self):
        """Wakes the loop at the host's deadline (none: only the descriptor wakes it)."""
        ms = ctypes.c_int64()
        self._check(self.lib.mcpoll_timeout_ms(self.host, ctypes.byref(ms)))
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if ms.value >= 0:
            self.timer = self.loop.call_later(ms.value / 1000, self._pump)

    async def add_stdio_server(self, argv):
        args = (ctypes.c_char_p * len(argv))(*[a.encode() for a in argv])
        server = ctypes.c_uint64()
        self._check(self.lib.mcpoll_add_stdio_server(
            self.host, args, len(argv), None, 0, None, None, ctypes.byref(server)))
        self.ready[server.value] = self.loop.create_future()
        self._arm()
        await self.ready[server.value]
        return server.value

    async def call_tool(self, server, name, arguments):
        call = ctypes.c_uint64()
        self._check(self.lib.mcpoll_call_tool(
            self.host, server, name.encode(), json.dumps(arguments).encode(), None,
            ctypes.byref(call)))
        fut = self.loop.create_future()
        self.waiting[(server, call.value)] = fut
        self._arm()  # a command can bring the deadline forward
        return await fut

    def close(self):
        self.loop.remove_reader(self.fd)
        if self.timer is not None:
            self.timer.cancel()
        self.lib.mcpoll_host_free(self.host)
        self.host = None


async def main(lib_path, argv):
    host = Host(lib_path, asyncio.get_running_loop())
    try:
        server = await asyncio.wait_for(host.add_stdio_server(argv), 60)
        calls = [host.call_tool(server, "echo", {"text": f"asyncio {i}"}) for i in range(10)]
        results = await asyncio.wait_for(asyncio.gather(*calls), 60)
        for result in results:
            print(result["content"][0]["text"])
    finally:
        host.close()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(f"usage: {sys.argv[0]} LIBMCPOLL_CAPI.so PROGRAM [ARGS...]")
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
