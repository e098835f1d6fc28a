"""Mask secrets in log lines before they leave the server.

Incident logs are pasted into a model's context and often into chat transcripts; a bearer token or a database
password caught in a stack trace must not travel with them. The rules favour false positives over leaks.

Speed matters: every line the desk shows goes through here. Each rule names literal triggers (lower case) and runs
only on the lines that hold one of them, so a clean line costs a few substring tests; a trigger that contains
another (``sshpass`` holds ``pass``) is only looked for where the shorter one was found. Case-insensitive rules
run case-sensitively on the lower-cased line (CPython's ``re`` is many times slower with IGNORECASE), and give
back the original text of what they keep. Redacting a block of lines finds the triggers in the whole block at
once, then works on the lines that hold them; callers with many lines should pass them as one block.

Rules never cross a newline, with two exceptions that only ever mask more:

- a private key block (``-----BEGIN … PRIVATE KEY-----``) masks every line up to its END marker, and the lines
  just before an END marker whose BEGIN is not in the text (a window or page that starts inside a key);
- key material on its own, like a PEM body line (base64 of 20 characters or more with upper case, lower case and
  digits, alone on its line or last after a log prefix), is masked without any trigger, because no literal can
  recognise it. A line without a trigger can therefore still change.

So redacting a block of lines masks at least what redacting each line alone does. Limits, said plainly: a key
body seen one line at a time (a search hit) shows its last line when that line is shorter than 20 characters or
lacks one of the three character classes (a few bytes of key); unknown vendor formats with no telling name pass.
"""

from __future__ import annotations

import bisect
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Protocol

import re2

MASK = "[REDACTED]"


class Groups(Protocol):
    """A match's groups by number: an ``re.Match``, or the same groups read back from the original line."""

    def __getitem__(self, index: int, /) -> str | None: ...


# A replacement builds the text that stands for a match from its groups; any rule works with ``pattern.sub``.
Replacement = Callable[[Groups], str]
Rule = tuple[tuple[str, ...], re.Pattern[str], Replacement]


def _masked(groups: Groups) -> str:
    return MASK


def _keep(*kept: int) -> Replacement:
    """Keep group ``kept[0]`` before the mask and any further kept groups after it."""

    def replace(groups: Groups) -> str:
        return (groups[kept[0]] or "") + MASK + "".join(groups[index] or "" for index in kept[1:])

    return replace


def _mask_value(groups: Groups) -> str:
    """Keep the name and separator (group 1), and the quotes around a quoted value (group 2)."""
    name, value = groups[1] or "", groups[2] or ""
    if value[:1] in ("'", '"'):
        closing = value[0] if len(value) > 1 and value.endswith(value[0]) else ""
        return f"{name}{value[0]}{MASK}{closing}"
    if value.startswith('\\"'):
        return f'{name}\\"{MASK}' + ('\\"' if len(value) > 3 and value.endswith('\\"') else "")
    return f"{name}{MASK}"


def _authorization(groups: Groups) -> str:
    """Keep the header name and its scheme (Bearer, Basic, Digest, ...); mask the credentials."""
    scheme = groups[2] or groups[3]
    return f"{groups[1] or ''}{scheme + ' ' if scheme else ''}{MASK}"


# Words that commonly follow "password" in ordinary log lines ("Failed password for root", "password authentication
# failed"); any other word right after it is taken for the password itself.
_PROSE_WORDS = (
    "a|accepted|an|and|are|as|at|attempt|attempts|auth|authentication|based|be|been|by|can|cannot|change|changed|"
    "check|checks|did|does|empty|entry|expired|expires|expiry|failed|field|file|for|from|grant|has|hash|hashed|have|"
    "if|in|incorrect|input|invalid|is|length|less|login|manager|match|matches|mismatch|missing|must|needed|not|of|"
    "ok|on|or|policy|prompt|protected|provided|rejected|required|reset|rotated|rotation|set|should|store|stored|"
    "strength|supplied|that|the|this|to|too|unset|update|updated|used|verification|verified|was|were|will|with|"
    "wrong"
)
# Words after "bearer" that are prose ("bearer token expired"), not a credential.
_BEARER_PROSE = "token|tokens|auth|authentication|header|scheme|realm|error|required|missing|invalid|expired|is|was|for"

# A value after a key name: quoted (to its closing quote, or the end of a line that was cut), JSON-escaped quoted
# (a log line holding a JSON document as a string), or bare.
_QUOTED = r"\"(?:[^\"\\\r\n]|\\.)*\"?|'[^'\r\n]*'?|\\\"(?:[^\\\r\n]|\\[^\"])*(?:\\\")?"
_SEPARATOR = r"(?:\\?[\"'])?[ \t]*(?:=>|:=|[:=])[ \t]*"
# An optional suffix after a secret's name: SECRET_KEY_BASE, password_hash, private_key_id, secretAccessKey.
_NAME_SUFFIX = r"(?:[_.-]?(?:access[_-]?)?key|[_.-]?(?:base|value|b64|base64|hex|str|string|bytes|raw|hash|id|data))*"
# Names ending in "key" that hold one (api_key, x-api-key, AccountKey, SharedAccessKey, encryption_key).
_KEY_NAMES = (
    r"(?:api|access|private|secret|encryption|signing|sealing|master|license|client|account|shared[_-]?access|"
    r"storage|app|auth|ssh|hmac|jwt|webhook|consumer|subscription|service[_-]?account)[_-]?key"
)
_ONE_PART_SCHEMES = "bearer|basic|token|negotiate|ntlm|apikey|sso-key"


def _named(triggers: tuple[str, ...], names: str, value: str = rf"{_QUOTED}|[^\s\"']+") -> Rule:
    """name=value, name: value, "name": "value" and the like, for names matching ``names`` (lower case)."""
    return triggers, re.compile(rf"(?i)((?:{names}){_NAME_SUFFIX}{_SEPARATOR})({value})"), _mask_value


def _vendor(*prefixes: str, pattern: str) -> Rule:
    return tuple(prefix.lower() for prefix in prefixes), re.compile(pattern), _masked


# (literal triggers, lower case; pattern; replacement). A rule runs on a line only if one of its triggers occurs
# in that line, lower-cased. Patterns with (?i) are written in lower case. Order matters where rules overlap.
_RULES: tuple[Rule, ...] = (
    # Private keys written on one line (JSON "-----BEGIN PRIVATE KEY-----\nMIIE...", env files): everything
    # between the markers; and the end of one whose start is not in the text. Multi-line bodies: _mask_key_blocks.
    (
        ("private key",),
        re.compile(
            r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(?=[^\r])(.*?)(-----END [A-Z0-9 ]*-----|(?=\r?$))"
        ),
        _keep(1, 3),
    ),
    (
        ("private key",),
        re.compile(r"^((?:(?!-----BEGIN ).)*?)[^\s\"']+(-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)"),
        _keep(1, 2),
    ),
    (("private-mac",), re.compile(r"(?i)(private-mac:[ \t]*)\S+"), _keep(1)),
    # Authorization headers: a one-part scheme loses its token, any other (Digest, AWS4-HMAC-SHA256, unknown)
    # the rest of the line, since its parameters are quoted and comma-separated.
    (
        ("authorization",),
        re.compile(
            r"(?i)(\b(?:proxy-)?authorization(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?)"
            rf"(?:({_ONE_PART_SCHEMES})[ \t]+[^\s\"'\\]+|([a-z][a-z0-9-]*(?=[ \t]))?[^\r]+)"
        ),
        _authorization,
    ),
    (("cookie",), re.compile(r"(?i)(\b(?:set-)?cookies?(?:\\?[\"'])?[ \t]*[:=][ \t]*)\S[^\r]*"), _keep(1)),
    # Bearer credentials of any length, and token/basic ones long enough not to be an ordinary word.
    (
        ("bearer",),
        re.compile(rf"(?i)\b(bearer(?:[ \t]+|%20|\+))(?!(?:{_BEARER_PROSE})\b|realm=|error=)[a-z0-9._~+/=-]+"),
        _keep(1),
    ),
    (("basic", "token"), re.compile(r"(?i)\b((?:basic|token)[ \t]+)[a-z0-9._~+/=-]{8,}"), _keep(1)),
    # Passwords inside URLs: scheme://[user]:password@host, where the password may hold / or @ (the last @ before
    # a space ends it) but a port (host:8080/...) is not taken for one.
    (
        ("://",),
        re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/?#]*:)(?!\d+(?:[/?#\s]|$))\S*(@)"),
        _keep(1, 2),
    ),
    # Password-like names: the value runs to the end of the line unless quoted, since a password may hold spaces
    # and semicolons. "pass" alone only after _ . or - (db_pass, REDIS_PASS): a test summary's "pass=3" stays.
    _named(("pass", "pwd"), r"passw(?:or)?d|passphrase|pwd|(?<=[_.-])pass(?![a-z])", rf"{_QUOTED}|[^\s\"'][^\r]*"),
    # A password after a space, as in .netrc files and prose-like logs ("login app password hunter2").
    (
        ("pass", "pwd"),
        re.compile(
            rf"(?i)((?<![a-z])(?:passw(?:or)?d|passphrase|pwd)[ \t]+)(?!(?:{_PROSE_WORDS})\b)({_QUOTED}|[^\s\"'=:]\S*)"
        ),
        _mask_value,
    ),
    (
        ("identified by",),
        re.compile(rf"(?i)(\bidentified[ \t]+by[ \t]+(?:password[ \t]+)?)({_QUOTED}|\S+)"),
        _mask_value,
    ),
    # key=value and key: value pairs whose name says secret (client_secret=, auth_token: ..., sig=, session=).
    _named(("secret",), "secret"),
    _named(("token",), "token"),
    _named(("key",), _KEY_NAMES),
    _named(("credential",), "credentials?"),
    _named(("sig",), r"(?<![a-z])sig(?![a-z])|signature"),
    _named(("sess",), r"sess(?:ion)?[_-]?id|(?<![a-z])session(?![a-z])"),
    (('"auth',), re.compile(rf"(?i)(\\?\"auth\\?\"[ \t]*:[ \t]*)({_QUOTED})"), _mask_value),
    # Command lines: --password X, --api-key=X, -p'X', -pX on a MySQL line (elsewhere -pthread, -print and -p8080
    # are no secrets), curl -u user:password, sshpass -p X and `login ... -p X`.
    (
        ("--",),
        re.compile(
            r"(?i)(--[a-z0-9-]*(?:password|passwd|pass|pwd|secret|token|api-?key|access-?key|secret-?key|"
            rf"private-?key|credentials?)(?:=|[ \t]+))({_QUOTED}|[^\s\"'-]\S*)"
        ),
        _mask_value,
    ),
    (("-p'", '-p"'), re.compile(rf"((?<!\S)-p)({_QUOTED})"), _mask_value),
    (
        ("mysql", "mariadb"),
        re.compile(r"(?i)(\b(?:mysql|mariadb)\S*[ \t].*?(?<!\S)-p)(?![\d:.]+(?:\s|$))[^\s\"'-]\S*"),
        _keep(1),
    ),
    (
        ("-u",),
        re.compile(r"((?<!\S)(?:-u[ \t]*|--user[= \t]+)[\"']?[^\s:\"']+:)(?!\d+(?:\s|$))[^\s\"']+"),
        _keep(1),
    ),
    (
        ("sshpass", "login"),
        re.compile(rf"(?i)(\b(?:sshpass|login)\b.*?(?<!\S)-p[ \t]*)({_QUOTED}|[^\s\"'-]\S*)"),
        _mask_value,
    ),
    # Webhook URLs: the path is the credential.
    (
        ("hooks.slack.com",),
        re.compile(r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[^\s\"'<>]+"),
        _keep(1),
    ),
    (
        ("discord",),
        re.compile(r"(?i)(discord(?:app)?\.com/api/(?:v\d+/)?webhooks/)[^\s\"'<>]+"),
        _keep(1),
    ),
    (("webhook.office.com",), re.compile(r"(?i)(\.webhook\.office\.com/)[^\s\"'<>]+"), _keep(1)),
    # Well-known key shapes, wherever they appear.
    _vendor("sk-", pattern=r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}"),
    _vendor("k_live_", "k_test_", "whsec_", pattern=r"\b(?:[sr]k_(?:live|test)|whsec)_[A-Za-z0-9]{8,}"),
    _vendor("gh", pattern=r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    _vendor("glpat-", "gldt-", "glrt-", pattern=r"\bgl(?:pat|dt|rt)-[A-Za-z0-9_-]{20,}"),
    _vendor("xox", "xapp-", pattern=r"\bxox(?:[abposr]|e\.xox[bp])-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}"),
    _vendor("akia", "asia", pattern=r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    _vendor("aiza", pattern=r"\bAIza[0-9A-Za-z_-]{35}"),
    _vendor("gocspx-", pattern=r"\bGOCSPX-[A-Za-z0-9_-]{20,}"),
    _vendor("ya29.", "1//0", pattern=r"\bya29\.[A-Za-z0-9_-]{20,}|\b1//0[A-Za-z0-9_-]{20,}"),
    _vendor("eyj", pattern=r"\beyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_-]*){0,2}"),
    _vendor("npm_", pattern=r"\bnpm_[A-Za-z0-9]{30,}"),
    _vendor("pypi-", pattern=r"\bpypi-[A-Za-z0-9_-]{40,}"),
    _vendor("sg.", pattern=r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    _vendor("key-", pattern=r"\bkey-[0-9a-f]{32}\b"),
    _vendor("_v1_", pattern=r"\bdo[por]_v1_[0-9a-f]{64}"),
    _vendor("shp", pattern=r"\bshp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}"),
    _vendor("sq0", pattern=r"\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
    _vendor("hv", pattern=r"\bhv[sbr]\.[A-Za-z0-9_-]{20,}"),
    _vendor("atlasv1", pattern=r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,}"),
    _vendor("nrak-", pattern=r"\bNRAK-[A-Z0-9]{27}"),
    _vendor("hf_", pattern=r"\bhf_[A-Za-z0-9]{30,}"),
    _vendor("dckr_", pattern=r"\bdckr_pat_[A-Za-z0-9_-]{20,}"),
    _vendor("glsa_", "glc_", pattern=r"\bgl(?:sa|c)_[A-Za-z0-9_=+/-]{30,}"),
    _vendor("lin_api_", pattern=r"\blin_api_[A-Za-z0-9]{30,}"),
    _vendor("sntry", pattern=r"\bsntry[su]_[A-Za-z0-9_=+/-]{30,}"),
    _vendor("dapi", pattern=r"\bdapi[0-9a-f]{32}"),
    _vendor("atatt", pattern=r"\bATATT[A-Za-z0-9_=-]{30,}"),
    _vendor("gsk_", pattern=r"\bgsk_[A-Za-z0-9]{30,}"),
    _vendor("r8_", pattern=r"\br8_[A-Za-z0-9]{30,}"),
    _vendor("pmak-", pattern=r"\bPMAK-[0-9a-f]{24}-[0-9a-f]{34}"),
    _vendor("dp.", pattern=r"\bdp\.(?:st|pt|ct|sa)\.[A-Za-z0-9_.-]{20,}"),
    _vendor("age-secret-key-", pattern=r"\bAGE-SECRET-KEY-1[0-9A-Z]{50,}"),
    _vendor("apa91b", pattern=r"\b[A-Za-z0-9_-]{11}:APA91b[A-Za-z0-9_-]{100,}"),
)

TRIGGERS = frozenset(trigger for triggers, _pattern, _replacement in _RULES for trigger in triggers)

# Case-insensitive patterns, case-sensitive, for the lower-cased line.
_LOWERED = tuple(
    re.compile(pattern.pattern.removeprefix("(?i)"), pattern.flags & ~re.IGNORECASE)
    if pattern.flags & re.IGNORECASE
    else None
    for _triggers, pattern, _replacement in _RULES
)


_Node = tuple[str, tuple[int, ...], list[str]]  # a trigger, the rules it triggers, the longer triggers holding it


def _trigger_tree() -> tuple[list[_Node], dict[str, _Node]]:
    """The top-level triggers, and every trigger's node: longer triggers are looked for only under a shorter one."""
    rules_of: dict[str, list[int]] = {}
    for index, (triggers, _pattern, _replacement) in enumerate(_RULES):
        for trigger in triggers:
            rules_of.setdefault(trigger, []).append(index)
    nodes: dict[str, _Node] = {trigger: (trigger, tuple(rules), []) for trigger, rules in rules_of.items()}
    top: list[_Node] = []
    for trigger, node in nodes.items():
        parents = [other for other in nodes if other != trigger and other in trigger]
        if parents:
            nodes[min(parents, key=len)][2].append(trigger)
        else:
            top.append(node)
    return top, nodes


_TOP_TRIGGERS, _NODES = _trigger_tree()
# The characters of the top-level triggers. In a large block, one memchr-fast test per character rules out every
# trigger holding a character the block lacks, before the slower substring searches.
_TRIGGER_CHARS = frozenset("".join(node[0] for node in _TOP_TRIGGERS))
_CHAR_GATE_LENGTH = 16 * 1024


# Every top-level trigger in one RE2 pattern (a DFA: one pass, whatever the number of triggers): most text holds
# none, and one search says so at a tenth of the cost of a substring test per trigger on a large block (0.4 ms
# against 3.7 ms for 200 KiB on a 2-core VM). Only for large blocks: RE2 lets go of the interpreter lock while it
# searches, and on the event loop taking it back costs a small read far more (about 30 us in the served desk)
# than the substring tests do (5 us for a two-line log). Text that holds a trigger is looked at as before.
_ANY_TOP_TRIGGER = re2.compile("|".join(re.escape(node[0]) for node in _TOP_TRIGGERS))


def _top_triggers_in(lowered: str) -> list[_Node]:
    """The top-level trigger nodes that occur in ``lowered``."""
    candidates = _TOP_TRIGGERS
    if len(lowered) >= _CHAR_GATE_LENGTH:
        try:
            if _ANY_TOP_TRIGGER.search(lowered) is None:
                return []
        except UnicodeEncodeError:  # a lone surrogate, which RE2's UTF-8 cannot hold: look trigger by trigger
            pass
        absent = {char for char in _TRIGGER_CHARS if char not in lowered}
        candidates = [node for node in _TOP_TRIGGERS if absent.isdisjoint(node[0])]
    return [node for node in candidates if node[0] in lowered]


def _triggered(lowered: str) -> list[int]:
    """Indexes of the rules whose triggers occur in ``lowered``, in rule order."""
    found: set[int] = set()
    pending = _top_triggers_in(lowered)
    while pending:
        _trigger, rules, children = pending.pop()
        found.update(rules)
        pending.extend(_NODES[child] for child in children if child in lowered)
    return sorted(found)


# Key material alone on a line, or last after a log prefix: base64 with upper case, lower case and digits.
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_HAS_DIGIT = re.compile(r"\d")
_MIN_KEY_CHARS = 20  # a PEM body line has 64; its last line is shorter, and leaks below this
_KEY_MATERIAL_IMAGE = bytes(
    ord("a") if chr(byte) in string.ascii_letters + string.digits + "+/=" else ord("n") if byte in b"\r\n" else ord(" ")
    for byte in range(256)
)
_KEY_MATERIAL_AT_END = b"a" * _MIN_KEY_CHARS + b"n"

# Private key blocks across lines.
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PUTTY_PRIVATE_LINES = re.compile(r"(?i)private-lines:[ \t]*(\d{1,4})")
_PEM_HEADER = re.compile(r"[A-Za-z][A-Za-z0-9-]*: ")
_MAX_KEY_LINES = 1000  # a 16384-bit RSA key is about 200 lines; more between markers is not one key


def redact(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[REDACTED]``."""
    lowered = text.lower()
    if "\n" not in text:
        for index in _triggered(lowered):
            text, lowered = _apply(index, text, lowered)
        return _mask_key_material(text)
    if "private" in lowered or len(lowered) != len(text):
        text = _redact_lines(text, lowered)
    else:
        text = _redact_spans(text, lowered)
    return _mask_key_material_in_block(text)


def _redact_spans(text: str, lowered: str) -> str:
    """A block with no key block in it, whose lower-cased form lines up with it: only lines with triggers are cut
    out, redacted and put back; the rest is never split."""
    wanted: dict[int, tuple[int, set[int]]] = {}  # line start -> (line end, rules)
    pending = _top_triggers_in(lowered)
    while pending:
        trigger, triggered, children = pending.pop()
        pending.extend(_NODES[child] for child in children if child in lowered)
        found = lowered.find(trigger)
        while found != -1:
            start = lowered.rfind("\n", 0, found) + 1
            end = lowered.find("\n", found)
            end = len(lowered) if end == -1 else end
            wanted.setdefault(start, (end, set()))[1].update(triggered)
            found = lowered.find(trigger, end)  # one hit per line is enough
    if not wanted:
        return text
    pieces: list[str] = []
    last = 0
    for start in sorted(wanted):
        end, rules = wanted[start]
        line, line_lowered = text[start:end], lowered[start:end]
        for rule in sorted(rules):
            line, line_lowered = _apply(rule, line, line_lowered)
        pieces += [text[last:start], line]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _redact_lines(text: str, lowered: str) -> str:
    """A block that may hold a private key (or whose lower-cased form is longer): line by line."""
    lines = text.split("\n")
    lowered_lines = lowered.split("\n")  # lower() never adds or removes a newline: same lines, same order
    if "private" in lowered:
        _mask_key_blocks(lines, lowered_lines)
    for index, rules in _lines_to_check(lowered, lowered_lines).items():
        line, line_lowered = lines[index], lowered_lines[index]
        for rule in rules:
            line, line_lowered = _apply(rule, line, line_lowered)
        lines[index] = line
    return "\n".join(lines)


def _apply(index: int, line: str, lowered: str) -> tuple[str, str]:
    """Rule ``index`` applied to one line; the new line and its lower-cased form."""
    _triggers, pattern, replacement = _RULES[index]
    fast = _LOWERED[index]
    if fast is None or len(lowered) != len(line):
        # Case-sensitive rules, and lines whose lower-casing changed their length (a few non-ASCII letters).
        result = pattern.sub(replacement, line)
    else:
        pieces: list[str] = []
        last = 0
        for match in fast.finditer(lowered):
            spans = [match.span(group) for group in range(len(match.groups()) + 1)]
            pieces.append(line[last : match.start()])
            pieces.append(replacement([line[start:end] if start >= 0 else None for start, end in spans]))
            last = match.end()
        if not pieces:
            return line, lowered
        pieces.append(line[last:])
        result = "".join(pieces)
    return (result, result.lower()) if result != line else (line, lowered)


def _lines_to_check(lowered: str, lowered_lines: list[str]) -> dict[int, list[int]]:
    """For each line holding a trigger, the rules it triggers, in rule order; other lines need none."""
    starts: list[int] | None = None
    wanted: dict[int, set[int]] = {}
    pending = _top_triggers_in(lowered)
    while pending:
        trigger, rules, children = pending.pop()
        pending.extend(_NODES[child] for child in children if child in lowered)
        if starts is None:
            starts = list(accumulate((len(line) + 1 for line in lowered_lines), initial=0))
        found = lowered.find(trigger)
        while found != -1:
            line = bisect.bisect_right(starts, found) - 1
            wanted.setdefault(line, set()).update(rules)
            found = lowered.find(trigger, starts[line + 1])  # one hit per line is enough
    return {line: sorted(rules) for line, rules in wanted.items()}


def _mask_key_material(line: str) -> str:
    """Mask the last token of a line (maybe its only one) if it looks like base64 key material."""
    end = len(line) - 1 if line.endswith("\r") else len(line)
    start = max(line.rfind(" ", 0, end), line.rfind("\t", 0, end)) + 1
    if end - start >= _MIN_KEY_CHARS and _looks_like_key(line[start:end]):
        return line[:start] + MASK + line[end:]
    return line


def _mask_key_material_in_block(text: str) -> str:
    """``_mask_key_material`` on every line of a block, looking only at lines that end in a long base64 run.

    The runs are found on a one-byte-per-character image of the block (base64 characters as ``a``, line ends as
    ``n``), so a block with no candidate costs one encode, one translate and one find, all in C.
    """
    image = text.encode("latin-1", "replace").translate(_KEY_MATERIAL_IMAGE) + b"n"
    found = image.find(_KEY_MATERIAL_AT_END)
    if found == -1:
        return text
    pieces: list[str] = []
    last = 0
    while found != -1:
        start = text.rfind("\n", 0, found) + 1
        end = text.find("\n", found)
        end = len(text) if end == -1 else end
        line = text[start:end]
        masked = _mask_key_material(line)
        if masked is not line:
            pieces += [text[last:start], masked]
            last = end
        found = image.find(_KEY_MATERIAL_AT_END, end + 1)
    pieces.append(text[last:])
    return "".join(pieces)


def _looks_like_key(token: str) -> bool:
    """Base64 with upper case, lower case and a digit, and not a path (few slashes)."""
    return (
        _BASE64.fullmatch(token) is not None
        and token.lower() != token
        and token.upper() != token
        and _HAS_DIGIT.search(token) is not None
        and token.count("/") <= len(token) // 16
    )


def _mask_key_blocks(lines: list[str], lowered_lines: list[str]) -> None:
    """Mask private key bodies that span lines, in place, keeping the markers and the number of lines.

    Between a BEGIN and its END every line goes. A BEGIN without its END (the text stops inside the key) masks
    the lines after it that look like the body; an END without its BEGIN (the text starts inside the key), the
    lines before it. A body line looks like the marker's own line: the same log prefix, then base64 or a header.
    """
    handled_ends: set[int] = set()
    for index, lowered in enumerate(lowered_lines):
        if "private" not in lowered:
            continue
        putty = _PUTTY_PRIVATE_LINES.search(lines[index])
        if putty is not None:
            _mask_lines(lines, range(index + 1, min(len(lines), index + 1 + int(putty.group(1)))))
            continue
        begin = _KEY_BEGIN.search(lines[index])
        if begin is None or _KEY_END.search(lines[index]) is not None:
            continue
        end = next(
            (j for j in range(index + 1, min(len(lines), index + _MAX_KEY_LINES)) if _KEY_END.search(lines[j])),
            None,
        )
        if end is not None:
            _mask_lines(lines, range(index + 1, end))
            handled_ends.add(end)
            continue
        if lines[index][begin.end() :].strip():
            continue  # the key goes on within this line (escaped newlines): the one-line rule has it
        prefix = len(lines[index][: begin.start()].split())
        following = index + 1
        while following < len(lines) and _looks_like_body(lines[following], prefix):
            following += 1
        _mask_lines(lines, range(index + 1, following))
    for index, lowered in enumerate(lowered_lines):
        if index in handled_ends or "private" not in lowered or _KEY_BEGIN.search(lines[index]) is not None:
            continue
        end_marker = _KEY_END.search(lines[index])
        if end_marker is None:
            continue
        before = lines[index][: end_marker.start()]
        if before and not before[-1].isspace():
            continue  # the body ends within this line (escaped newlines): the one-line rule has it
        prefix = len(before.split())
        preceding = index
        while preceding > 0 and _looks_like_body(lines[preceding - 1], prefix):
            preceding -= 1
        _mask_lines(lines, range(preceding, index))


def _looks_like_body(line: str, prefix: int) -> bool:
    """Whether ``line`` can be a key body line after ``prefix`` tokens of log prefix: base64, a header, blank."""
    tokens = line.split()
    if not tokens or (prefix and len(tokens) == prefix):
        return True
    rest = tokens[prefix:]
    return (len(rest) == 1 and _BASE64.fullmatch(rest[0]) is not None) or _PEM_HEADER.match(" ".join(rest)) is not None


def _mask_lines(lines: list[str], indexes: range) -> None:
    for index in indexes:
        line = lines[index]
        if line.strip():
            indent = len(line) - len(line.lstrip())
            lines[index] = line[:indent] + MASK + ("\r" if line.endswith("\r") else "")


# Characters outside ASCII whose lower case holds an ASCII letter, so they can complete a trigger in
# ``text.lower()``: KELVIN SIGN lowers to "k", LATIN CAPITAL LETTER I WITH DOT ABOVE to "i" and a combining dot.
_LOWERING_TO_ASCII = ("\u0130", "\u212a")
# What _mask_key_material looks for with no trigger at all: a long base64 run at the end of a line.
_KEY_MATERIAL_SOURCE = rf"(?m:[A-Za-z0-9+/=]{{{_MIN_KEY_CHARS},}}\r?$)"


@dataclass(frozen=True)
class Redaction:
    """A redactor, with what a line must hold for it to change anything (so a search can skip the rest)."""

    apply: Callable[[str], str]
    mask: str
    triggers: tuple[str, ...]

    def trigger_pattern(self) -> str:
        """An RE2 pattern found in every line that ``apply`` may change (and in some it leaves alone)."""
        words = "|".join(re.escape(trigger) for trigger in self.triggers)
        return f"(?i:{words})|[{''.join(_LOWERING_TO_ASCII)}]|{_KEY_MATERIAL_SOURCE}"


SECRETS = Redaction(apply=redact, mask=MASK, triggers=tuple(sorted(TRIGGERS)))
