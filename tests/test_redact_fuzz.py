"""Generated secrets of every kind in generated log lines are masked; generated ordinary lines are not.

Secrets come from the corpus's formats with fresh values (a new seed per example), logged after and before
generated ordinary text, one line or a block of lines; ordinary lines are built from what real logs carry and
redaction must leave alone: UUIDs, commit hashes, trace and request ids, short base64 payload ids, pod names,
URLs without credentials, numbers and the words of secrets in ordinary sentences.
"""

from __future__ import annotations

import base64
import json
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from incident_desk.core.redaction.face import MASK, redact
from tests.redact_corpus import formats, leaks

FORMAT_COUNT = len(formats())
WORDS = (
    "INFO", "WARN", "ERROR", "DEBUG", "payments-api", "worker[812]:", "request", "served", "retry", "done",
    "status=200", "latency_ms=12", "upstream", "timeout", "after", "the", "queue", "depth", "GC", "pause",
    "2024-05-01T10:00:00.123Z", "May  1 10:00:01", "host=web-1", "region=eu-west-1", "(attempt", "2/5)",
)  # fmt: skip
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _words(draw: st.DrawFn, most: int) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=most)))


@st.composite
def logged_secret(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    """(format name, text as logged, the format's lines) for a corpus format with fresh values."""
    seed = draw(st.integers(min_value=1, max_value=10**9))
    fmt = formats(f"#{seed}")[draw(st.integers(min_value=0, max_value=FORMAT_COUNT - 1))]
    before, after = _words(draw, 4), _words(draw, 4)
    if fmt.multiline:
        prefix = draw(st.sampled_from(["", "2024-05-01T10:00:00.123456789Z stderr F ", "    "]))
        lines = [f"{prefix}{line}" for line in fmt.lines]
        text = "\n".join([before, *lines, after])
    elif draw(st.booleans()):
        text = json.dumps({"level": "error", "msg": f"{before} {fmt.lines[0]} {after}".strip()})
    else:
        text = f"{before} {fmt.lines[0]} {after}".strip()
    return fmt.name, text, list(fmt.secrets)


@SETTINGS
@given(logged_secret())
def test_a_generated_secret_of_any_kind_is_masked(case: tuple[str, str, list[str]]) -> None:
    name, text, secrets = case
    fmt = next(fmt for fmt in formats() if fmt.name == name)
    shown = redact(text)
    assert MASK in shown, (name, text)
    assert not leaks(type(fmt)(name=name, lines=fmt.lines, secrets=tuple(secrets)), shown), (name, shown)


_HEX = "0123456789abcdef"


@st.composite
def ordinary_value(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["uuid", "commit", "trace", "payload", "pod", "url", "number", "word"]))
    rng = draw(st.randoms(use_true_random=False))
    if kind == "uuid":
        return f"request_id={uuid.UUID(int=rng.getrandbits(128))}"
    if kind == "commit":
        return f"commit {''.join(rng.choice(_HEX) for _ in range(40))}"
    if kind == "trace":
        return f"trace_id={''.join(rng.choice(_HEX) for _ in range(32))} span_id={rng.getrandbits(64):016x}"
    if kind == "payload":
        return f"payload_id={base64.b64encode(rng.randbytes(9)).decode()} size={rng.randint(1, 9999)}"
    if kind == "pod":
        suffix = "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        return f"pod payments-api-{rng.getrandbits(40):010x}-{suffix} Ready"
    if kind == "url":
        path = "/".join(rng.choice(["v1", "charges", "users", "42", "items", "search"]) for _ in range(3))
        return f"GET https://api.example.com:8443/{path}?page={rng.randint(1, 9)}&limit=50 200"
    if kind == "number":
        return f"took {rng.randint(1, 99999)}ms bytes={rng.randint(1, 10**9)}"
    return draw(st.sampled_from(["token refresh scheduled", "password policy updated", "API key rotation done"]))


@SETTINGS
@given(st.lists(ordinary_value(), min_size=1, max_size=6), st.sampled_from(["", "2024-05-01T10:00:00Z INFO svc "]))
def test_a_generated_ordinary_line_is_left_alone(values: list[str], prefix: str) -> None:
    line = prefix + " ".join(values)
    assert redact(line) == line
    block = "\n".join([line, line.upper(), "done"])
    assert redact(block) == block


def test_every_format_with_fresh_values_is_masked_in_every_shape() -> None:
    """Every kind at least once per run, whatever hypothesis draws: the corpus again with other random values."""
    from tests.redact_corpus import shaped_lines

    for fmt in formats("#fresh"):
        for shape, lines in shaped_lines(fmt):
            shown = redact("\n".join(lines))
            assert not leaks(fmt, shown), (fmt.name, shape, shown)
