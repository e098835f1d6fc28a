"""The core's outside-call helper and untrusted-text sanitizer, directly (no MCP): a total deadline whatever the
neighbour does, a size cap that stops the reading, and one-line fields that cannot forge lines."""

from __future__ import annotations

import gc
import time
import tracemalloc

import anyio
import pytest

from incident_desk.core.neighbours import outside
from incident_desk.core.neighbours.untrusted import cut_mark, one_line
from tests.faulty_neighbour import HUGE_BYTES, Fault, faulty_neighbour

DEADLINE = 1.0
CAP = 1024 * 1024
# What the kernel's socket buffers may hold beyond what the reader took, on loopback.
SOCKET_SLACK = 32 * 1024 * 1024


def _request(url: str, *, deadline: float = DEADLINE, cap: int = CAP) -> outside.Request:
    return outside.Request(
        "GET", url + "/api/v2/alerts", what="neighbour 'n'", deadline_seconds=deadline, max_bytes=cap
    )


def test_a_prompt_answer_comes_whole() -> None:
    with faulty_neighbour("ok") as neighbour:
        response = outside.exchange(_request(neighbour.url))
    assert (response.status_code, response.json(), response.is_success) == (200, [], True)


@pytest.mark.timing
@pytest.mark.parametrize("fault", ["drip", "hang"])
def test_a_dripping_or_hanging_neighbour_ends_at_the_deadline(fault: Fault) -> None:
    with faulty_neighbour(fault) as neighbour:
        began = time.monotonic()
        with pytest.raises(outside.DeadlineExceeded) as caught:
            outside.exchange(_request(neighbour.url))
        took = time.monotonic() - began
    # Without the deadline neither ever ends; 1 s of slack lets a loaded machine wake the caller late.
    assert DEADLINE <= took < DEADLINE + 1.0, f"{fault}: {took:.2f}s for a {DEADLINE}s deadline"
    assert str(caught.value) == "neighbour 'n' did not answer within 1s"


@pytest.mark.timing
def test_a_drip_slower_than_any_read_timeout_still_ends_at_the_deadline() -> None:
    """The drip sends a byte every second, so a per-read timeout of 1 s would never fire: the deadline is total."""
    with faulty_neighbour("drip") as neighbour:
        began = time.monotonic()
        with pytest.raises(outside.DeadlineExceeded):
            outside.exchange(_request(neighbour.url, deadline=2.5))
        took = time.monotonic() - began
    assert 2.5 <= took < 3.5  # the drip never ends by itself: 1 s of slack for a loaded machine


@pytest.mark.parametrize("announced", [False, True], ids=["streamed", "content-length"])
def test_a_huge_body_is_refused_past_the_cap_and_read_no_further(announced: bool) -> None:
    with faulty_neighbour("huge", announce_length=announced) as neighbour:
        with pytest.raises(outside.TooLarge) as caught:
            outside.exchange(_request(neighbour.url, deadline=30))
        time.sleep(0.2)  # the server notices the hang-up
        (sent,) = neighbour.answers_sent
    message = str(caught.value)
    assert message.startswith("neighbour 'n' answered too large a body: it ")
    assert f"over the cap of {CAP} bytes; stopped reading" in message
    if announced:
        assert f"announced {HUGE_BYTES} bytes" in message
    assert sent < CAP + SOCKET_SLACK, f"the neighbour got {sent} bytes out: the reader did not stop at the cap"


def test_an_unreachable_neighbour_is_named() -> None:
    with faulty_neighbour("ok") as neighbour:
        url = neighbour.url
    with pytest.raises(outside.Unreachable) as caught:
        outside.exchange(_request(url))
    assert str(caught.value) == "neighbour 'n' cannot be reached: connection refused"


@pytest.mark.timing
@pytest.mark.anyio
async def test_the_event_loop_stays_free_while_an_exchange_waits() -> None:
    lateness: list[float] = []

    async def tick() -> None:
        while True:
            began = time.monotonic()
            await anyio.sleep(0.01)
            lateness.append(time.monotonic() - began - 0.01)

    with faulty_neighbour("drip") as neighbour:
        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            with pytest.raises(outside.DeadlineExceeded):
                await outside.exchange_from_loop(_request(neighbour.url), lambda response: response.json())
            group.cancel_scope.cancel()
    assert len(lateness) > 20 and max(lateness) < 0.1


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("p99 over SLO", "p99 over SLO"),
        ("a\nb\r\nc", "a\u240ab\u240d\u240ac"),
        ("esc\x1b[2J bel\x07 nul\x00 del\x7f tab\t", "esc\u241b[2J bel\u2407 nul\u2400 del\u2421 tab\u2409"),
        ("c1\x85 ls\u2028 ps\u2029", "c1\ufffd ls\ufffd ps\ufffd"),
    ],
)
def test_one_line_replaces_every_control_and_line_break_visibly(raw: str, shown: str) -> None:
    assert one_line(raw) == shown


def test_one_line_cuts_with_a_mark() -> None:
    assert one_line("x" * 1_000_000, 500) == "x" * 500 + cut_mark(500)
    assert cut_mark(500) == "… [cut at 500 chars]"
    assert one_line("x" * 500, 500) == "x" * 500
    assert one_line(42) == "42"


def _held_by_exchanges() -> int:
    """Bytes still allocated by the outside-call helper (any frame in ``outside``): the process's resident size
    would also count what other threads of this test worker allocate meanwhile (the neighbour's own server, a
    loader an earlier test left importing numpy), and twice grew 27 MiB that way in a parallel run."""
    owned = tracemalloc.Filter(True, outside.__file__, all_frames=True)
    return sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces([owned]).statistics("filename"))


def test_a_refused_body_does_not_outlive_its_exchange() -> None:
    """The error keeps no frame holding the body read so far (a source caches its last error): six refused
    8 MiB bodies leave held what one left held, even with the collector off."""
    cap = 8 * 1024 * 1024
    with faulty_neighbour("huge") as neighbour:
        with pytest.raises(outside.TooLarge):  # what the first exchange imports is not traced: it would be slow
            outside.exchange(_request(neighbour.url, deadline=30, cap=cap))
        gc.disable()
        tracemalloc.start(40)  # deep enough to reach the helper's frames from the chunks it reads
        try:
            errors = []
            for _ in range(6):
                with pytest.raises(outside.TooLarge) as caught:
                    outside.exchange(_request(neighbour.url, deadline=30, cap=cap))
                errors.append(caught.value)
                if len(errors) == 1:
                    after_one = _held_by_exchanges()
            grown = _held_by_exchanges() - after_one
        finally:
            tracemalloc.stop()
            gc.enable()
    assert grown < 3 * cap, f"the helper holds {grown / 2**20:.0f} MiB more after five more refused bodies"


@pytest.mark.timing
@pytest.mark.anyio
async def test_a_cancelled_caller_does_not_wait_for_the_neighbour() -> None:
    with faulty_neighbour("hang") as neighbour:
        began = time.monotonic()
        with anyio.move_on_after(0.3):
            await outside.exchange_from_loop(_request(neighbour.url, deadline=5), lambda response: response)
        took = time.monotonic() - began
    assert took < 2.5, f"{took:.2f}s: the cancelled caller waited toward the neighbour's 5 s deadline"
