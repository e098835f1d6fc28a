"""The one-line redaction rules: what a secret looks like beside its name, in a header, a URL or a command line,
and in the shapes vendors give their tokens.

Every pattern runs on RE2 (``core.linear``), so none can take more than linear time on a hostile line. RE2 has no
lookarounds: a rule that must see the character before its name takes it into the match (and keeps it), and a
rule that must refuse some values (prose after "password", a port after a host) either says so in the pattern or
refuses in its replacement, which returns None; a refusing rule only ever looks at a bounded head of the value,
so a refused match never makes the search read far ahead (see ``Rule.tail``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from incident_desk.core.linear import LinearPattern, Span, compile_linear, groups_of

MASK = b"[REDACTED]"

# A replacement builds the text that stands for a match from the line and the match's spans (whole match first,
# then each group), or refuses the match with None; the search then goes on one byte after its start.
Replacement = Callable[[bytes, list[Span]], bytes | None]


@dataclass(frozen=True)
class Rule:
    """Where a rule runs (its literal triggers, lower case), what it matches, and what the match becomes."""

    triggers: tuple[str, ...]
    pattern: LinearPattern
    replace: Replacement
    folded: bool  # the pattern is written in lower case and runs on the line with its ASCII letters lowered
    tail: LinearPattern | None = None  # after an accepted match: the run this matches right after it is masked too
    first_only: bool = False  # only the line's first match counts (the rule is about the start of the line)


def _keep(*kept: int) -> Replacement:
    """Keep group ``kept[0]`` before the mask and any further kept groups after it."""

    def replace(line: bytes, spans: list[Span]) -> bytes:
        groups = groups_of(line, spans)
        return (groups[kept[0]] or b"") + MASK + b"".join(groups[index] or b"" for index in kept[1:])

    return replace


def _masked(line: bytes, spans: list[Span]) -> bytes:
    return MASK


def _mask_value(line: bytes, spans: list[Span]) -> bytes:
    """Keep the name and separator (group 1), and the quotes around a quoted value (group 2)."""
    name, value = (line[start:end] for start, end in spans[1:3])
    if value[:1] in (b"'", b'"'):
        closing = value[:1] if len(value) > 1 and value.endswith(value[:1]) else b""
        return name + value[:1] + MASK + closing
    if value.startswith(b'\\"'):
        return name + b'\\"' + MASK + (b'\\"' if len(value) > 3 and value.endswith(b'\\"') else b"")
    return name + MASK


def _authorization(line: bytes, spans: list[Span]) -> bytes:
    """Keep the header name and its scheme (Bearer, Basic, Digest, ...); mask the credentials."""
    groups = groups_of(line, spans)
    scheme = groups[2] or groups[3]
    return (groups[1] or b"") + (scheme + b" " if scheme else b"") + MASK


_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")


def _starts_with_word(value: bytes, words: frozenset[bytes]) -> bool:
    """Whether ``value`` (lower case) starts with one of ``words`` followed by a word boundary."""
    head = value[:16]
    for length in range(1, min(len(head), 15) + 1):
        if head[:length] in words and (length == len(head) or head[length] not in _WORD):
            return True
    return False


def _unless_prose(words: frozenset[bytes], *, also: tuple[bytes, ...] = ()) -> Replacement:
    """``_mask_value``/``_keep(1)``-style masking, refused when the value starts with a word of ordinary prose."""

    def replace(line: bytes, spans: list[Span]) -> bytes | None:
        value = line[spans[2][0] : spans[2][1]].lower()
        if value[:1] not in (b"'", b'"', b"\\") and (_starts_with_word(value, words) or value.startswith(also)):
            return None
        return _mask_value(line, spans)

    return replace


def _one_line_key(line: bytes, spans: list[Span]) -> bytes:
    """A private key on one line: keep its BEGIN marker and, when the line holds it, its END marker."""
    start, end = spans[0]
    text = line[start:end]
    head = text.find(b"-----", 11) + 5
    marker = text.rfind(b"-----END ")
    if marker >= head and text.endswith(b"-----") and _ANY_END.match(text, marker) == [(marker, len(text))]:
        return text[:head] + MASK + text[marker:]
    return text[:head] + MASK + (b"\r" if text.endswith(b"\r") else b"")


def _key_end_without_begin(line: bytes, spans: list[Span]) -> bytes | None:
    """The end of a key whose BEGIN is not on this line: mask the body run before the END marker."""
    start, end = spans[0]
    if b"-----BEGIN " in line[:start]:
        return None
    text = line[start:end]
    return MASK + text[text.rfind(b"-----END ") :]


_ANY_END = compile_linear(rb"-----END [A-Z0-9 ]*-----")

# Words that commonly follow "password" in ordinary log lines ("Failed password for root", "password authentication
# failed"); any other word right after it is taken for the password itself.
_PROSE_WORDS = frozenset(
    (
        b"a|accepted|an|and|are|as|at|attempt|attempts|auth|authentication|based|be|been|by|can|cannot|change|"
        b"changed|check|checks|did|does|empty|entry|expired|expires|expiry|failed|field|file|for|from|grant|has|hash|"
        b"hashed|have|if|in|incorrect|input|invalid|is|length|less|login|manager|match|matches|mismatch|missing|must|"
        b"needed|not|of|ok|on|or|policy|prompt|protected|provided|rejected|required|reset|rotated|rotation|set|"
        b"should|store|stored|strength|supplied|that|the|this|to|too|unset|update|updated|used|verification|"
        b"verified|was|were|will|with|wrong"
    ).split(b"|")
)
# Words after "bearer" that are prose ("bearer token expired"), not a credential.
_BEARER_PROSE = frozenset(
    b"token|tokens|auth|authentication|header|scheme|realm|error|required|missing|invalid|expired|is|was|for".split(
        b"|"
    )
)

# A value after a key name: quoted (to its closing quote, or the end of a line that was cut), JSON-escaped quoted
# (a log line holding a JSON document as a string), or bare.
_QUOTED = r"\"(?:[^\"\\\r\n]|\\.)*\"?|'[^'\r\n]*'?|\\\"(?:[^\\\r\n]|\\[^\"])*(?:\\\")?"
_SEPARATOR = r"(?:\\?[\"'])?[ \t]*(?:=>|:=|[:=])[ \t]*"
# An optional suffix after a secret's name: SECRET_KEY_BASE, password_hash, private_key_id, secretAccessKey.
_SUFFIX_WORDS = r"(?:access[_-]?)?key|base|value|b64|base64|hex|str|string|bytes|raw|hash|id|data"
_NAME_SUFFIX = rf"(?:[_.-]?(?:{_SUFFIX_WORDS}))*"
# The same, for a short name that must not run into a longer word ("pass" but not "passkey"): separated only.
_SEPARATED_SUFFIX = rf"(?:[_.-](?:{_SUFFIX_WORDS}))*"
# Names ending in "key" that hold one (api_key, x-api-key, AccountKey, SharedAccessKey, encryption_key).
_KEY_NAMES = (
    r"(?:api|access|private|secret|encryption|signing|sealing|master|license|client|account|shared[_-]?access|"
    r"storage|app|auth|ssh|hmac|jwt|webhook|consumer|subscription|service[_-]?account)[_-]?key"
)
_ONE_PART_SCHEMES = "bearer|basic|token|negotiate|ntlm|apikey|sso-key"


def _rule(
    triggers: tuple[str, ...],
    pattern: str,
    replace: Replacement,
    *,
    folded: bool = True,
    tail: str | None = None,
    first_only: bool = False,
) -> Rule:
    return Rule(
        triggers,
        compile_linear(pattern),
        replace,
        folded,
        compile_linear(tail) if tail is not None else None,
        first_only,
    )


def _named(triggers: tuple[str, ...], names: str, value: str = rf"{_QUOTED}|[^\s\"']+") -> Rule:
    """name=value, name: value, "name": "value" and the like, for names matching ``names`` (lower case)."""
    return _rule(triggers, rf"((?:{names}){_SEPARATOR})({value})", _mask_value)


def _vendor(*prefixes: str, pattern: str) -> Rule:
    return _rule(tuple(prefix.lower() for prefix in prefixes), pattern, _masked, folded=False)


_PRIVATE_KEY_MARKER = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"

# A rule runs on a line only if one of its triggers occurs in that line, lower-cased. Folded patterns are written
# in lower case. Order matters where rules overlap.
RULES: tuple[Rule, ...] = (
    # Private keys written on one line (JSON "-----BEGIN PRIVATE KEY-----\nMIIE...", env files): everything
    # between the markers; and the end of one whose start is not in the text. Multi-line bodies: keys.py.
    _rule(
        ("private key",),
        rf"{_PRIVATE_KEY_MARKER}[^\r].*?(?:-----END [A-Z0-9 ]*-----|\r?$)",
        _one_line_key,
        folded=False,
    ),
    _rule(
        ("private key",),
        r"[^\s\"']+-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        _key_end_without_begin,
        folded=False,
        first_only=True,
    ),
    _rule(("private-mac",), r"(private-mac:[ \t]*)\S+", _keep(1)),
    # Authorization headers: a one-part scheme loses its token, any other (Digest, AWS4-HMAC-SHA256, unknown)
    # the rest of the line, since its parameters are quoted and comma-separated.
    _rule(
        ("authorization",),
        r"(\b(?:proxy-)?authorization(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?)"
        rf"(?:({_ONE_PART_SCHEMES})[ \t]+[^\s\"'\\]+|([a-z][a-z0-9-]*)[ \t][^\r]*|[^\r]+)",
        _authorization,
    ),
    _rule(("cookie",), r"(\b(?:set-)?cookies?(?:\\?[\"'])?[ \t]*[:=][ \t]*)\S[^\r]*", _keep(1)),
    # Bearer credentials of any length, and token/basic ones long enough not to be an ordinary word. The bearer
    # rule reads a bounded head to tell prose ("bearer token expired") from a credential, then masks the run.
    _rule(
        ("bearer",),
        r"\b(bearer(?:[ \t]+|%20|\+))([a-z0-9._~+/=-]{1,16})",
        _unless_prose(_BEARER_PROSE, also=(b"realm=", b"error=")),
        tail=r"[a-z0-9._~+/=-]*",
    ),
    _rule(("basic", "token"), r"\b((?:basic|token)[ \t]+)[a-z0-9._~+/=-]{8,}", _keep(1)),
    # Passwords inside URLs: scheme://[user]:password@host, where the password may hold / or @ (the last @ before
    # a space ends it) but a port (host:8080/...) is not taken for one.
    _rule(
        ("://",),
        r"\b([a-z][a-z0-9+.-]*://[^\s:/?#]*:)(?:\d+(?:[^\d\s/?#]\S*)?|[^\d\s]\S*)?(@)",
        _keep(1, 2),
    ),
    # Password-like names: the value runs to the end of the line unless quoted, since a password may hold spaces
    # and semicolons. "pass" alone only after _ . or - (db_pass, REDIS_PASS): a test summary's "pass=3" stays.
    _rule(
        ("pass", "pwd"),
        rf"((?:(?:passw(?:or)?d|passphrase|pwd){_NAME_SUFFIX}|[_.-]pass{_SEPARATED_SUFFIX}){_SEPARATOR})"
        rf"({_QUOTED}|[^\s\"'][^\r]*)",
        _mask_value,
    ),
    # A password after a space, as in .netrc files and prose-like logs ("login app password hunter2").
    _rule(
        ("pass", "pwd"),
        rf"((?:^|[^a-z])(?:passw(?:or)?d|passphrase|pwd)[ \t]+)({_QUOTED}|[^\s\"'=:]\S*)",
        _unless_prose(_PROSE_WORDS),
    ),
    _rule(
        ("identified by",),
        rf"(\bidentified[ \t]+by[ \t]+(?:password[ \t]+)?)({_QUOTED}|\S+)",
        _mask_value,
    ),
    # key=value and key: value pairs whose name says secret (client_secret=, auth_token: ..., sig=, session=).
    _named(("secret",), f"secret{_NAME_SUFFIX}"),
    _named(("token",), f"token{_NAME_SUFFIX}"),
    _named(("key",), f"{_KEY_NAMES}{_NAME_SUFFIX}"),
    _named(("credential",), f"credentials?{_NAME_SUFFIX}"),
    _named(("sig",), rf"(?:^|[^a-z])sig{_SEPARATED_SUFFIX}|signature{_NAME_SUFFIX}"),
    _named(("sess",), rf"sess(?:ion)?[_-]?id{_NAME_SUFFIX}|(?:^|[^a-z])session{_SEPARATED_SUFFIX}"),
    _rule(('"auth',), rf"(\\?\"auth\\?\"[ \t]*:[ \t]*)({_QUOTED})", _mask_value),
    # Command lines: --password X, --api-key=X, -p'X', -pX on a MySQL line (elsewhere -pthread, -print and -p8080
    # are no secrets), curl -u user:password, sshpass -p X and `login ... -p X`.
    _rule(
        ("--",),
        r"(--[a-z0-9-]*(?:password|passwd|pass|pwd|secret|token|api-?key|access-?key|secret-?key|"
        rf"private-?key|credentials?)(?:=|[ \t]+))({_QUOTED}|[^\s\"'-]\S*)",
        _mask_value,
    ),
    _rule(("-p'", '-p"'), rf"((?:^|\s)-p)({_QUOTED})", _mask_value, folded=False),
    _rule(
        ("mysql", "mariadb"),
        r"(\b(?:mysql|mariadb)\S*[ \t](?:.*?\s)?-p)(?:[\d:.]+[^\d:.\s]|[^\d:.\s\"'-])\S*",
        _keep(1),
    ),
    _rule(
        ("-u",),
        r"((?:^|\s)(?:-u[ \t]*|--user[= \t]+)[\"']?[^\s:\"']+:)(?:\d*[^\d\s\"'][^\s\"']*|\d+[\"'])",
        _keep(1),
        folded=False,
    ),
    _rule(
        ("sshpass", "login"),
        rf"(\b(?:sshpass|login)(?:[^a-z0-9_].*?)?\s-p[ \t]*)({_QUOTED}|[^\s\"'-]\S*)",
        _mask_value,
    ),
    # Webhook URLs: the path is the credential.
    _rule(("hooks.slack.com",), r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[^\s\"'<>]+", _keep(1)),
    _rule(("discord",), r"(discord(?:app)?\.com/api/(?:v\d+/)?webhooks/)[^\s\"'<>]+", _keep(1)),
    _rule(("webhook.office.com",), r"(\.webhook\.office\.com/)[^\s\"'<>]+", _keep(1)),
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
