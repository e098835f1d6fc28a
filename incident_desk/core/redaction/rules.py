"""The one-line redaction rules: what a secret looks like beside its name, in a header, a URL or a command line.

Every pattern runs on RE2 (``core.linear``), so none can take more than linear time on a hostile line. RE2 has no
lookarounds: a rule that must see the character before its name takes it into the match (and keeps it), and a
rule that must refuse some values (prose after "password", a port after a host) either says so in the pattern or
refuses in its replacement, which returns None; a refusing rule only ever looks at a bounded head of the value,
so a refused match never makes the search read far ahead (see ``Rule.tail``).
"""

from __future__ import annotations

from dataclasses import replace

from incident_desk.core.linear import Span, compile_linear, groups_of
from incident_desk.core.redaction.shapes import (
    MASK,
    NAME_SUFFIX,
    QUOTED,
    SEPARATED_SUFFIX,
    SEPARATOR,
    Rule,
    keep,
    mask_value,
    named,
    rule,
    unless_prose,
    vendor,
)
from incident_desk.core.redaction.tools import TOOL_RULES
from incident_desk.core.redaction.vendors import VENDOR_RULES


def _authorization(line: bytes, spans: list[Span]) -> bytes:
    """Keep the header name and its scheme (Bearer, Basic, Digest, ...); mask the credentials."""
    groups = groups_of(line, spans)
    scheme = groups[2] or groups[3]
    return (groups[1] or b"") + (scheme + b" " if scheme else b"") + MASK


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
    if line.find(b"-----BEGIN ", line.rfind(b"\n", 0, start) + 1, start) >= 0:
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
        b"verified|was|were|will|with|wrong|successfully|succeeded|again|via|using|after|before|when|because|now|"
        b"please|then|so|it|its|their|your|my|his|her|our|expiring|expiration|history|hint|hints"
    ).split(b"|")
)
# Words after "bearer" that are prose ("bearer token expired"), not a credential.
_BEARER_PROSE = frozenset(
    b"token|tokens|auth|authentication|header|scheme|realm|error|required|missing|invalid|expired|is|was|for".split(
        b"|"
    )
)

# Names ending in "key" that hold one (api_key, x-api-key, AccountKey, SharedAccessKey, encryption_key).
_KEY_NAMES = (
    r"(?:api|access|private|secret|encryption|signing|sealing|master|license|client|account|shared[_-]?access|"
    r"storage|app|auth|ssh|hmac|jwt|webhook|consumer|subscription|service[_-]?account|application)[_-]?key"
)
_ONE_PART_SCHEMES = "bearer|basic|token|negotiate|ntlm|apikey|sso-key"


# Words that make a name secret wherever it appears inside a longer name (a tag, a quoted key, a header name).
_TELLING_WORDS = (
    r"passw(?:or)?d|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?key|"
    r"credentials?|authorization|cookie|signature|session[_-]?id|connection[_-]?string"
)
_TELLING_NAME = rf"[a-z0-9_.:-]*(?:{_TELLING_WORDS})[a-z0-9_.-]*"
# A value that may be a bare word, or quoted; a command-line value never starts with "-" (the next flag).
_FLAG_VALUE = rf"{QUOTED}|[^\s\"'-]\S*"
# A percent-encoded value: anything up to an encoded quote (%22), ampersand (%26) or a raw separator.
_ENCODED_VALUE = r"(?:[^%&\s\"']|%(?:[013-9a-f][0-9a-f]|2[013-57-9a-f]))+"


def _userinfo_token(line: bytes, spans: list[Span]) -> bytes | None:
    """A URL whose user part alone is a token (a Sentry DSN, a token used as the user): refused for a plain name."""
    user = line[spans[2][0] : spans[2][1]]
    if not (any(char in b"0123456789" for char in user) and user.lower() != user.upper()):
        return None
    return keep(1, 3)(line, spans)


_PRIVATE_KEY_MARKER = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"

# A rule runs on a line only if one of its triggers occurs in that line, lower-cased. Folded patterns are written
# in lower case. Order matters where rules overlap.
RULES: tuple[Rule, ...] = (
    # A Telegram bot token ("123456789:AA..."): before the "token <value>" rule, which would take its digits alone.
    vendor(":aa", pattern=r"\b\d{6,12}:AA[A-Za-z0-9_-]{30,}", by_shape=True),
    # Private keys written on one line (JSON "-----BEGIN PRIVATE KEY-----\nMIIE...", env files): everything
    # between the markers; and the end of one whose start is not in the text. Multi-line bodies: keys.py.
    rule(
        ("private key",),
        rf"(?m){_PRIVATE_KEY_MARKER}[^\r\n].*?(?:-----END [A-Z0-9 ]*-----|\r?$)",
        _one_line_key,
        folded=False,
    ),
    rule(
        ("private key",),
        r"[^\s\"']+-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        _key_end_without_begin,
        folded=False,
        first_only=True,
    ),
    rule(("private-mac",), r"(private-mac:[ \t]*)\S+", keep(1)),
    # Authorization headers: a one-part scheme loses its token, any other (Digest, AWS4-HMAC-SHA256, unknown)
    # the rest of the line, since its parameters are quoted and comma-separated.
    rule(
        ("authorization",),
        r"(\b(?:proxy-)?authorization(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?)"
        rf"(?:({_ONE_PART_SCHEMES})[ \t]+[^\s\"'\\]+|([a-z][a-z0-9-]*)[ \t][^\r\n]*|[^\r\n]+)",
        _authorization,
    ),
    rule(("cookie",), r"(\b(?:set-)?cookies?(?:\\?[\"'])?[ \t]*[:=][ \t]*)\S[^\r\n]*", keep(1)),
    # Bearer credentials of any length, and token/basic ones long enough not to be an ordinary word. The bearer
    # rule reads a bounded head to tell prose ("bearer token expired") from a credential, then masks the run.
    rule(
        ("bearer",),
        r"\b(bearer(?:[ \t]+|%20|\+))([a-z0-9._~+/=-]{1,16})",
        unless_prose(_BEARER_PROSE, also=(b"realm=", b"error=")),
        tail=r"[a-z0-9._~+/=-]*",
    ),
    rule(("basic", "token"), r"\b((?:basic|token)[ \t]+)[a-z0-9._~+/=-]{8,}", keep(1)),
    # Passwords inside URLs: scheme://[user]:password@host, where the password may hold / or @ (the last @ before
    # a space ends it) but a port (host:8080/...) is not taken for one.
    rule(
        ("://",),
        r"\b([a-z][a-z0-9+.-]*://[^\s:/?#]*:)(?:\d+(?:[^\d\s/?#]\S*)?|[^\d\s]\S*)?(@)",
        keep(1, 2),
    ),
    # Admin tools' flags, alerting vendors' keys, log shippers' URLs (``tools``): before the password rules, which
    # would take a tool's other arguments (``user set password 2 <password>``) for the value.
    *TOOL_RULES,
    # Password-like names: the value runs to the end of the line unless quoted, since a password may hold spaces
    # and semicolons. "pass" alone only after _ . or - (db_pass, REDIS_PASS): a test summary's "pass=3" stays.
    rule(
        ("pass", "pwd"),
        rf"((?:(?:passw(?:or)?d|passphrase|pwd){NAME_SUFFIX}|[_.-]pass{SEPARATED_SUFFIX}){SEPARATOR})"
        rf"({QUOTED}|[^\s\"'][^\r\n]*)",
        mask_value,
    ),
    # A password after a space, as in .netrc files and prose-like logs ("login app password hunter2").
    rule(
        ("pass", "pwd"),
        rf"((?:^|[^a-z])(?:passw(?:or)?d|passphrase|pwd)[ \t]+)({QUOTED}|[^\s\"'=:]\S*)",
        unless_prose(_PROSE_WORDS),
    ),
    rule(
        ("identified by",),
        rf"(\bidentified[ \t]+by[ \t]+(?:password[ \t]+)?)({QUOTED}|\S+)",
        mask_value,
    ),
    # key=value and key: value pairs whose name says secret (client_secret=, auth_token: ..., sig=, session=).
    named(("secret",), f"secret{NAME_SUFFIX}"),
    named(("token",), f"token{NAME_SUFFIX}"),
    replace(named(("key",), f"{_KEY_NAMES}{NAME_SUFFIX}"), narrow=compile_linear(_KEY_NAMES)),
    named(("credential",), f"credentials?{NAME_SUFFIX}"),
    named(("sig",), rf"(?:^|[^a-z])sig{SEPARATED_SUFFIX}|signature{NAME_SUFFIX}"),
    named(("sess",), rf"sess(?:ion)?[_-]?id{NAME_SUFFIX}|(?:^|[^a-z])session{SEPARATED_SUFFIX}"),
    rule(('"auth',), rf"(\\?\"auth\\?\"[ \t]*:[ \t]*)({QUOTED})", mask_value),
    # Command lines: --password X, --api-key=X, -p'X', -pX on a MySQL line (elsewhere -pthread, -print and -p8080
    # are no secrets), curl -u user:password, sshpass -p X and `login ... -p X`.
    rule(
        ("--",),
        r"(--[a-z0-9-]*(?:password|passwd|pass|pwd|secret|token|api-?key|access-?key|secret-?key|"
        rf"private-?key|credentials?)(?:=|[ \t]+))({QUOTED}|[^\s\"'-]\S*)",
        mask_value,
    ),
    rule(("-p'", '-p"'), rf"((?:^|\s)-p)({QUOTED})", mask_value, folded=False),
    rule(
        ("mysql", "mariadb"),
        r"(\b(?:mysql|mariadb)\S*[ \t](?:.*?\s)?-p)(?:[\d:.]+[^\d:.\s]|[^\d:.\s\"'-])\S*",
        keep(1),
    ),
    rule(
        ("-u",),
        r"((?:^|\s)(?:-u[ \t]*|--user[= \t]+)\\?[\"']?[^\s:\"'\\]+:)(?:\d*[^\d\s\"'\\][^\s\"'\\]*|\d+\\?[\"'])",
        keep(1),
        folded=False,
    ),
    rule(
        ("sshpass", "login"),
        rf"(\b(?:sshpass|login)(?:[^a-z0-9_].*?)?\s-p[ \t]*)({QUOTED}|[^\s\"'-]\S*)",
        mask_value,
    ),
    # Names beside values in more syntaxes: XML elements, quoted names with "," (PHP define), name/value pairs
    # (HAR headers, .NET <add key= value=>, Kubernetes env), JSON escaped to any depth, percent-encoded pairs.
    # Each is triggered by its syntax (a closing tag, "value", an escaped quote), not by the name: names like
    # "key" are in too many ordinary lines.
    rule(
        ("</",),
        rf"(<(?:[a-z0-9_.-]+:)?{_TELLING_NAME}(?:[ \t][^>\r\n]*)?>)[^<\r\n]+",
        keep(1),
    ),
    rule(
        ("value",),
        r"((?:name|key)\\*[\"']?[ \t]*[:=][ \t]*\\*[\"'][^\"'\\\r\n]*(?:"
        + _TELLING_WORDS
        + r")[^\"'\\\r\n]*\\*[\"'][ \t]*,?[ \t]*\\*[\"']?value\\*[\"']?[ \t]*[:=][ \t]*)"
        + rf"({QUOTED}|[^\s\"',}}]+)",
        mask_value,
    ),
    rule(("define", "', '", "','"), rf"(\\?[\"']{_TELLING_NAME}\\?[\"'][ \t]*,[ \t]*)({QUOTED})", mask_value),
    rule(
        ('\\"', "\\'"),
        rf"((?:{_TELLING_WORDS}){NAME_SUFFIX}\\+[\"'][ \t]*[:=][ \t]*\\+[\"'])[^\\\"'\r\n]+",
        keep(1),
    ),
    rule(
        ("%3a", "%3d"),
        rf"((?:{_TELLING_WORDS}){NAME_SUFFIX}(?:%22)?(?:%3a|%3d)(?:%22)?(?:%20)*){_ENCODED_VALUE}",
        keep(1),
    ),
    # Redis AUTH [user] password, as redis-cli and MONITOR show it.
    rule(('"auth"', "> auth "), r"((?:^|[\s>\"'])AUTH[ \t]+)[^\s\"']+(?:[ \t]+[^\s\"'(]+)?", keep(1), folded=False),
    # Credentials in connection strings and URLs: Oracle thin:user/pw@, sqlplus user/pw, .pgpass lines, a URL
    # whose user part is a token (Sentry DSN), a Telegram bot token in a URL path.
    rule(("thin:",), r"(thin:[^\s/@:\"']+/)[^\s@\"']+(@)", keep(1, 2)),
    rule(("sqlplus",), r"(\bsqlplus[ \t]+(?:-[a-z]+[ \t]+)*[^\s/@\"']+/)[^\s@\"']+", keep(1)),
    rule(
        (":5432:", ":*:", ":6432:", ":5433:"),
        r"((?:^|[\s\"'])[^:\s\"']+:(?:\d{1,5}|\*):[^:\s\"']+:[^:\s\"']+:)[^\s\"']+",
        keep(1),
    ),
    rule(("://",), r"\b([a-z][a-z0-9+.-]*://)([a-z0-9_-]{16,128})(@)", _userinfo_token),
    rule(("/bot",), r"(/bot)\d{6,12}:[a-z0-9_-]{30,}", keep(1)),
    # Command-line flags of common tools: redis-cli -a, ldapsearch -w, mongosh -p, sqlcmd -P, keytool
    # -storepass, openssl -passin pass:, smbclient -U user%password, htpasswd -b file user password.
    rule(("redis-cli",), rf"(\bredis-cli(?:[^a-z0-9_].*?)?\s-a[ \t]*)({_FLAG_VALUE})", mask_value),
    rule((" -w",), rf"(\bldap[a-z]*(?:[^a-z0-9_].*?)?\s-w[ \t]*)({_FLAG_VALUE})", mask_value),
    rule(
        (" -p",),
        rf"(\b(?:mongo[a-z]*|sqlcmd|bcp)(?:[^a-z0-9_].*?)?\s-p[ \t]*)({_FLAG_VALUE})",
        mask_value,
    ),
    rule(
        ("pass",),
        r"((?:^|\s)-(?:(?:src|dest)?(?:store|key)pass|storepassword|keystorepassword|pass(?:in|out)?)"
        rf"(?:[ \t]+|=)(?:pass:)?)({_FLAG_VALUE})",
        mask_value,
    ),
    rule(("pass:",), r"((?:^|[\s\"'=])pass:)[^\s\"']+", keep(1)),
    rule(("-u",), r"((?:^|\s)(?:-u|--user(?:name)?)[ \t=]*[\"']?[^\s%\"']+%)[^\s\"']+", keep(1)),
    rule(("htpasswd",), r"(\bhtpasswd[ \t]+(?:-[a-z]+[ \t]+)+\S+[ \t]+\S+[ \t]+)[^\s\"']+", keep(1)),
    # Webhook URLs: the path is the credential.
    rule(("hooks.slack.com",), r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[^\s\"'<>]+", keep(1)),
    rule(("discord",), r"(discord(?:app)?\.com/api/(?:v\d+/)?webhooks/)[^\s\"'<>]+", keep(1)),
    rule(("webhook.office.com",), r"(\.webhook\.office\.com/)[^\s\"'<>]+", keep(1)),
    *VENDOR_RULES,
)
