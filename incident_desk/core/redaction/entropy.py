"""The value's own shape: a long run that reads as random is masked wherever it stands, name or no name.

Secret scanners flag strings by length and character-class entropy; so does this, tuned so that what ordinary logs
carry stays: a run must be 32 characters or more of base64/base64url, hold upper case, lower case and a digit,
carry at least 4 bits of entropy per character, not be mostly words (identifiers like
``PaymentsApiDeploymentController2024``), not be a path (few slashes), and not follow a digest's name
(``SHA256:``). Hex ids (trace ids, commit hashes), UUIDs and pod names have no upper case and stay.
"""

from __future__ import annotations

import math
from collections import Counter

from incident_desk.core.linear import LinearPattern
from incident_desk.core.redaction.shapes import MASK

MIN_RANDOM_CHARS = 32
RANDOM_RUN_SOURCE = rb"[A-Za-z0-9+/_-]{32,}={0,2}"
_RUN = LinearPattern(RANDOM_RUN_SOURCE)
# Each byte of a text as "a" when it can be part of a run, else " ": a run of 32 is then one bytes.find.
_RUN_IMAGE = bytes(
    ord("a") if chr(byte).isascii() and (chr(byte).isalnum() or chr(byte) in "+/_-") else ord(" ")
    for byte in range(256)
)
_LONG_RUN = b"a" * MIN_RANDOM_CHARS
_MIN_BITS_PER_CHAR = 4.0
_DIGESTS = (b"sha1:", b"sha256:", b"sha384:", b"sha512:", b"md5:", b"sha256-", b"sha384-", b"sha512-")
# Lower-case letters as "a", everything else as a space: the words of an identifier, split in C.
_LOWER_AS_A = bytes(ord("a") if ord("a") <= byte <= ord("z") else ord(" ") for byte in range(256))


def looks_random(run: bytes) -> bool:
    """Whether a run of base64(url) characters reads as a random secret rather than an id, a word or a path."""
    body = run.rstrip(b"=")
    if len(body) < MIN_RANDOM_CHARS or body.count(b"/") > len(body) // 16:
        return False
    if body.lower() == body or body.upper() == body or len(body.translate(None, b"0123456789")) == len(body):
        return False
    if _in_long_words(body) * 10 >= len(body) * 3:
        return False
    counts = Counter(body)
    bits = -sum(count / len(body) * math.log2(count / len(body)) for count in counts.values())
    return bits >= _MIN_BITS_PER_CHAR


def _in_long_words(body: bytes) -> int:
    """How many characters stand in runs of five or more lower-case letters (the words of an identifier)."""
    return sum(len(word) for word in body.translate(_LOWER_AS_A).split() if len(word) >= 5)


def mask_random_runs(text: bytes) -> bytes:
    """``text`` with every run that looks random masked; the same object if none."""
    if text.translate(_RUN_IMAGE).find(_LONG_RUN) < 0:  # no run long enough: one translate and one find, in C
        return text
    pieces: list[bytes] = []
    last = 0
    for spans in _RUN.finditer(text):
        start, end = spans[0]
        if text[max(0, start - 7) : start].lower().endswith(_DIGESTS) or not looks_random(text[start:end]):
            continue
        pieces += [text[last:start], MASK]
        last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return b"".join(pieces)
