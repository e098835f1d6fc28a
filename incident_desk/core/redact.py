"""Mask secrets in log lines before they leave the server.

Incident logs are pasted into a model's context and often into chat transcripts; a bearer token or a database
password caught in a stack trace must not travel with them. The patterns favour false positives over leaks.
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization headers and bare bearer/basic credentials.
    (re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1\2{MASK}"),
    # Passwords inside URLs: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@"), rf"\1{MASK}@"),
    # key=value and key: value pairs whose name says secret.
    (
        re.compile(
            r"(?i)\b((?:[a-z0-9_.-]*?)(?:api[_-]?key|apikey|secret|passw(?:or)?d|passwd|pwd|access[_-]?key|"
            r"private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|session[_-]?token|token)"
            r"[\"']?\s*[:=]\s*[\"']?)([^\s\"'&,;]+)"
        ),
        rf"\1{MASK}",
    ),
    # Well-known key shapes, wherever they appear.
    (re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"), MASK),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),
)

# Cheap pre-check so clean lines (the vast majority) skip the regex pass entirely.
_HINT = re.compile(r"(?i)bearer|basic|token|://|key|secret|pass|pwd|sk-|gh[pousr]_|github_pat|xox|AKIA|ASIA|AIza|eyJ")


def redact(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[REDACTED]``."""
    if not _HINT.search(text):
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
