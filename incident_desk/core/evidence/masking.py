"""A chunk of log lines with their variable parts masked, by array operations over its bytes (no Python per line).

A token is a run of bytes between delimiters (blanks and the punctuation of ``DELIMITERS``). A token holding a
digit is a number, an id, a hex string, an address, a time or a duration: it is masked whole. The bytes between
double quotes on a line are a quoted value: masked too. Each masked run becomes one ``MASK`` byte, so lines that
differ only in those parts become the same bytes, and a ``Counter`` over the masked lines groups them at C speed.
"""

from __future__ import annotations

import functools
from typing import Any

MASK = 0x1F  # a control byte no log line is expected to hold: shown as ``<*>``
MASK_BYTE = bytes([MASK])
DELIMITERS = b" \t\n=:,;()[]{}<>'\"/|@"
_DELIMITER, _DIGIT, _QUOTE = 1, 2, 4


def _np() -> Any:
    import numpy

    return numpy


@functools.cache
def _classes() -> bytes:
    """Each byte's classes, as a ``bytes.translate`` table (a C pass, far faster than an array lookup)."""
    table = bytearray(256)
    for byte in DELIMITERS:
        table[byte] |= _DELIMITER
    for byte in range(0x30, 0x3A):
        table[byte] |= _DIGIT
    table[0x22] |= _QUOTE
    return bytes(table)


def mask_lines(chunk: bytes) -> bytes:
    """``chunk`` (whole lines, each ending with a newline) with every number-like token and quoted value replaced
    by one ``MASK`` byte; newlines are kept, so the masked chunk has the same lines in the same order."""
    np = _np()
    if not chunk:
        return b""
    data = np.frombuffer(chunk, dtype=np.uint8)
    classes = np.frombuffer(chunk.translate(_classes()), dtype=np.uint8)
    delimiter = (classes & _DELIMITER).view(np.bool_)
    token = np.cumsum(delimiter, dtype=np.intp)  # intp: ``take`` below converts nothing
    numeric = np.zeros(int(token[-1]) + 1, dtype=np.uint8)
    numeric[token[(classes & _DIGIT).view(np.bool_)]] = 1
    masked = numeric.take(token).view(np.bool_)
    masked &= ~delimiter
    if chunk.find(b'"') >= 0:
        quote = (classes & _QUOTE).view(np.bool_)
        quotes = np.cumsum(quote, dtype=np.int32)
        newline = data == 0x0A
        if np.any(quotes[newline] & 1):  # a line with an odd count: count each line's quotes from its start
            quotes -= np.maximum.accumulate(np.where(newline, quotes, 0))
        inside = (quotes & 1).astype(np.bool_)
        masked |= inside & ~quote & ~newline
    run_start = masked.copy()
    run_start[1:] &= ~masked[:-1]
    keep = ~masked
    keep |= run_start
    shown = data.copy()
    shown[run_start] = MASK
    return bytes(shown[keep].tobytes())
