"""Headless Chromium for the tests, driven through the DevTools protocol (CDP) over its WebSocket.

Debian's ``chromium`` is started with a fresh profile, ``--remote-debugging-port=0``, and the port it picked is read
from ``DevToolsActivePort`` in that profile. Every page lives in its own browser context (its own cookies), so two
pages of one browser are two people. Every wait has a total deadline and fails with :class:`BrowserTimeout` naming
what it waited for; the context manager always kills the browser's process group and removes the profile.

    with launch() as browser:
        page = browser.new_page()
        page.open(url)
        page.fill("input[name=login]", "bob")
        page.click("button[type=submit]")  # waits for the page the click leads to
        assert "Approved" in page.text()

Async tests that serve the page from their own event loop wrap a page in :class:`AsyncPage`, which runs each call in
a worker thread so the loop stays free to answer the browser.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

DEFAULT_TIMEOUT = 30.0  # generous: the CI machine has 2 loaded cores
# A first start reads Chromium's 300 MB binary from disk; with the page cache cold and the disk busy (a CI run
# building venvs and executables beside it) that alone took 40 s once here.
START_TIMEOUT = 120.0
POLL_INTERVAL = 0.05
FLAGS = [
    "--headless=new",
    "--remote-debugging-port=0",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-proxy-server",  # loopback pages only, whatever the environment's proxy says
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-breakpad",
    "--password-store=basic",
    "--use-mock-keychain",
]
T = TypeVar("T")


class BrowserError(AssertionError):
    """The browser could not do what the test asked (a failed navigation, a missing element, a script error)."""


class BrowserTimeout(BrowserError, TimeoutError):
    """A wait passed its deadline; the message names what was awaited."""


class _Deadline:
    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.end = time.monotonic() + seconds

    def remaining(self, detail: str = "") -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise self.expired(detail)
        return left

    def expired(self, detail: str = "") -> BrowserTimeout:
        return BrowserTimeout(f"waited {self.seconds:.1f} s for {self.what}" + (f" ({detail})" if detail else ""))


class _DevTools:
    """One CDP WebSocket: commands are answered by id, events are dropped (the driver polls instead)."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._lock = threading.Lock()
        self._next_id = 0

    def call(self, method: str, deadline: _Deadline, session: str | None = None, **params: Any) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            request: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
            if session:
                request["sessionId"] = session
            try:
                self._socket.send(json.dumps(request))
                while True:
                    try:
                        raw = self._socket.recv(timeout=deadline.remaining(f"no answer to {method}"))
                    except TimeoutError:
                        raise deadline.expired(f"no answer to {method}") from None
                    message = json.loads(raw)
                    if message.get("id") != request["id"]:
                        continue
                    if "error" in message:
                        raise _CommandFailed(f"{method}: {message['error'].get('message')}")
                    return dict(message.get("result", {}))
            except ConnectionClosed as closed:
                raise BrowserError(f"chromium closed the DevTools connection during {method}: {closed}") from None


class _CommandFailed(BrowserError):
    """CDP answered a command with an error (often: the page navigated away while it ran)."""


class Page:
    """One tab in its own browser context: its own cookies and storage."""

    def __init__(self, devtools: _DevTools, session: str, context: str, target: str) -> None:
        self._devtools = devtools
        self._session = session
        self.context = context
        self._target = target

    def close(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Close the tab and throw its browser context away (cookies and all): that person has left."""
        deadline = _Deadline(timeout, "the tab to close")
        self._devtools.call("Target.closeTarget", deadline, targetId=self._target)
        self._devtools.call("Target.disposeBrowserContext", deadline, browserContextId=self.context)

    def _call(self, method: str, deadline: _Deadline, **params: Any) -> dict[str, Any]:
        return self._devtools.call(method, deadline, self._session, **params)

    def open(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Navigate to ``url`` and wait until its document has loaded."""
        deadline = _Deadline(timeout, f"{url} to load")
        marker = self._mark_document(deadline)
        started = self._call("Page.navigate", deadline, url=url)
        if started.get("errorText"):
            raise BrowserError(f"could not open {url}: {started['errorText']}")
        if "loaderId" in started:  # no loader: a same-document navigation, already done
            self._wait_for_new_document(marker, deadline)

    def click(self, selector: str, navigates: bool = True, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Click the element with the mouse, as a person would; then wait for the page it leads to (unless told
        it does not navigate)."""
        deadline = _Deadline(timeout, f"a click on {selector!r}" + (" to load a new page" if navigates else ""))
        marker = self._mark_document(deadline)
        x, y = self._poll(f"{_FIND % json.dumps(selector)}{_CENTRE}", deadline, f"{selector!r} to be visible")
        for kind in ("mousePressed", "mouseReleased"):
            self._call("Input.dispatchMouseEvent", deadline, type=kind, x=x, y=y, button="left", clickCount=1)
        if navigates:
            self._wait_for_new_document(marker, deadline)

    def submit(self, selector: str = "form", timeout: float = DEFAULT_TIMEOUT) -> None:
        """Submit the form (with its validation and submit event, like pressing Enter) and wait for the result."""
        deadline = _Deadline(timeout, f"the form {selector!r} to submit and load a new page")
        marker = self._mark_document(deadline)
        self._poll(f"{_FIND % json.dumps(selector)} element.requestSubmit(); return true; }})()", deadline, selector)
        self._wait_for_new_document(marker, deadline)

    def fill(self, selector: str, value: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Set an input's value and fire its input and change events; waits for the element to appear."""
        deadline = _Deadline(timeout, f"{selector!r} to fill")
        script = (
            f"{_FIND % json.dumps(selector)} element.focus(); element.value = {json.dumps(value)};"
            " for (const kind of ['input', 'change']) element.dispatchEvent(new Event(kind, {bubbles: true}));"
            " return true; })()"
        )
        self._poll(script, deadline, f"{selector!r} to appear")

    def set_viewport(self, width: int, height: int, *, mobile: bool = False, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Lay the page out as a screen of ``width`` x ``height`` CSS pixels; ``mobile`` as a phone does (the
        viewport meta tag counts, and a page too wide for it scrolls sideways)."""
        deadline = _Deadline(timeout, f"a {width}x{height} viewport")
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
        self._call("Emulation.setDeviceMetricsOverride", deadline, **metrics)

    def screenshot(self, path: Path, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Write the whole page (not just the viewport) as a PNG at ``path``; its size in bytes."""
        deadline = _Deadline(timeout, f"a screenshot to {path}")
        size = self._call("Page.getLayoutMetrics", deadline)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self._call("Page.captureScreenshot", deadline, format="png", captureBeyondViewport=True, clip=clip)
        data = base64.b64decode(shot["data"])
        path.write_bytes(data)
        return len(data)

    def evaluate(self, expression: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The JSON value of a JavaScript expression in the page (promises are awaited)."""
        deadline = _Deadline(timeout, f"the script {expression[:60]!r}")
        answer = self._call("Runtime.evaluate", deadline, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in answer:
            raise BrowserError(f"script failed: {_exception_text(answer['exceptionDetails'])}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Poll a JavaScript expression until it is truthy (across navigations) and return its value."""
        deadline = _Deadline(timeout, what)
        return self._poll(f"(() => ({expression}) || null)()", deadline, what)

    def wait_for_text(self, text: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until the page's visible text contains ``text``; the timeout's message quotes what it says instead."""
        expression = f"document.body && document.body.innerText.includes({json.dumps(text)})"
        try:
            self.wait_for(expression, f"the text {text!r}", timeout)
        except BrowserTimeout as timed_out:
            raise BrowserTimeout(f"{timed_out}; the page at {self.url} says: {self.text()[:300]!r}") from None

    def wait_for_url(self, prefix: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        """Wait until the page's URL starts with ``prefix`` and its document has loaded; return the URL."""
        what = f"a loaded page at {prefix}"
        expression = f"location.href.startsWith({json.dumps(prefix)}) && document.readyState === 'complete'"
        self.wait_for(expression, what, timeout)
        return self.url

    @property
    def url(self) -> str:
        """The address of the current entry (for an error page: the address that failed)."""
        history = self._call("Page.getNavigationHistory", _Deadline(DEFAULT_TIMEOUT, "the navigation history"))
        return str(history["entries"][history["currentIndex"]]["url"])

    def text(self) -> str:
        """The page's visible text (``innerText`` of the body)."""
        return str(self.evaluate("document.body ? document.body.innerText : ''"))

    def html(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def cookies(self) -> list[dict[str, Any]]:
        """Every cookie of this page's browser context (name, value, domain, path, httpOnly, sameSite...)."""
        deadline = _Deadline(DEFAULT_TIMEOUT, "the cookies")
        answer = self._devtools.call("Storage.getCookies", deadline, browserContextId=self.context)
        return list(answer["cookies"])

    def _mark_document(self, deadline: _Deadline) -> str:
        """Tag the current document so a wait can tell the next one from it (a new page is a new Document)."""
        marker = secrets.token_hex(8)
        self._poll(f"(() => {{ document.__browserMarker = {json.dumps(marker)}; return true; }})()", deadline, "")
        return marker

    def _wait_for_new_document(self, marker: str, deadline: _Deadline) -> None:
        url = self._poll(
            f"(() => {{ if (document.__browserMarker === {json.dumps(marker)} || document.readyState !== 'complete')"
            " throw new Error(`still at ${document.URL} (${document.readyState})`); return document.URL; })()",
            deadline,
            "",
        )
        if str(url).startswith("chrome-error:"):
            raise BrowserError(f"the browser could not load {self.url}: {self.text()[:300]}")

    def _poll(self, expression: str, deadline: _Deadline, detail: str) -> Any:
        """Evaluate until the value is truthy; a script error (the expression's way to say why it is not ready) or
        a page navigating away counts as "not yet", and the last such reason goes into the timeout's message."""
        last = "not yet evaluated"
        while True:
            try:
                answer = self._call(
                    "Runtime.evaluate", deadline, expression=expression, returnByValue=True, awaitPromise=True
                )
            except _CommandFailed as failed:
                last = str(failed)
            except BrowserTimeout:
                raise deadline.expired(f"{detail}; last: {last}" if detail else last) from None
            else:
                if "exceptionDetails" in answer:
                    last = _exception_text(answer["exceptionDetails"])
                elif answer["result"].get("value"):
                    return answer["result"]["value"]
                else:
                    last = "not yet"
            time.sleep(min(POLL_INTERVAL, deadline.remaining(f"{detail}; last: {last}" if detail else last)))


def _exception_text(details: dict[str, Any]) -> str:
    """The first line of a script error ("Error: no element matches the selector"), without its stack."""
    text = details.get("exception", {}).get("description") or details.get("text") or "script error"
    return str(text).splitlines()[0]


_FIND = (
    "(() => { const element = document.querySelector(%s);"
    " if (!element) throw new Error('no element matches the selector');"
)
_CENTRE = (
    " element.scrollIntoView({block: 'center', inline: 'center'});"
    " const box = element.getBoundingClientRect();"
    " if (box.width === 0 || box.height === 0) throw new Error('the element is not visible');"
    " return [box.x + box.width / 2, box.y + box.height / 2]; })()"
)


class Browser:
    """A running headless Chromium; make one :class:`Page` per person with :meth:`new_page`."""

    def __init__(self, process: subprocess.Popen[bytes], devtools: _DevTools, log: Path) -> None:
        self.process = process
        self._devtools = devtools
        self._log = log

    def new_page(self, timeout: float = DEFAULT_TIMEOUT) -> Page:
        """A blank tab in a new browser context: no cookies shared with any other page."""
        deadline = _Deadline(timeout, "a new tab")
        context = self._devtools.call("Target.createBrowserContext", deadline)["browserContextId"]
        target = self._devtools.call("Target.createTarget", deadline, url="about:blank", browserContextId=context)
        attached = self._devtools.call("Target.attachToTarget", deadline, targetId=target["targetId"], flatten=True)
        return Page(self._devtools, attached["sessionId"], context, target["targetId"])

    def log(self) -> str:
        """Chromium's stderr so far (for a failing test's message)."""
        return self._log.read_text(errors="replace")


def chromium_path() -> str | None:
    return shutil.which("chromium")


@contextmanager
def launch(parent: Path | None = None, timeout: float = START_TIMEOUT) -> Iterator[Browser]:
    """Start headless Chromium with a fresh profile (under ``parent`` or the system temp dir); on exit kill it and
    remove the profile, whatever happened. Skips the test if chromium is not installed."""
    binary = chromium_path()
    if binary is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    root = Path(tempfile.mkdtemp(prefix="chromium-", dir=parent))
    profile = root / "profile"
    log = root / "chromium.log"
    flags = [*FLAGS, f"--user-data-dir={profile}"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run its sandbox as root; CI runs as root
    process = None
    try:
        with log.open("wb") as stderr:
            process = subprocess.Popen(
                [binary, *flags, "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,  # its own process group, so stopping it reaches every helper process
            )
        deadline = _Deadline(timeout, "chromium to start and write DevToolsActivePort")
        endpoint = _devtools_endpoint(profile / "DevToolsActivePort", process, log, deadline)
        with connect(
            endpoint, proxy=None, open_timeout=deadline.remaining(), max_size=None, ping_interval=None
        ) as socket:
            yield Browser(process, _DevTools(socket), log)
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)


def _devtools_endpoint(active_port: Path, process: subprocess.Popen[bytes], log: Path, deadline: _Deadline) -> str:
    while True:
        if active_port.exists():
            lines = active_port.read_text().splitlines()
            if len(lines) >= 2 and lines[0].isdigit():
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        if process.poll() is not None:
            raise BrowserError(f"chromium exited with {process.returncode}: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(min(POLL_INTERVAL, deadline.remaining(log.read_text(errors="replace")[-500:])))


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the browser's whole process group (renderers, zygote, GPU helper), then kill what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        end = time.monotonic() + 5
        while (process.poll() is None or live_processes(process.pid)) and time.monotonic() < end:
            time.sleep(POLL_INTERVAL)
        if process.poll() is not None and not live_processes(process.pid):
            break
    process.wait(timeout=5)


def live_processes(group: int) -> list[int]:
    """The processes of a process group still running (zombies waiting for init to reap them do not count)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


class AsyncPage:
    """The same :class:`Page` for async tests: each call runs in a worker thread, leaving the event loop free to
    serve what the browser asks for. Each call still has its own deadline, so none hangs the test."""

    def __init__(self, page: Page) -> None:
        self.page = page

    async def run(self, call: Callable[..., T], *args: Any) -> T:
        """Run any blocking helper (``provider.sign_in_with_browser(page.page, ...)``) off the event loop."""
        return await anyio.to_thread.run_sync(lambda: call(*args))

    async def open(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self.run(self.page.open, url, timeout)

    async def click(self, selector: str, navigates: bool = True, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self.run(self.page.click, selector, navigates, timeout)

    async def submit(self, selector: str = "form", timeout: float = DEFAULT_TIMEOUT) -> None:
        await self.run(self.page.submit, selector, timeout)

    async def fill(self, selector: str, value: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self.run(self.page.fill, selector, value, timeout)

    async def evaluate(self, expression: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return await self.run(self.page.evaluate, expression, timeout)

    async def wait_for(self, expression: str, what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return await self.run(self.page.wait_for, expression, what, timeout)

    async def wait_for_text(self, text: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self.run(self.page.wait_for_text, text, timeout)

    async def wait_for_url(self, prefix: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        return await self.run(self.page.wait_for_url, prefix, timeout)

    async def url(self) -> str:
        return await self.run(lambda: self.page.url)

    async def text(self) -> str:
        return await self.run(self.page.text)

    async def html(self) -> str:
        return await self.run(self.page.html)

    async def cookies(self) -> list[dict[str, Any]]:
        return await self.run(self.page.cookies)

    async def close(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self.run(self.page.close, timeout)
