"""Secrets that admin tools, alerting vendors and log shippers put where no generic name gives them away.

Facts about the tools and vendors come from the detector lists secret scanners publish (gitleaks rules, trufflehog
detectors): which flag of which tool takes a password, which JSON field holds an integration key, which URL path
carries a token. The patterns are our own. A flag that means a password for one tool means a port or a count for
another (``-P`` is a password to ipmitool and mosquitto, a port to scp and mysql; ``-c`` a community to snmpwalk, a
count to grep), so each flag rule runs only on lines naming its tool (its trigger), and is case-sensitive where the
tool's flags are.
"""

from __future__ import annotations

from incident_desk.core.linear import Span, compile_linear
from incident_desk.core.redaction.shapes import QUOTED, SEPARATED_SUFFIX, SEPARATOR, Rule, keep, mask_value, named, rule

# A command-line value: quoted, or a bare word that is not the next flag.
_FLAG_VALUE = rf"{QUOTED}|[^\s\"'-]\S*"
# What a path token runs to: the next path separator, query, quote or space.
_PATH_SEGMENT = r"[^/\s\"'?<>]+"
# Values a short key ("pass:", "pw =") holds in ordinary configs and summaries: a YAML boolean or null.
_PLAIN_VALUES = frozenset(b"true|false|yes|no|on|off|null|none|~".split(b"|"))


def _unless_plain(line: bytes, spans: list[Span]) -> bytes | None:
    """Mask a short key's value unless it is a YAML boolean or null, or a count after ``=`` (``pass=120`` in a
    test summary)."""
    name = line[spans[1][0] : spans[1][1]]
    value = line[spans[2][0] : spans[2][1]].strip(b"\"'\\").lower()
    if value in _PLAIN_VALUES or (value.isdigit() and name.rstrip().endswith(b"=") and b":" not in name):
        return None
    return mask_value(line, spans)


def _flag(tool: str, flags: str) -> Rule:
    """Every ``flags`` (a case-sensitive pattern, e.g. ``-P``) with its value after ``tool`` on its line.

    The match is the rest of the line from the tool's name, so a run of lines redacted at once never applies one
    tool's flag to another tool's line; its flags are found in one more pass over that span (linear), and a line
    without one is accepted unchanged rather than refused (a refusal would search the line again)."""
    inner = compile_linear(rf"(\s(?:{flags})[ \t]*)({_FLAG_VALUE})")

    def replace(line: bytes, spans: list[Span]) -> bytes:
        start, end = spans[0]
        pieces, last = [], start
        for found in inner.finditer(line, start, end):
            pieces += [line[last : found[0][0]], mask_value(line, found)]
            last = found[0][1]
        return b"".join(pieces) + line[last:end]

    return rule((tool,), rf"\b{tool}[^\r\n]*", replace, folded=False)


def _path(triggers: tuple[str, ...], before: str) -> Rule:
    """A URL whose path segment after ``before`` is the token."""
    return rule(triggers, rf"({before}){_PATH_SEGMENT}", keep(1))


TOOL_RULES: tuple[Rule, ...] = (
    # BMCs (ipmitool -P, racadm -p, ipmitool user set password <id> <password>), SNMP communities and v3
    # passphrases (-c, -A, -X), MQTT (mosquitto -P), RabbitMQ (rabbitmqadmin -p; rabbitmqctl add_user <user>
    # <password>), PuTTY (-pw), FreeRDP (/p:), Windows net use, the Jenkins CLI (-auth user:token).
    _flag("ipmitool", "-P"),
    rule(
        ("ipmitool",),
        rf"(\bipmitool\b[^\r\n]*?\buser[ \t]+set[ \t]+password[ \t]+\d+[ \t]+)({_FLAG_VALUE})",
        mask_value,
    ),
    _flag("racadm", "-p"),
    _flag("snmp", "-[cAX]"),
    rule(("community",), rf"(\b(?:ro|rw)community6?[ \t]+)({_FLAG_VALUE})", mask_value),
    rule(("com2sec",), r"(\bcom2sec6?[ \t]+(?:-cn[ \t]+\S+[ \t]+)?\S+[ \t]+\S+[ \t]+)\S+", keep(1)),
    named(("community",), r"community(?:[_.-]?(?:string|name))?"),
    _flag("mosquitto_", "-P"),
    _flag("rabbitmqadmin", "-p"),
    rule(
        ("rabbitmqctl",),
        rf"(\brabbitmqctl\b[^\r\n]*?\b(?:add_user|change_password|authenticate_user)[ \t]+[^\s\"']+[ \t]+)"
        rf"({_FLAG_VALUE})",
        mask_value,
    ),
    rule(("-pw",), rf"((?:^|\s)-pw[ \t]+)({_FLAG_VALUE})", mask_value),
    rule(("/p:",), rf"((?:^|\s)/p:)({_FLAG_VALUE})", mask_value),
    rule(("net use",), r"(\bnet[ \t]+use[ \t]+(?:[a-z]:[ \t]+)?\\\\\S+[ \t]+)[^\s/*\"'][^\s\"']*", keep(1)),
    rule(("-auth",), r"((?:^|\s)--?auth[ \t]+[^\s:\"']+:)[^\s\"']+", keep(1)),
    # Secret stores: a token as vault login's argument, -token for consul, nomad and vault, Bitwarden's master
    # password as an argument.
    rule(
        ("vault login",),
        r"(\bvault[ \t]+login(?:[ \t]+-[^\s=]+(?:=\S*)?)*[ \t]+)[^\s\"'=-][^\s\"'=]*((?m:[ \t\"'\\]|$))",
        keep(1, 2),
    ),
    rule(("-token",), rf"((?:^|\s)-token(?:=|[ \t]+))({_FLAG_VALUE})", mask_value),
    rule(
        ("bw unlock", "bw login"),
        rf"(\bbw[ \t]+(?:unlock|login[ \t]+[^\s\"']+@[^\s\"']+)[ \t]+)({_FLAG_VALUE})",
        mask_value,
    ),
    # Code-quality CLIs: codecov -t, snyk auth <token>.
    _flag("codecov", "-t|--token"),
    rule(("snyk auth",), rf"(\bsnyk[ \t]+auth[ \t]+)({_FLAG_VALUE})", mask_value),
    # Integration keys of alerting vendors (PagerDuty routing, integration and service keys, Pushover user keys):
    # only a value shaped like a key, so a message broker's routing_key=orders.created stays.
    rule(
        ("routing", "integration", "service_key", "service-key", "servicekey", "user_key", "user-key", "userkey"),
        r"((?:routing|integration|service|user)[_-]?key\\?[\"']?[ \t]*(?:=>|:=|[:=])[ \t]*\\?[\"']?)"
        r"[a-z0-9]{20,64}((?m:\\?[\"']|[^a-z0-9._/-]|$))",
        keep(1, 2),
    ),
    named(("honeycomb-team",), "x-honeycomb-team"),
    named(("transactionkey",), "transactionkey"),
    named(("record_key", "record-key"), r"cypress[_-]record[_-]key"),
    named(("sonar",), r"sonar[._-]login"),
    named(("reporter",), r"test[_-]?reporter[_-]?id"),
    # Personal access tokens: GH_PAT=, GITLAB_PAT:, "pat": and --pat.
    named(("_pat", "-pat", "pat:", "pat=", 'pat"', "pat'", "pat\\", "pat "), rf"(?:^|[^a-z0-9])pat{SEPARATED_SUFFIX}"),
    rule(("--pat",), rf"((?:^|\s)--pat[ \t]+)({_FLAG_VALUE})", mask_value),
    # Short keys: pass: and pw: (YAML, JSON, INI), not a boolean or a test summary's count.
    rule(
        ("pass", "pw"),
        rf"((?:^|[^a-z0-9_.-])(?:pass|pw){SEPARATOR})({QUOTED}|[^\s\"',;}}]+)",
        _unless_plain,
    ),
    # Alerting and log-shipping URLs whose path is the credential.
    _path(("pagerduty.com/integration/",), r"pagerduty\.com/integration/"),
    _path(("victorops.com/integrations/",), r"victorops\.com/integrations/[^\s\"'<>]*?/alert/"),
    _path(("squadcast.com",), r"squadcast\.com/v\d+/incidents/api/"),
    _path(("zenduty.com",), r"zenduty\.com/api/events/"),
    rule(("/integrations/v1/",), r"(/integrations/v1/[a-z_]+/)[a-z0-9]{16,}", keep(1)),
    _path(("loggly.com",), r"loggly\.com/(?:inputs|bulk)/"),
    rule(("@41058",), r"(\[)[^\s\[\]@]+(@41058)", keep(1, 2)),
    _path(("/receiver/v1/",), r"/receiver/v1/(?:http|otlp)/"),
    _path(("datadoghq",), r"datadoghq\.(?:com|eu)/v1/input/"),
    _path(("/noformat/",), r"/v1/noformat/"),
    _path(("logsene-receiver",), r"logsene-receiver\.[a-z0-9.]+/"),
)
