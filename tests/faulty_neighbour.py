"""A loopback HTTP server that misbehaves as a neighbour might: it drips one byte a second, accepts and never
answers, or sends a 200 MB body; or, for contrast, answers a small JSON list at once."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

Fault = Literal["drip", "hang", "huge", "ok"]
HUGE_BYTES = 200 * 1024 * 1024
_CHUNK = b'"' + b"x" * (1024 * 1024 - 3) + b'",'


@dataclass
class FaultyNeighbour:
    url: str
    fault: Fault
    requests: int = 0
    answers_sent: list[int] = field(default_factory=list)  # body bytes each huge answer got out before a hang-up
    stop: threading.Event = field(default_factory=threading.Event)


def _read_request(sock: socket.socket, stop: threading.Event) -> bool:
    sock.settimeout(0.5)
    seen = b""
    while b"\r\n\r\n" not in seen and not stop.is_set():
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        if not data:
            return False
        seen += data
    return not stop.is_set()


def _answer(sock: socket.socket, state: FaultyNeighbour, announce_length: bool) -> None:
    if state.fault == "hang":
        state.stop.wait()
        return
    if state.fault == "ok":
        body = b"[]"
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n" + body)
        return
    if state.fault == "drip":
        opening = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n["
        index = 0
        while not state.stop.is_set():
            sock.sendall(opening[index : index + 1] if index < len(opening) else b" ")
            index += 1
            state.stop.wait(1.0)
        return
    length = f"Content-Length: {HUGE_BYTES}\r\n" if announce_length else "Connection: close\r\n"
    sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}\r\n[".encode())
    state.answers_sent.append(0)
    answer = len(state.answers_sent) - 1
    while state.answers_sent[answer] < HUGE_BYTES and not state.stop.is_set():
        sock.sendall(_CHUNK)
        state.answers_sent[answer] += len(_CHUNK)


@contextmanager
def faulty_neighbour(fault: Fault, *, announce_length: bool = False) -> Iterator[FaultyNeighbour]:
    """The server on a loopback port chosen now; each request handled in a thread of its own."""
    state = FaultyNeighbour("", fault)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            state.requests += 1
            sock: socket.socket = self.request
            try:
                if _read_request(sock, state.stop):
                    sock.settimeout(10)
                    _answer(sock, state, announce_length)
            except OSError:
                pass  # the desk hung up: what it should do

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        server.shutdown()
        server.server_close()
