"""Secret redaction of log lines."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from incident_desk.core.redaction import engine as redact_module
from incident_desk.core.redaction.face import MASK, redact


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("Authorization: Bearer eyZabcdefghijklmnop", "eyZabcdefghijklmnop"),
        ("retrying with token abcdefgh12345678", "abcdefgh12345678"),
        ("dsn=postgres://app:hunter2secret@db:5432/main", "hunter2secret"),
        ("api_key=AbC123xyz987", "AbC123xyz987"),
        ('"client_secret": "s3cr3t-value"', "s3cr3t-value"),
        ("PASSWORD: letmein99", "letmein99"),
        ("using sk-ant-api03-abcdefghijklmnopqrstuvwx", "sk-ant-api03-abcdefghijklmnopqrstuvwx"),
        ("push with ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123"),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
        ("aws AKIAABCDEFGHIJKLMNOP in env", "AKIAABCDEFGHIJKLMNOP"),
        ("jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4", "SflKxwRJSMeKKF2QT4"),
        # Environment dumps: NAME=value as `env` prints it, and NAME = value as print(k, "=", v) does.
        ("INCIDENT_DESK_SEALING_KEY=sealing-SECRET-789", "sealing-SECRET-789"),
        ("INCIDENT_DESK_SEALING_KEY = sealing-SECRET-789", "sealing-SECRET-789"),
        ('{"sealing-key": "sealing-SECRET-789"}', "sealing-SECRET-789"),
        ("INCIDENT_DESK_HTTP_TOKEN=desk-bearer-SECRET-123", "desk-bearer-SECRET-123"),
        ("INCIDENT_DESK_HTTP_TOKEN = desk-bearer-SECRET-123", "desk-bearer-SECRET-123"),
        ("INCIDENT_DESK_PROVIDER_API_KEY=plainkeyvalue-SECRET-456", "plainkeyvalue-SECRET-456"),
        ("export PAYMENTS_SIGNING_KEY='signing-SECRET-1'", "signing-SECRET-1"),
        ("apikey: k-SECRET-2", "k-SECRET-2"),
        ("db passwd=pw-SECRET-3", "pw-SECRET-3"),
    ],
)
def test_secrets_are_masked(line: str, secret: str) -> None:
    cleaned = redact(line)
    assert secret not in cleaned
    assert MASK in cleaned


def test_clean_lines_are_untouched_and_newlines_are_kept() -> None:
    text = "11:02:44 search-api WARN index segment merge running\n11:02:51 p99 latency 840ms (SLO 500ms)\n"
    assert redact(text) == text
    block = "token: abcdefgh1234\nnext line\npassword=x\n"
    assert redact(block) == "".join(redact(line + "\n") for line in block.splitlines())
    assert redact(block).count("\n") == 3


def test_line_endings_survive_redaction() -> None:
    """CRLF logs keep their carriage returns: a rule that masks to the end of a line stops before it."""
    lines = [
        "password=hunter2 and more\r",
        "Cookie: session=abc123def456\r",
        'Authorization: Digest username="bob", response="0f1e2d3c"\r',
        '"key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\r',
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\r",
    ]
    for line in lines:
        masked = redact(line)
        assert MASK in masked and masked.endswith("\r"), line
        assert redact(line + "\nnext\n") == masked + "\nnext\n"


def test_a_line_whose_lower_case_is_longer_is_still_masked() -> None:
    """Case-insensitive rules run on the lower-cased line when it lines up with the original; "İ" does not."""
    line = "İstanbul DB_PASSWORD=Hunter2Secret99 user=app"
    assert len(line.lower()) != len(line)
    assert redact(line) == "İstanbul DB_PASSWORD=[REDACTED]"
    assert redact(line + "\nİ token: abcdefgh12345678\n") == "İstanbul DB_PASSWORD=[REDACTED]\nİ token: [REDACTED]\n"


def test_a_private_key_block_is_masked_whole_and_keeps_its_lines() -> None:
    body = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + "x" * 12, "Q2x9", "AbCd=="]
    block = "\n".join(["start", "-----BEGIN RSA PRIVATE KEY-----", *body, "-----END RSA PRIVATE KEY-----", "end"])
    assert redact(block).split("\n") == [
        "start",
        "-----BEGIN RSA PRIVATE KEY-----",
        MASK,
        MASK,
        MASK,
        "-----END RSA PRIVATE KEY-----",
        "end",
    ]
    # A text that starts inside the key (a window's edge) still loses the body before the END marker.
    tail = "\n".join([*body[1:], "-----END RSA PRIVATE KEY-----", "end"])
    assert redact(tail) == "\n".join([MASK, MASK, "-----END RSA PRIVATE KEY-----", "end"])
    # And one that stops inside it, the body after the BEGIN marker.
    head = "\n".join(["start", "-----BEGIN RSA PRIVATE KEY-----", *body[:2]])
    assert redact(head) == "\n".join(["start", "-----BEGIN RSA PRIVATE KEY-----", MASK, MASK])


def test_every_rule_applies_whole_replacements() -> None:
    """Each rule's replacement builds text from its match's groups; none lets a missing group show as "None"."""
    from incident_desk.core.redaction.engine import _apply
    from incident_desk.core.redaction.rules import RULES

    line = b'Authorization: Digest username="bob" password=hunter2 token=abcdefgh1234 redis://:pw@cache:6379'
    for rule in RULES:
        masked, _lowered = _apply(rule, line, line.lower())
        assert b"None" not in masked
    assert all(callable(rule.replace) for rule in RULES)


class _RecordingTriggers(list[Any]):
    """The top-level trigger list, noting whenever a caller goes through it one trigger at a time."""

    walked = 0

    def __iter__(self) -> Iterator[Any]:
        type(self).walked += 1
        return super().__iter__()


def test_a_large_block_holding_no_trigger_is_cleared_by_one_search_not_one_test_per_trigger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Trigger by trigger, only the lines that hold one are tested (as text); a clean block never is.
    monkeypatch.setattr(redact_module, "_TOP_TEXT_TRIGGERS", _RecordingTriggers(redact_module._TOP_TEXT_TRIGGERS))
    _RecordingTriggers.walked = 0
    clean = "11:02:44 search-api WARN index segment merge running\n11:02:51 search-api INFO p99 latency 840ms\n" * 200
    assert redact(clean) == clean
    assert _RecordingTriggers.walked == 0
    assert redact(clean + "11:02:52 login ok token=abc123\n").endswith(f"token={MASK}\n")
    assert _RecordingTriggers.walked == 1


def test_text_that_utf8_cannot_hold_is_still_redacted() -> None:
    """A lone surrogate (text decoded with surrogateescape) cannot go to RE2: the per-trigger look does the work."""
    assert redact("build \udcff token=abc123") == f"build \udcff token={MASK}"
    filler = "11:02:44 search-api WARN index segment merge running\n" * 400
    block = redact(f"a\udcff\n{filler}b password=hunter2\n")
    assert block.startswith(f"a\udcff\n{filler}b password=") and "hunter2" not in block
