"""A TCP hop between stalewatch and the API server that can reset every connection through it.

Watch streams break in production when a load balancer drops idle connections or the API
server restarts. The shared test API server cannot be restarted under other tests, so
stalewatch reaches it through this hop instead, and a test resets the connections. TLS passes
through untouched: stalewatch still verifies the real server's certificate.

Threads, not the test's event loop: the loop blocks during the synchronous Prometheus calls,
and stalewatch's requests must not stall with it.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class Proxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def reset_all(self) -> None:
        """Abort every open connection with a TCP RST, as a crashed peer would (SO_LINGER 0).

        Every socket is shut for reading before any is closed: that wakes the threads blocked
        reading them, and a socket closed while a thread still reads it would stay open.
        """
        with self._lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            with suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RD)
        for sock in sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener was closed: the proxy is stopping
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._open |= {client, server}
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Copies one direction; when either side ends, the whole connection ends."""
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with self._lock:
            ours = {source, sink} <= self._open  # else reset_all or the other direction ends it
            self._open -= {source, sink}
        if ours:
            for sock in (source, sink):  # shut first, to wake the thread reading the other way
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    @contextmanager
    def serving(self) -> Iterator[Proxy]:
        threading.Thread(target=self._accept, daemon=True).start()
        try:
            yield self
        finally:
            with suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept(), which close alone would not
            self._listener.close()
            self.reset_all()
