"""Start a desk the way a person or a client does, get it busy, signal it, and time how long it takes to stop."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "signal-test", "version": "0"},
    },
}


def _wait_for_exit(process: subprocess.Popen[bytes], signum: signal.Signals) -> tuple[float, int | None]:
    started = time.monotonic()
    process.send_signal(signum)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return float("inf"), None
    return time.monotonic() - started, process.returncode


def stop_stdio_desk(
    command: Sequence[str], env: dict[str, str], cwd: Path, signum: signal.Signals
) -> tuple[float, int | None]:
    """Seconds from ``signum`` to exit for a stdio desk that has answered initialize, with stdin held open."""
    process = subprocess.Popen(
        list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        assert answer["id"] == 1 and "result" in answer, answer
        return _wait_for_exit(process, signum)
    finally:
        if process.poll() is None:
            process.kill()
        process.stdin.close()
        process.stdout.close()
        process.wait()


def _http_request(port: int, head: str, body: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return sock


def stop_http_desk(
    command: Sequence[str], port: int, env: dict[str, str], cwd: Path, signum: signal.Signals
) -> tuple[float, int | None]:
    """The same for an HTTP desk holding a stateful session's open event stream and an idle keep-alive socket."""
    process = subprocess.Popen(
        list(command), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    sockets: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                probe = _http_request(port, f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n")
                if probe.recv(12).startswith(b"HTTP/1.1 200"):
                    probe.close()
                    break
                probe.close()
            except OSError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "the HTTP desk did not start"
            time.sleep(0.1)
        headers = (
            f"Host: 127.0.0.1:{port}\r\nAccept: application/json, text/event-stream\r\n"
            "Content-Type: application/json\r\n"
        )
        init = _http_request(port, f"POST /mcp HTTP/1.1\r\n{headers}", json.dumps(INITIALIZE).encode())
        sockets.append(init)
        response = init.recv(65536).decode("latin-1")
        session = next(
            line.split(":", 1)[1].strip()
            for line in response.split("\r\n")
            if line.lower().startswith("mcp-session-id:")
        )
        stream = _http_request(
            port, f"GET /mcp HTTP/1.1\r\n{headers}Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
        )
        sockets.append(stream)
        sockets.append(socket.create_connection(("127.0.0.1", port), timeout=10))  # idle, sends nothing
        time.sleep(0.3)
        return _wait_for_exit(process, signum)
    finally:
        for sock in sockets:
            sock.close()
        if process.poll() is None:
            process.kill()
        process.wait()
