"""Search patterns, matched in linear time by RE2 whatever their shape.

A model hunting through a log writes whatever regular expression comes to mind; with a backtracking engine one of
them, like ``(a|aa)+$``, can hold the interpreter for hours. RE2 has no backtracking, so a pattern costs time in
proportion to the text, and it releases the interpreter lock while it scans. It cannot do backreferences or
lookaround: those get an error that names the construct and says what to write instead.

Each pattern is compiled twice, from one reading of its source: ``line`` tests the text of one line as it is shown,
``block`` finds candidate lines in a block of raw bytes. In the block form ``^`` and ``$`` (and ``\\A``, ``\\z``)
mean a line's edges and no match can contain a newline, so a line matches ``line`` only where ``block`` finds a
match inside it. The pattern is also read for what it can consume (see ``SearchPattern``), which tells the search
which lines must be decoded and redacted before they are known not to match, and for the plain text every match
contains (``_required_literal``), which the search finds before it runs RE2.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from incident_desk.core import errors

if TYPE_CHECKING:
    import re2

MAX_PATTERN_LENGTH = 500

_FLAGS_RE2_KNOWS = frozenset("imsU")
_QUANTIFIERS = frozenset("*+?")


class PatternError(errors.Invalid, ValueError):
    """A pattern that cannot be searched for; the message names the problem and what to write instead."""


def _shown(pattern: str) -> str:
    """The pattern as an error shows it: quoted, capped when long."""
    return errors.echoed(pattern, "pattern", quoted=True)


def _re2() -> Any:
    """RE2, imported by the first search rather than at start: serving the first answer does not need it."""
    import re2

    return re2


def _options(*, block: bool) -> re2.Options:
    options = _re2().Options()
    options.log_errors = False  # RE2 would print its complaint to stderr through absl; the error says it instead
    options.never_capture = True  # only whether and where a match is, never its groups
    options.never_nl = block  # no match can contain a newline, so none spans two lines of a block
    options.max_mem = 64 << 20  # room for the DFA of a large pattern before RE2 falls back to its slower NFA
    return options


@dataclass(frozen=True)
class _Token:
    kind: str  # atom (consumes one character), edge (^ $ \A \z), word_edge (\b \B), flags, other
    source: str  # as written
    line: str  # as the line form compiles it
    block: str  # as the block form compiles it


def _unsupported(pattern: str, construct: str, instead: str) -> PatternError:
    return PatternError(
        f"Unsupported regular expression {_shown(pattern)}: {construct} is not supported, because searches run in "
        f"linear time and these constructs need backtracking. {instead}"
    )


def _tokens(pattern: str) -> Iterator[_Token]:
    """Split ``pattern`` into tokens, refusing what RE2 cannot do with a message that says what to write instead."""
    index, length = 0, len(pattern)
    while index < length:
        char = pattern[index]
        if char == "\\":
            token, index = _escape(pattern, index)
            if token is None:
                # \Q...\E: everything up to \E is literal text.
                end = pattern.find("\\E", index)
                stop = length if end < 0 else end
                for literal in pattern[index:stop]:
                    source = _re2().escape(literal)
                    yield _Token("atom", source, source, source)
                index = stop if end < 0 else end + 2
                continue
            yield token
        elif char == "[":
            end = _class_end(pattern, index)
            source = pattern[index:end]
            yield _Token("atom", source, source, source)
            index = end
        elif char == "(" and pattern.startswith("(?", index):
            token, index = _group_opening(pattern, index)
            yield token
        elif char in _QUANTIFIERS or (char == "{" and _repetition_end(pattern, index)):
            end = _repetition_end(pattern, index) if char == "{" else index + 1
            source = pattern[index:end]
            translated = "{0," + source[2:] if source.startswith("{,") else source
            index = end
            if pattern.startswith("+", index):
                raise _unsupported(
                    pattern,
                    f"the possessive quantifier {source}+",
                    f"Use the plain quantifier {source} instead.",
                )
            if pattern.startswith("?", index):  # lazy: the same lines match
                source += "?"
                translated += "?"
                index += 1
            yield _Token("other", source, translated, translated)
        elif char in "^$":
            yield _Token("edge", char, char, char)
            index += 1
        elif char == ".":
            yield _Token("atom", char, char, char)
            index += 1
        elif char in "()|":
            yield _Token("other", char, char, char)
            index += 1
        else:
            yield _Token("atom", char, char, char)
            index += 1


def _escape(pattern: str, index: int) -> tuple[_Token | None, int]:
    """The escape at ``index`` (a backslash) as a token, or None for the \\Q that starts literal text."""
    if index + 1 >= len(pattern):
        raise PatternError(f"Invalid regular expression {_shown(pattern)}: trailing backslash")
    letter = pattern[index + 1]
    source = pattern[index : index + 2]
    end = index + 2
    if letter == "Q":
        return None, end
    if letter in "123456789":
        raise _unsupported(
            pattern,
            f"the backreference {source}",
            "Write the repeated text itself, e.g. (error) \\1 as (error) error.",
        )
    if letter == "C":
        raise PatternError(
            f"Unsupported regular expression {_shown(pattern)}: \\C matches a single byte and can split a character; "
            "use . to match any character."
        )
    if letter == "A":
        return _Token("edge", source, source, "^"), end
    if letter in "zZ":
        return _Token("edge", source, "\\z", "$"), end
    if letter in "bB":
        return _Token("word_edge", source, source, source), end
    if letter in "xpP" and pattern.startswith("{", end):
        close = pattern.find("}", end)
        end = len(pattern) if close < 0 else close + 1
        source = pattern[index:end]
    elif letter == "x":
        end = index + 4
        source = pattern[index:end]
    elif letter in "uU":
        digits = 4 if letter == "u" else 8
        hex_digits = pattern[index + 2 : index + 2 + digits]
        if len(hex_digits) != digits or not all(c in "0123456789abcdefABCDEF" for c in hex_digits):
            raise PatternError(f"Invalid regular expression {_shown(pattern)}: \\{letter} needs {digits} hex digits")
        translated = "\\x{" + hex_digits + "}"
        return _Token("atom", pattern[index : index + 2 + digits], translated, translated), index + 2 + digits
    elif letter in "pP":
        end = index + 3
        source = pattern[index:end]
    return _Token("atom", source, source, source), end


def _class_end(pattern: str, index: int) -> int:
    """The index just past the character class that opens at ``index``."""
    position = index + 1
    if pattern.startswith("^", position):
        position += 1
    if pattern.startswith("]", position):  # a ] right after [ or [^ is literal
        position += 1
    while position < len(pattern):
        char = pattern[position]
        if char == "\\":
            position += 2
        elif char == "[" and pattern.startswith("[:", position):
            close = pattern.find(":]", position + 2)
            position = position + 1 if close < 0 else close + 2
        elif char == "]":
            return position + 1
        else:
            position += 1
    raise PatternError(f"Invalid regular expression {_shown(pattern)}: missing ] at the end of a character class")


def _repetition_end(pattern: str, index: int) -> int:
    """The index past a counted repetition ({3}, {2,}, {,5}, {2,5}) starting at ``index``, or 0 if it is text."""
    close = pattern.find("}", index)
    if close < 0:
        return 0
    low, _comma, high = pattern[index + 1 : close].partition(",")
    if not (low or high) or not (low.isdigit() or not low) or not (high.isdigit() or not high):
        return 0
    return close + 1


_GROUP_REFUSALS = (
    ("(?=", "lookahead (?=...)", "Write the text it looks for as part of the match, e.g. foo(?=bar) as foobar."),
    (
        "(?!",
        "negative lookahead (?!...)",
        "Match the lines without it and narrow them with a second search, or use a negated class such as [^x].",
    ),
    ("(?<=", "lookbehind (?<=...)", "Write the text it looks for as part of the match, e.g. (?<=id=)\\d+ as id=\\d+."),
    (
        "(?<!",
        "negative lookbehind (?<!...)",
        "Match the lines without it and narrow them with a second search, or use a negated class such as [^x].",
    ),
    ("(?>", "the atomic group (?>...)", "Use a plain group (?:...) instead."),
    ("(?P=", "the named backreference (?P=...)", "Write the repeated text itself."),
    ("(?(", "the conditional group (?(...)...)", "Use an alternation (a|b) instead."),
    ("(?#", "the comment (?#...)", "Leave the comment out."),
)


def _group_opening(pattern: str, index: int) -> tuple[_Token, int]:
    """A group opening with ``(?``: named and non-capturing groups, inline flags; refusing what RE2 cannot do."""
    for prefix, construct, instead in _GROUP_REFUSALS:
        if pattern.startswith(prefix, index):
            raise _unsupported(pattern, construct, instead)
    for prefix in ("(?P<", "(?<"):
        if pattern.startswith(prefix, index):
            close = pattern.find(">", index)
            end = len(pattern) if close < 0 else close + 1
            source = pattern[index:end]
            return _Token("other", source, source, source), end
    position = index + 2
    while position < len(pattern) and (pattern[position].isalpha() or pattern[position] == "-"):
        position += 1
    flags = pattern[index + 2 : position]
    closing = pattern[position : position + 1]
    if closing not in (")", ":"):
        return _Token("other", "(?", "(?", "(?"), index + 2  # let RE2 name what is wrong
    on, _, off = flags.partition("-")
    for flag in on + off:
        if flag == "u":
            continue
        if flag not in _FLAGS_RE2_KNOWS:
            raise PatternError(
                f"Unsupported regular expression {_shown(pattern)}: the inline flag {flag!r} is not supported "
                "(only i, m, s and U are); use ignoreCase for case-insensitive matching."
            )
    on, off = on.replace("u", ""), off.replace("u", "")
    source = pattern[index : position + 1]
    line = _flag_group(on, off, closing)
    # The block form is multi-line throughout, so ^ and $ keep meaning a line's edges.
    block = _flag_group(on, off.replace("m", ""), closing)
    return _Token("flags", source, line, block), position + 1


def _flag_group(on: str, off: str, closing: str) -> str:
    if not on and not off:
        return "(?:" if closing == ":" else ""
    return f"(?{on}{'-' + off if off else ''}{closing}"


@dataclass(frozen=True)
class SearchPattern:
    """A user's pattern in its two compiled forms, and what it can and cannot see of a line.

    ``mask_blind``: no match can touch the redaction mask, so a line whose raw text does not match cannot match
    once redacted, and lines need not be redacted before they are ruled out. ``replacement_blind``: no match can
    consume the U+FFFD that stands for bytes that are not UTF-8, so such lines need not be decoded first.
    """

    text: str
    ignore_case: bool
    line: Any  # re2 pattern (bytes) for the UTF-8 text of one line
    block: Any  # re2 pattern (bytes) for a block of raw lines, multi-line, never matching a newline
    block_source: str
    mask_blind: bool
    replacement_blind: bool
    literal: bytes | None = None  # UTF-8 text every match contains (see ``_required_literal``), if any
    prefilter: tuple[bytes, ...] | None = None  # raw bytes of which every match contains one (``_prefilter``)

    def matches(self, line_text: str) -> bool:
        return self.line.search(line_text.encode()) is not None

    def block_with(self, extra_source: str) -> Any:
        """The block form that also finds ``extra_source`` (e.g. what may be redacted), compiled once."""
        return _compile_block(f"(?:{self.block_source})|(?:{extra_source})")


# Shorter literals are common enough that finding them first would not skip much.
_MIN_LITERAL_BYTES = 3


def _literal_char(token: _Token) -> str | None:
    """The one character ``token`` stands for when it is plain text (``a``, ``\\.``), else None."""
    if token.kind != "atom":
        return None
    if len(token.source) == 1 and token.source != ".":
        return token.source
    if len(token.source) == 2 and token.source[0] == "\\" and not token.source[1].isalnum():
        return token.source[1]
    return None


def _required_literal(tokens: list[_Token]) -> bytes | None:
    """The longest run of plain text outside any group that every match contains, as UTF-8; None if there is none.

    A search finds it with a SIMD substring search far faster than RE2 finds a literal whose first byte is common
    (``n`` of ``needle``), and starts RE2 only on the line where it occurs. Conservative: a top-level alternation,
    or a case-insensitive flag anywhere, means no literal; a quantified character ends a run (kept when it must
    occur at least once, dropped when it may not); anything inside a group, and anything else, ends a run too.
    """
    runs: list[str] = []
    current: list[str] = []
    depth = 0

    def end_run() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    previous_was_literal = False
    for token in tokens:
        if token.kind == "flags":
            if "i" in token.source.partition("-")[0]:
                return None
            if token.source.endswith(":"):
                depth += 1
            end_run()
            previous_was_literal = False
            continue
        if token.kind == "other" and (token.source == "(" or token.source.startswith(("(?P<", "(?<"))):
            depth += 1
        elif token.kind == "other" and token.source == ")":
            depth -= 1
        elif token.kind == "other" and token.source == "|" and depth == 0:
            return None
        elif token.kind == "other" and token.source[0] in "*+?{":
            if previous_was_literal and _may_repeat_zero_times(token.source):
                current.pop()
            end_run()
            previous_was_literal = False
            continue
        char = _literal_char(token) if depth == 0 else None
        if char is None:
            end_run()
            previous_was_literal = False
        else:
            current.append(char)
            previous_was_literal = True
    end_run()
    best = max((run.encode() for run in runs), key=len, default=b"")
    return best if len(best) >= _MIN_LITERAL_BYTES else None


def _branches(tokens: list[_Token]) -> list[list[_Token]]:
    """The token lists of a top-level alternation's branches (one list when there is none)."""
    branches: list[list[_Token]] = [[]]
    depth = 0
    for token in tokens:
        opens = token.kind == "flags" and token.source.endswith(":")
        opens = opens or (token.kind == "other" and (token.source == "(" or token.source.startswith(("(?P<", "(?<"))))
        if opens:
            depth += 1
        elif token.kind == "other" and token.source == ")":
            depth -= 1
        elif token.kind == "other" and token.source == "|" and depth == 0:
            branches.append([])
            continue
        branches[-1].append(token)
    return branches


def _prefilter(tokens: list[_Token], *, ignore_case: bool) -> tuple[bytes, ...] | None:
    """Byte strings of which every match contains at least one, for the search to find before RE2 runs.

    Each branch of a top-level alternation must have its required literal; under ignore-case, each literal
    stands for the ASCII case variants of a short window of it (see ``core.literals.case_variants``).
    """
    from incident_desk.core.search.literals import MAX_LITERALS, case_variants

    found: list[bytes] = []
    for branch in _branches(tokens):
        literal = _required_literal(branch)
        if literal is None:
            return None
        variants = case_variants(literal) if ignore_case else (literal,)
        if variants is None:
            return None
        found.extend(variants)
    return tuple(dict.fromkeys(found)) if len(found) <= MAX_LITERALS else None


def _may_repeat_zero_times(quantifier: str) -> bool:
    if quantifier[0] in "*?":
        return True
    if quantifier[0] == "+":
        return False
    low = quantifier[1:].split(",")[0].rstrip("}?")
    return not low or int(low) == 0


@functools.lru_cache(maxsize=64)
def _compile_block(source: str) -> Any:
    return _re2().compile(source.encode(), _options(block=True))


@functools.lru_cache(maxsize=256)
def _consumes(atom: str, char: str) -> bool:
    """Whether the one-character ``atom`` can match ``char``; True when in doubt."""
    try:
        return _re2().compile(atom, _options(block=False)).fullmatch(char) is not None
    except _re2().error:
        return True


def compile_pattern(text: str, *, ignore_case: bool = False, mask: str = "[REDACTED]") -> SearchPattern:
    """Compile a user's pattern, or raise PatternError naming what is wrong with it."""
    if not text:
        raise PatternError("Invalid regular expression '': the pattern is empty")
    if len(text) > MAX_PATTERN_LENGTH:
        raise PatternError(f"Invalid regular expression: longer than {MAX_PATTERN_LENGTH} characters")
    tokens = list(_tokens(text))
    case = "(?i)" if ignore_case else ""
    line_source = case + "".join(token.line for token in tokens)
    block_source = "(?m)" + case + "(?:" + "".join(token.block for token in tokens) + ")"
    try:
        line = _re2().compile(line_source.encode(), _options(block=False))
        _compile_block(block_source)
    except _re2().error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(f"Invalid regular expression {_shown(text)}: {reason}") from None
    atoms = [token.line for token in tokens if token.kind == "atom"]
    word_edges = any(token.kind == "word_edge" for token in tokens)
    # A match that touches the mask either consumes one of its brackets or lies inside it (or sees it through
    # \b or \B); ruling out all three means redaction can only take matches away, never add one.
    brackets = any(_consumes(atom, bracket) for atom in atoms for bracket in mask[:1] + mask[-1:])
    inside = line.search(f"x{mask}x".encode()) is not None
    return SearchPattern(
        text=text,
        ignore_case=ignore_case,
        line=line,
        block=_compile_block(block_source),
        block_source=block_source,
        mask_blind=not (word_edges or brackets or inside),
        replacement_blind=not any(_consumes(atom, "\ufffd") for atom in atoms),
        literal=None if ignore_case else _required_literal(tokens),
        prefilter=_prefilter(tokens, ignore_case=ignore_case),
    )
