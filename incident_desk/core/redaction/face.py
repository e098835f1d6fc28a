"""Mask secrets in log lines before they leave the server.

Incident logs are pasted into a model's context and often into chat transcripts; a bearer token or a database
password caught in a stack trace must not travel with them. The rules favour false positives over leaks.

Log content is written by whoever reaches the log, so every pattern runs on RE2 (``core.linear``): a crafted line
costs time linear in its length, never the seconds a backtracking engine can spend on one. Secrets are found by
three signals: a telling name beside a value (``core.redaction.rules``), a known token shape
(``core.redaction.vendors``, ``core.redaction.keys``), and a value that reads as random
(``core.redaction.entropy``); ``core.redaction.engine`` applies them.

Rules never cross a newline, with three exceptions that only ever mask more:

- a private key block (``-----BEGIN … PRIVATE KEY-----``) masks every line up to its END marker, and the lines
  just before an END marker whose BEGIN is not in the text (a window or page that starts inside a key);
- key material on its own, like a PEM body line (base64 of 20 characters or more with upper case, lower case and
  digits, alone on its line or last after a log prefix), is masked without any trigger, because no literal can
  recognise it. A line without a trigger can therefore still change;
- a line that ends with a secret's name and no value masks the next line's single token
  (``core.redaction.multiline``); readers that start mid-log pass the line before as context.

So redacting a block of lines masks at least what redacting each line alone does. Limits, said plainly: a key
body seen one line at a time (a search hit) shows its last line when that line is shorter than 20 characters or
lacks one of the three character classes (a few bytes of key); a secret shorter than 32 characters with no
telling name, place or known prefix passes. Case is folded for ASCII letters only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import re2

from incident_desk.core.redaction.engine import holds_trigger, redact_bytes, redact_line_bytes, rules_for_line
from incident_desk.core.redaction.entropy import MIN_RANDOM_CHARS, RANDOM_RUN_SOURCE
from incident_desk.core.redaction.keys import MIN_KEY_CHARS
from incident_desk.core.redaction.rules import RULES

MASK = "[REDACTED]"


def redact(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[REDACTED]``."""
    # surrogatepass: a lone surrogate (text decoded with surrogateescape) goes through as bytes no rule matches.
    data = text.encode("utf-8", "surrogatepass")
    if "\n" in text or len(text) >= _ONE_LINE_AS_TEXT:
        redacted = redact_bytes(data)
    elif holds_trigger(data):
        redacted = redact_line_bytes(data, rules_for_line(text.lower()))
    elif _may_end_in_key_material(text) or _has_long_token(text):
        redacted = redact_line_bytes(data, [])
    else:
        return text
    if redacted is data:
        return text
    try:
        return redacted.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a rule's span ended inside a character: never seen, but never crash on it
        return redacted.decode("utf-8", "replace")


# A line shorter than this is checked for triggers as text first (one line: a search hit, a short read).
_ONE_LINE_AS_TEXT = 16 * 1024
_BASE64_TEXT = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _may_end_in_key_material(line: str) -> bool:
    """Whether the line's last characters (before a carriage return) could be key material: the cheap part of
    the check, so a clean line never needs encoding."""
    end = len(line) - 1 if line.endswith("\r") else len(line)
    return end >= MIN_KEY_CHARS and not line[end - MIN_KEY_CHARS : end].strip(_BASE64_TEXT)


def _has_long_token(line: str) -> bool:
    """Whether a run that could be judged random can be in the line: a whitespace-separated token as long, with
    both cases (hex ids, UUIDs and pod names are one case, and most tokens are short)."""
    return len(line) >= MIN_RANDOM_CHARS and any(
        len(token) >= MIN_RANDOM_CHARS and not token.islower() and not token.isupper() for token in line.split()
    )


# What mask_key_material looks for with no trigger at all: a long base64 run at the end of a line.
_KEY_MATERIAL_SOURCE = rf"(?m:[A-Za-z0-9+/=]{{{MIN_KEY_CHARS},}}\r?$)"


@dataclass(frozen=True)
class Redaction:
    """A redactor, with what a line must hold for it to change anything (so a search can skip the rest)."""

    apply: Callable[[str], str]
    mask: str
    triggers: tuple[str, ...]  # literals, found in any case
    shapes: tuple[str, ...] = ()  # RE2 patterns of rules whose literal is too common to look for

    def trigger_pattern(self) -> str:
        """An RE2 pattern found in every line that ``apply`` may change (and in some it leaves alone)."""
        words = "|".join(re2.escape(trigger) for trigger in self.triggers)
        shapes = "".join(f"|(?:{shape})" for shape in self.shapes)
        return f"(?i:{words}){shapes}|{_KEY_MATERIAL_SOURCE}"


SECRETS = Redaction(
    apply=redact,
    mask=MASK,
    triggers=tuple(sorted({trigger for rule in RULES if not rule.by_shape for trigger in rule.triggers})),
    shapes=(*(rule.pattern.source.decode() for rule in RULES if rule.by_shape), RANDOM_RUN_SOURCE.decode()),
)

# The last statement: app.py reads this module as usable only once its import has finished (another thread may
# still be running it, and a module being imported is already in sys.modules).
IMPORT_FINISHED = True
