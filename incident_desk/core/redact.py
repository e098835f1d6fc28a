"""Mask secrets in log lines before they leave the server.

Incident logs are pasted into a model's context and often into chat transcripts; a bearer token or a database
password caught in a stack trace must not travel with them. The patterns favour false positives over leaks.
They never cross a newline, so redacting a block of lines equals redacting each line, and each runs only when
one of its literal triggers occurs in the text: clean blocks cost one lower-casing and a few substring tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MASK = "[REDACTED]"

# Matched anywhere in a name, so env-dump style NAME=value lines are caught by their suffix too:
# INCIDENT_DESK_HTTP_TOKEN=, INCIDENT_DESK_PROVIDER_API_KEY=, INCIDENT_DESK_SEALING_KEY=. Alternatives are grouped
# by first letter: the key=value rule tries each at every position of a triggered block, so fewer means faster.
_KEY_NAMES = (
    r"(?:api|access|private)[_-]?key|s(?:ecret|ealing[_-]?key|igning[_-]?key)|p(?:assw(?:or)?d|wd)|token|credentials?"
)

# (literal triggers, lower case; pattern; replacement)
_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    # Authorization headers and bare bearer/basic credentials.
    (
        ("bearer", "basic", "token"),
        re.compile(r"(?i)\b(bearer|basic|token)([ \t]+)[A-Za-z0-9._~+/=-]{8,}"),
        rf"\1\2{MASK}",
    ),
    # Passwords inside URLs: scheme://user:password@host
    (("://",), re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@"), rf"\1{MASK}@"),
    # key=value and key: value pairs whose name says secret (client_secret=, auth_token: ...).
    (
        ("key", "secret", "pass", "pwd", "token", "credential"),
        re.compile(rf"(?i)((?:{_KEY_NAMES})[\"']?[ \t]*[:=][ \t]*[\"']?)([^\s\"'&,;]+)"),
        rf"\1{MASK}",
    ),
    # Well-known key shapes, wherever they appear.
    (("sk-",), re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}"), MASK),
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
        MASK,
    ),
    (("xox",), re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MASK),
    (("akia", "asia"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MASK),
    (("eyj",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),
)


def redact(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[REDACTED]``."""
    lowered = text.lower()
    for triggers, pattern, replacement in _RULES:
        if any(trigger in lowered for trigger in triggers):
            text = pattern.sub(replacement, text)
    return text


TRIGGERS: tuple[str, ...] = tuple(sorted({trigger for triggers, _rule, _replacement in _RULES for trigger in triggers}))

# Characters outside ASCII whose lower case holds an ASCII letter, so they can complete a trigger in
# ``text.lower()``: KELVIN SIGN lowers to "k", LATIN CAPITAL LETTER I WITH DOT ABOVE to "i" and a combining dot.
_LOWERING_TO_ASCII = ("\u0130", "\u212a")


@dataclass(frozen=True)
class Redaction:
    """A redactor, with what a line must hold for it to change anything (so a search can skip the rest)."""

    apply: Callable[[str], str]
    mask: str
    triggers: tuple[str, ...]

    def trigger_pattern(self) -> str:
        """An RE2 pattern found in every line that ``apply`` may change (and in some it leaves alone)."""
        words = "|".join(re.escape(trigger) for trigger in self.triggers)
        return f"(?i:{words})|[{''.join(_LOWERING_TO_ASCII)}]"


SECRETS = Redaction(apply=redact, mask=MASK, triggers=TRIGGERS)
