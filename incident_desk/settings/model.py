"""The desk's settings: CLI flags over ``INCIDENT_DESK_*`` variables over a TOML config file over defaults.

Secrets (provider API key, HTTP bearer token, sealing key) are accepted from the environment only; the
config file may not hold them (``settings_sources``), and the CLI reads them from the OS keychain (see
``core.credentials``). Which of these settings a client's entry carries is ``client_configs.launch``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
from pydantic import Field, IPvAnyNetwork, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from incident_desk.core.acts.actions import RestartAction
from incident_desk.core.acts.limits import ActLimits
from incident_desk.core.acts.links import ApprovalMode, strictest
from incident_desk.core.acts.service_actions import ServiceAction, check_action_names
from incident_desk.core.credentials import ENV_PREFIX
from incident_desk.core.handoff.oncall import OncallConfig, check_location
from incident_desk.core.journal.audit import DEFAULT_DESK, is_postgres_url, url_has_password
from incident_desk.core.neighbours.metrics import ALERT_MAX_POINTS, ALERT_MAX_SERIES, MetricsConfig
from incident_desk.core.sources.changes import ChangeSourceConfig
from incident_desk.core.sources.config import IncidentSourceConfig, LogSourceConfig, check_unique_names
from incident_desk.core.sources.spool import DEFAULT_MAX_BYTES as DEFAULT_SPOOL_BYTES
from incident_desk.settings.errors import SettingsError, describe_validation_error
from incident_desk.settings.service_tables import SERVICE_SETTINGS, check_service_names, split_service_tables
from incident_desk.settings.sources import EnvironmentSource, chosen_config_file, config_file_source, is_unset, reading

APP_NAME = "incident-desk"


def user_data_dir() -> Path:
    """Where the desk keeps its own state (the audit journal), per platform convention.

    Linux: ``$XDG_DATA_HOME`` or ``~/.local/share``; macOS: ``~/Library/Application Support``; Windows: the
    local (not roaming) app data folder. Each followed by ``incident-desk``.
    """
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False, roaming=False))


class Settings(BaseSettings):
    """Every knob of the desk. Field descriptions are the configuration reference (docs/configuration.md)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", env_nested_delimiter="__", validate_default=True
    )

    data_dir: Path | None = Field(
        default=None,
        description="Directory with incidents/ and runbooks/; unset serves the bundled sample desk.",
    )
    max_data_file_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest incident.toml or runbook served; bigger ones are skipped with the reason.",
    )
    data_freshness_seconds: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description="How long the desk trusts its last look at the data directory; edits show up within it, and 0 "
        "checks on every request.",
    )
    redact_secrets: bool = Field(default=True, description="Mask tokens, keys and URL passwords in log lines.")
    log_window_lines: int = Field(
        default=200, ge=1, le=100_000, description="Lines in the tail window of an incident-log resource."
    )
    log_window_bytes: int = Field(
        default=256 * 1024, ge=1024, le=64 * 1024 * 1024, description="Byte cap of that tail window."
    )
    page_lines: int = Field(default=100, ge=1, le=5_000, description="Default lines per read_incident_log page.")
    page_max_bytes: int = Field(
        default=512 * 1024,
        ge=16 * 1024,
        le=16 * 1024 * 1024,
        description="Most bytes of log text in one read_incident_log page; a page of long lines stops early and "
        "its cursor goes on from there.",
    )
    log_spool_max_bytes: int = Field(
        default=DEFAULT_SPOOL_BYTES,
        ge=1024 * 1024,
        description="Total size of the spooled files, command and journald logs; least recently used spools are "
        "evicted, never one being read.",
    )
    search_time_budget_seconds: float = Field(
        default=2.0, gt=0, le=60, description="Wall-clock time one search_incident_log call may scan before it pages."
    )
    timeline_processes: int | None = Field(
        default=None,
        ge=0,
        le=8,
        description="Helper processes that count a log of 64 MiB or more for show_incident_timeline, a stretch each; "
        "0 counts in the desk's own process; unset: one per core, at most two (none on Windows).",
    )
    search_processes: int | None = Field(
        default=None,
        ge=0,
        le=8,
        description="Helper processes (the timeline's) that prefilter a log of 64 MiB or more for search_incident_log, "
        "a stretch each, when the pattern has literals; 0 searches in the desk's own process; unset: one per core, "
        "at most two (none on Windows).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Threshold of the desk's own log on stderr."
    )
    log_format: Literal["auto", "console", "json"] = Field(
        default="auto", description="stderr log format; auto is console on a terminal, JSON otherwise."
    )

    transport: Literal["stdio", "http"] = Field(default="stdio", description="How clients reach the desk.")
    host: str = Field(default="127.0.0.1", description="HTTP bind address; beyond loopback needs a token.")
    port: int = Field(default=8765, ge=1, le=65535, description="HTTP port.")
    stateless: bool = Field(default=False, description="Stateless HTTP for load-balanced replicas.")
    replica_tag: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9-]{0,31}$",
        description="This replica's name behind a balancer: 2025 session ids become `{tag}.{id}`, so nginx can "
        "send each session back to its replica (deploy/nginx.conf).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Extra Host header values accepted over HTTP (e.g. desk.example:443).",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origin header values accepted over HTTP (e.g. https://app.example).",
    )
    http_max_connections: int = Field(
        default=256,
        ge=2,
        le=100_000,
        description="Open HTTP connections kept; at the cap the longest-waiting idle one is closed, else 503.",
    )
    http_read_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Time an HTTP peer has to send a whole request (headers and body) once it starts one.",
    )
    http_max_sessions: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Stateful HTTP sessions open at once, all clients together; at the cap the least recently "
        "used idle one is closed, and only when all are in use does a newcomer get 503.",
    )
    http_max_sessions_per_client: int = Field(
        default=16,
        ge=1,
        le=100_000,
        description="Idle stateful HTTP sessions one client (its token and address) keeps; opening one more "
        "closes its least recently used idle session.",
    )
    http_session_idle_seconds: float = Field(
        default=600.0, gt=0, le=86_400, description="A stateful HTTP session with no request this long is closed."
    )
    trusted_proxies: list[IPvAnyNetwork] = Field(
        default_factory=list,
        description="Addresses or CIDR networks of reverse proxies whose X-Forwarded-For / Forwarded headers name "
        "the client; from any other peer those headers are ignored.",
    )
    http_token: SecretStr | None = Field(
        default=None, description="Bearer token for HTTP clients (environment or keychain only)."
    )
    sealing_key: SecretStr | None = Field(
        default=None,
        description="Shared key sealing multi-round-trip state across replicas (env or keychain); unset and not in "
        "the keychain: a key made per process.",
    )
    http_auth: Literal["token", "oauth"] = Field(
        default="token",
        description="How HTTP callers prove who they are: one shared bearer token (token) or per-person OAuth "
        "access tokens checked against oauth_issuer (oauth, see docs/oauth.md).",
    )
    public_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        description="The desk's address as clients reach it, e.g. https://desk.example.com; its /mcp URL is the "
        "OAuth resource and default audience (unset: http://host:port).",
    )
    oauth_issuer: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s?#]+$",
        description="The authorization server's issuer URL, exactly as its tokens' iss claim spells it (required "
        "with http_auth = oauth).",
    )
    oauth_audience: str | None = Field(
        default=None, min_length=1, description="The aud claim tokens must carry (default: the public /mcp URL)."
    )
    oauth_jwks_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s]+$",
        description="The issuer's JWKS (default: jwks_uri from the issuer's discovery metadata).",
    )
    oauth_introspection_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s]+$",
        description="RFC 7662 introspection endpoint for opaque (non-JWT) tokens; its client credentials come from "
        "INCIDENT_DESK_OAUTH_INTROSPECTION_CLIENT_ID / _SECRET.",
    )
    oauth_introspection_client_id: str | None = Field(
        default=None, description="Client id the desk introspects with (environment only)."
    )
    oauth_introspection_client_secret: SecretStr | None = Field(
        default=None, description="Client secret the desk introspects with (environment only)."
    )
    oauth_scope_map: dict[Literal["incidents:read", "incidents:write", "services:restart"], str] = Field(
        default_factory=dict,
        description="The issuer's scope names for the desk's scopes when they differ, e.g. "
        '{"incidents:read" = "api://desk/incidents.read"}.',
    )
    oauth_timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="Deadline of each call to the issuer (metadata, JWKS, introspection)."
    )

    metrics: bool = Field(
        default=True,
        description="Serve Prometheus metrics at /metrics on the HTTP desk, behind its token (docs/telemetry.md).",
    )
    slow_call_seconds: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        description="Log a warning for each request slower than this; unset: 10 s over HTTP, off over stdio.",
    )
    otlp_endpoint: str | None = Field(
        default=None,
        description="Export OpenTelemetry traces over OTLP/HTTP to this URL (needs incident-desk[otel]).",
    )

    sampling_timeout_seconds: float = Field(
        default=30.0, gt=0, le=3600, description="How long summarize_incident waits for the client's model."
    )
    approval_timeout_seconds: float = Field(
        default=300.0, gt=0, le=86_400, description="How long restart_service waits for a human answer."
    )

    provider: Literal["none", "openai", "anthropic"] = Field(
        default="none",
        description="Direct model provider used when the client cannot sample: openai (any compatible endpoint) or "
        "anthropic.",
    )
    provider_base_url: str | None = Field(
        default=None,
        description="Provider endpoint; defaults to the vendor's (set it for Ollama, e.g. "
        "http://127.0.0.1:11434/v1, or vLLM, LM Studio).",
    )
    provider_model: str | None = Field(
        default=None, description="Model name sent to the provider (required with a provider)."
    )
    provider_api_key: SecretStr | None = Field(
        default=None, description="Provider API key (environment only; prefer `incident-desk key set`)."
    )
    provider_timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, description="Provider deadline: the whole request and answer, not each read."
    )
    provider_max_response_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=256 * 1024 * 1024,
        description="Most bytes of a provider answer read; more is the error `answered too large a body`.",
    )

    audit_db: Path | str | None = Field(
        default=None,
        description="Audit journal: an SQLite file (default: the user data dir's audit.sqlite3) or a "
        "postgresql://user@host:port/db URL shared by replicas (no password in it: the password comes from the "
        "keychain or INCIDENT_DESK_AUDIT_DB_PASSWORD).",
    )
    audit_db_password: SecretStr | None = Field(
        default=None, description="PostgreSQL journal password (environment only; prefer `incident-desk key set`)."
    )
    desk_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The desk's name in the journal: desks sharing one see only their own events; unset: derived "
        "from data_dir alone (adding an incident source keeps the desk).",
    )
    desk_renamed_from: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        max_length=20,
        description="Former names of this desk in the journal (an old desk_name, or the data_dir it was derived "
        "from): at start its acknowledgements, notes, decisions and postmortems move to the desk's name. The one "
        "way to rename a desk (see docs/team-desk.md).",
    )
    max_silence_minutes: int = Field(
        default=240, ge=1, le=7 * 24 * 60, description="Longest silence silence_incident may set, in minutes."
    )
    read_only: bool = Field(
        default=False, description="Serve no acting tool (acknowledge, note, resolve, silence, restart)."
    )
    enabled_tools: list[str] | None = Field(
        default=None, description="Serve only these tools (unset: all); the instructions say which are off."
    )
    disabled_tools: list[str] = Field(default_factory=list, description="Tools not to serve.")
    keyring_service: str = Field(default=APP_NAME, min_length=1, description="Keychain service name.")
    services: dict[str, RestartAction] = Field(
        default_factory=dict,
        description="Per-service restart action, written [services.<name>] (command argv or simulate; see "
        "docs/acts.md).",
    )
    incident_sources: list[IncidentSourceConfig] = Field(
        default_factory=list,
        description="Where incidents come from ([[incident_sources]]: folder, alertmanager); unset: data_dir.",
    )
    service_logs: dict[str, LogSourceConfig] = Field(
        default_factory=dict,
        description="Per-service log source, written [services.<name>.logs] (files, journald, command).",
    )

    service_metrics: dict[str, MetricsConfig] = Field(
        default_factory=dict,
        description="Per-service Prometheus and named queries, written [services.<name>.metrics].",
    )
    change_sources: list[ChangeSourceConfig] = Field(
        default_factory=list, description="Where change events come from ([[change_sources]]: files, command)."
    )
    service_approval: dict[str, ApprovalMode] = Field(
        default_factory=dict,
        description='Per-service approval, written [services.<name>] approval = "in-band" | "out-of-band" | '
        "\"second-person\" (the stricter of the service's and the act's applies).",
    )
    service_actions: dict[str, dict[str, ServiceAction]] = Field(
        default_factory=dict,
        description="Per-service runbook actions, written [services.<name>.actions.<action>] (description, argv, "
        "preview_argv, parameters, approval, timeout_seconds, pass_env; see docs/acts.md).",
    )
    act_approval: dict[Literal["restart", "resolve", "silence", "unsilence"], ApprovalMode] = Field(
        default_factory=dict,
        description='Per-act approval ([act_approval] restart = "out-of-band"); unset: in-band, the form in the '
        "client.",
    )
    act_limits: ActLimits = Field(
        default_factory=ActLimits,
        description="Limits past which an act is refused without asking anyone, counted from the journal "
        "([act_limits]): per_person_per_hour (approved restarts, resolves, silences and unsilences by one person, "
        "0-10000), restarts_per_service_per_hour (0-1000), cooldown_seconds after a service's restart (0-86400); 0 "
        "turns a limit off (see docs/acts.md).",
    )
    approval_page_client_id: str | None = Field(
        default=None,
        description="OAuth client id (public, PKCE) the approval page signs people in with at oauth_issuer; unset: "
        "the one-time link and the OS user.",
    )
    oncall: OncallConfig = Field(
        default_factory=OncallConfig,
        description="Who is on call ([oncall]): calendar (an iCalendar feed, a file or an https URL; each event's "
        "SUMMARY names the person), timeout_seconds (5), max_bytes (2 MiB), cache_seconds (300); see docs/tools.md.",
    )
    service_oncall_calendar: dict[str, str] = Field(
        default_factory=dict,
        description='Per-service on-call calendar, written [services.<name>] oncall_calendar = "<path or https URL>"; '
        "it overrides [oncall] calendar for that service's incidents.",
    )
    watch_interval_seconds: float = Field(
        default=30.0,
        ge=0.2,
        le=3600,
        description="How often the desk re-reads its incident sources while a client is subscribed to "
        "incident://index, to tell it of new, resolved and silenced incidents and of silences ending within 15 "
        "minutes.",
    )
    metrics_max_points: int = Field(
        default=500,
        ge=10,
        le=11_000,
        description="Most points per metric series in a result (the newest kept); a cut series says so.",
    )
    alert_expression_queries: bool = Field(
        default=False,
        description="Ask the service's own Prometheus for an alert's own expression (its generator URL's g0.expr) "
        f"beside the named queries, as the series `alert`, at most {ALERT_MAX_SERIES} series of {ALERT_MAX_POINTS} "
        "points; off because whoever "
        "raises an alert writes that expression and the desk would run it with its credentials.",
    )

    @model_validator(mode="before")
    @classmethod
    def _service_tables_apart(cls, data: Any) -> Any:
        """``[services.<name>]`` holds a service's logs, metrics and approval beside its restart action."""
        return split_service_tables(data)

    @field_validator("incident_sources")
    @classmethod
    def _source_names_are_unique(cls, value: list[Any]) -> list[Any]:
        return check_unique_names(value)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, EnvironmentSource(settings_cls), config_file_source(settings_cls)

    @field_validator("data_dir", "audit_db", "provider_api_key", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # A client config with an empty optional field must not mean "the current directory".
        return None if is_unset(value) else value

    @field_validator("data_dir")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("audit_db")
    @classmethod
    def _journal_file_or_url(cls, value: Path | str | None) -> Path | str | None:
        if value is None:
            return None
        if isinstance(value, str) and is_postgres_url(value):
            if url_has_password(value):
                # Settings come from flags, the environment and config files; a password belongs in none of them.
                raise ValueError(
                    "a postgresql:// URL must not carry a password: store it with `incident-desk key set "
                    "audit-db-password` or set INCIDENT_DESK_AUDIT_DB_PASSWORD"
                )
            return value
        return Path(value).expanduser()

    @field_validator("data_dir")
    @classmethod
    def _data_dir_exists(cls, value: Path | None) -> Path | None:
        # A typo here would otherwise serve an empty desk that looks healthy.
        if value is not None and not value.is_dir():
            raise ValueError(f"{value} is not a directory")
        return value

    @field_validator(*SERVICE_SETTINGS)
    @classmethod
    def _service_names_are_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_service_names(value)

    @field_validator("service_oncall_calendar")
    @classmethod
    def _calendars_are_files_or_urls(cls, value: dict[str, str]) -> dict[str, str]:
        return {service: check_location(location) for service, location in value.items()}

    @field_validator("service_actions")
    @classmethod
    def _action_names_are_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_action_names(value)

    @model_validator(mode="after")
    def _each_log_fits_the_spool(self) -> Settings:
        for service, config in sorted(self.service_logs.items()):
            if config.max_bytes > self.log_spool_max_bytes:
                raise ValueError(
                    f"services.{service}.logs.max_bytes ({config.max_bytes}) is larger than log_spool_max_bytes "
                    f"({self.log_spool_max_bytes}): one log must fit the spool"
                )
        return self

    @model_validator(mode="after")
    def _oauth_needs_an_issuer(self) -> Settings:
        if self.http_auth == "oauth" and not self.oauth_issuer:
            raise ValueError("oauth_issuer is required when http_auth is 'oauth'")
        return self

    @model_validator(mode="after")
    def _provider_needs_a_model(self) -> Settings:
        if self.provider != "none" and not self.provider_model:
            raise ValueError(f"provider_model is required when provider is {self.provider!r}")
        return self

    def approval_for(self, act: str, service: str | None) -> ApprovalMode:
        """How ``act`` on ``service`` is approved: the stricter of the service's and the act's setting."""
        by_act = self.act_approval.get(act)  # type: ignore[call-overload]
        return strictest(self.service_approval.get(service) if service else None, by_act)

    @model_validator(mode="after")
    def _approvers_can_sign_in(self) -> Settings:
        modes = {*self.service_approval.values(), *self.act_approval.values()}
        if self.approval_page_client_id and not self.oauth_issuer:
            raise ValueError("approval_page_client_id needs oauth_issuer (where approvers sign in)")
        if self.approval_page_client_id:
            return self
        if "second-person" in modes:
            raise ValueError(
                "approval = 'second-person' needs approval_page_client_id (with oauth_issuer): only a sign-in at "
                "the identity provider tells a second person from the requester"
            )
        if self.http_auth == "oauth" and "out-of-band" in modes:
            raise ValueError("approval = 'out-of-band' with http_auth = 'oauth' needs approval_page_client_id")
        return self

    @property
    def audit_url(self) -> str | None:
        """The PostgreSQL journal's URL, or None for the embedded SQLite journal."""
        return self.audit_db if isinstance(self.audit_db, str) else None

    @property
    def audit_path(self) -> Path:
        """The SQLite journal's file (meaningless when ``audit_url`` is set)."""
        return self.audit_db if isinstance(self.audit_db, Path) else user_data_dir() / "audit.sqlite3"

    @property
    def journal_desk(self) -> str:
        """``desk_name``, else a name made of the data directory, so two desks on one journal file see only their
        own events. Never the incident sources: adding one must not rename the desk (``core.journal.desks``)."""
        if self.desk_name:
            return self.desk_name
        return DEFAULT_DESK if self.data_dir is None else str(self.data_dir.resolve())

    @property
    def audit_location(self) -> str:
        return self.audit_url or str(self.audit_path)


def load_settings(overrides: Mapping[str, Any] | None = None, config_file: Path | None = None) -> Settings:
    """Build settings from every source, turning validation failures into one message per bad setting."""
    config_file = chosen_config_file(config_file)
    cli_values = {k: v for k, v in (overrides or {}).items() if v is not None}
    try:
        with reading(config_file):
            return Settings(**cli_values)
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc, Settings.model_fields, cli_values, config_file)) from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) can only be reached from here."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
