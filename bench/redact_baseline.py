"""The redaction rules as they were before the secrets corpus (main at eff98e2), kept as the bench's baseline.

Not used by the desk: ``bench_redact.py`` times the current ``incident_desk.core.redaction.face`` against this.
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"

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
