"""Test doubles shared by several test files: a loopback model provider and an in-memory keychain.

Both are real: the provider is an HTTP server on 127.0.0.1 that the desk reaches over TCP, and the keychain
is a ``keyring`` backend installed with ``keyring.set_keyring`` (so the desk's own lookup code runs).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import keyring
from keyring.backend import KeyringBackend
from keyring.backends import fail, null


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeProvider:
    """What the loopback provider answers next (status, body, extra headers), and every request it saw."""

    url: str = ""
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def answer(self, status: int, body: Any, *, delay: float = 0.0, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.delay = delay
        self.headers = dict(headers or {})

    def answer_openai(self, text: str, model: str = "gpt-test-served") -> None:
        self.answer(200, {"model": model, "choices": [{"message": {"role": "assistant", "content": text}}]})

    def answer_anthropic(self, text: str, model: str = "claude-test-served") -> None:
        self.answer(200, {"model": model, "content": [{"type": "text", "text": text}]})


def _handler(state: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw
            state.requests.append(Recorded("POST", self.path, headers, body))
            if state.delay:
                state.release.wait(state.delay)
            try:
                self.send_response(state.status)
                self.send_header("content-type", "application/json")
                for name, value in state.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(state.body)))
                self.end_headers()
                self.wfile.write(state.body)
            except OSError:
                pass  # the client gave up (timeout test); nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def running_fake_provider() -> Iterator[FakeProvider]:
    """A threaded HTTP server on an ephemeral loopback port, stopped on exit."""
    state = FakeProvider()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


class MemoryKeyring(KeyringBackend):
    """A real backend that keeps secrets in a dict. Negative priority: never auto-selected by detection."""

    priority = -10

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        del self.store[(service, username)]


def null_keyring() -> KeyringBackend:
    """keyring's null backend (stores nothing), behind a typed call: its constructor is unannotated."""
    return null.Keyring()  # type: ignore[no-untyped-call]


def failing_keyring() -> KeyringBackend:
    """keyring's fail backend (every operation raises), behind a typed call: its constructor is unannotated."""
    return fail.Keyring()  # type: ignore[no-untyped-call]


Backend = TypeVar("Backend", bound=KeyringBackend)


@contextmanager
def using_keyring(backend: Backend) -> Iterator[Backend]:
    """Install ``backend`` as the process's keyring for the block, then put the previous one back."""
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


class FileKeyring(KeyringBackend):
    """A keychain shared across processes through a JSON file named by DESK_TEST_KEYRING_FILE.

    Selected in a child process with PYTHON_KEYRING_BACKEND=tests.fakes.FileKeyring (the child's working
    directory must be the repository root), so a test can prove the server reads its secrets from the keychain.
    """

    priority = -10

    @staticmethod
    def _path() -> Path:
        return Path(os.environ["DESK_TEST_KEYRING_FILE"])

    def _load(self) -> dict[str, str]:
        path = self._path()
        return json.loads(path.read_text()) if path.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        self._path().write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        del data[f"{service}/{username}"]
        self._path().write_text(json.dumps(data))
