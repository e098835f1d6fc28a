"""Private key bodies that span lines, and key material alone at the end of a line.

No literal recognises a line of base64 key body, so these look at shapes: a BEGIN/END marker pair around body
lines, and a long base64 run with upper case, lower case and digits ending a line. Each works in one pass over
the lines it is given, so a window full of markers costs no more than one full of log.
"""

from __future__ import annotations

import bisect

from incident_desk.core.linear import compile_linear
from incident_desk.core.redaction.shapes import MASK

_BASE64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_DIGITS = b"0123456789"
MIN_KEY_CHARS = 20  # a PEM body line has 64; its last line is shorter, and leaks below this
# Each byte of a text as "a" (base64 and "="), "n" (a line end) or " " (anything else): a long base64 run at the
# end of a line is then one bytes.find in C.
_KEY_MATERIAL_IMAGE = bytes(
    ord("a") if byte in _BASE64_CHARS + b"=" else ord("n") if byte in b"\r\n" else ord(" ") for byte in range(256)
)
_KEY_MATERIAL_AT_END = b"a" * MIN_KEY_CHARS + b"n"

_KEY_BEGIN = compile_linear(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = compile_linear(rb"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PUTTY_PRIVATE_LINES = compile_linear(rb"private-lines:[ \t]*(\d{1,4})")
_PEM_HEADER = compile_linear(rb"[A-Za-z][A-Za-z0-9-]*: ")
MAX_KEY_LINES = 1000  # a 16384-bit RSA key is about 200 lines; more between markers is not one key


def looks_like_key(token: bytes) -> bool:
    """Base64 with upper case, lower case and a digit, and not a path (few slashes)."""
    body = token.rstrip(b"=")
    return (
        len(token) - len(body) <= 2
        and bool(body)
        and not body.translate(None, _BASE64_CHARS)
        and body.lower() != body
        and body.upper() != body
        and len(body.translate(None, _DIGITS)) < len(body)
        and token.count(b"/") <= len(token) // 16
    )


def mask_key_material(line: bytes) -> bytes:
    """Mask the last token of a line (maybe its only one) if it looks like base64 key material."""
    end = len(line) - 1 if line.endswith(b"\r") else len(line)
    start = max(line.rfind(b" ", 0, end), line.rfind(b"\t", 0, end)) + 1
    if end - start >= MIN_KEY_CHARS and looks_like_key(line[start:end]):
        return line[:start] + MASK + line[end:]
    return line


def mask_key_material_in_block(text: bytes) -> bytes:
    """``mask_key_material`` on every line of a block, looking only at lines that end in a long base64 run."""
    image = text.translate(_KEY_MATERIAL_IMAGE) + b"n"
    found = image.find(_KEY_MATERIAL_AT_END)
    if found == -1:
        return text
    pieces: list[bytes] = []
    last = 0
    while found != -1:
        start = text.rfind(b"\n", 0, found) + 1
        end = text.find(b"\n", found)
        end = len(text) if end == -1 else end
        masked = mask_key_material(text[start:end])
        if masked is not text:
            pieces += [text[last:start], masked]
            last = end
        found = image.find(_KEY_MATERIAL_AT_END, end + 1)
    if not pieces:
        return text
    pieces.append(text[last:])
    return b"".join(pieces)


def mask_key_blocks(lines: list[bytes], lowered_lines: list[bytes]) -> None:
    """Mask private key bodies that span lines, in place, keeping the markers and the number of lines.

    Between a BEGIN and its END every line goes. A BEGIN without its END (the text stops inside the key) masks
    the lines after it that look like the body; an END without its BEGIN (the text starts inside the key), the
    lines before it. A body line looks like the marker's own line: the same log prefix, then base64 or a header.
    """
    marked = [index for index, lowered in enumerate(lowered_lines) if lowered.find(b"private") >= 0]
    begins = {index: _KEY_BEGIN.search(lines[index]) for index in marked}
    ends = {index: _KEY_END.search(lines[index]) for index in marked}
    end_lines = [index for index in marked if ends[index] is not None]
    handled_ends: set[int] = set()
    covered = 0  # lines before this were already walked by a forward scan
    for index in marked:
        putty = _PUTTY_PRIVATE_LINES.search(lowered_lines[index])
        if putty is not None:
            count = int(lowered_lines[index][putty[1][0] : putty[1][1]])
            _mask_lines(lines, range(index + 1, min(len(lines), index + 1 + count)))
            continue
        begin = begins[index]
        if begin is None or ends[index] is not None:
            continue
        following = bisect.bisect_right(end_lines, index)
        end = end_lines[following] if following < len(end_lines) else None
        if end is not None and end < index + MAX_KEY_LINES:
            _mask_lines(lines, range(index + 1, end))
            handled_ends.add(end)
            continue
        if lines[index][begin[0][1] :].strip():
            continue  # the key goes on within this line (escaped newlines): the one-line rule has it
        prefix = len(lines[index][: begin[0][0]].split())
        following = max(index + 1, covered)
        while following < len(lines) and _looks_like_body(lines[following], prefix):
            following += 1
        _mask_lines(lines, range(index + 1, following))
        covered = following
    reached = len(lines)  # lines from this on were already walked by a backward scan
    for index in reversed(end_lines):
        end_marker = ends[index]
        if index in handled_ends or begins[index] is not None or end_marker is None:
            continue
        before = lines[index][: end_marker[0][0]]
        if before and not before[-1:].isspace():
            continue  # the body ends within this line (escaped newlines): the one-line rule has it
        prefix = len(before.split())
        preceding = min(index, reached)
        while preceding > 0 and _looks_like_body(lines[preceding - 1], prefix):
            preceding -= 1
        _mask_lines(lines, range(preceding, index))
        reached = preceding


def _looks_like_body(line: bytes, prefix: int) -> bool:
    """Whether ``line`` can be a key body line after ``prefix`` tokens of log prefix: base64, a header, blank."""
    tokens = line.split()
    if not tokens or (prefix and len(tokens) == prefix):
        return True
    rest = tokens[prefix:]
    if len(rest) == 1:
        body = rest[0].rstrip(b"=")
        if len(rest[0]) - len(body) <= 2 and body and not body.translate(None, _BASE64_CHARS):
            return True
    return _PEM_HEADER.match(b" ".join(rest)) is not None


def _mask_lines(lines: list[bytes], indexes: range) -> None:
    for index in indexes:
        line = lines[index]
        if line.strip():
            indent = len(line) - len(line.lstrip())
            lines[index] = line[:indent] + MASK + (b"\r" if line.endswith(b"\r") else b"")
