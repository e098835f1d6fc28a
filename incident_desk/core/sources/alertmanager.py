"""Prometheus Alertmanager (API v2) as an incident source: each firing, uninhibited alert is an open incident
``<source name>-<fingerprint>``, with the silences muting it (Alertmanager's own state, whoever made them);
resolved and inhibited alerts leave the index.

Answers are cached for ``cache_seconds`` and fetched under a lock, so a burst of tool calls makes one API call;
a failure is cached the same way, so a source that is down is not hammered either. Each fetch is one exchange
through :mod:`core.outside` (a total deadline of ``timeout_seconds``, a body of at most ``max_response_bytes``),
and every field shown is untrusted text made one visible, capped line by :mod:`core.untrusted`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from incident_desk.core import errors
from incident_desk.core.incidents import Incident, Listing, opened_time
from incident_desk.core.names import INCIDENT_ID, SERVICE_NAME, is_safe_name
from incident_desk.core.neighbours import outside
from incident_desk.core.neighbours.metrics import alert_expression
from incident_desk.core.neighbours.untrusted import masked_line, one_line
from incident_desk.core.sources.config import AlertmanagerSourceConfig

SecretReader = Callable[[], str | None]


class SourceDown(errors.Unavailable):
    """The source could not be asked; the message names the source and the reason, never a secret."""


class SourceLoading(SourceDown):
    """Another request's fetch is still under way and this caller would not wait for it."""


@dataclass(frozen=True, slots=True)
class _Answer:
    """One fetch's result and when it was asked and answered (monotonic seconds)."""

    asked: float
    answered: float
    result: dict[str, Incident] | SourceDown

    def serves(self, arrived: float, cache_seconds: float) -> bool:
        """Whether a caller that arrived at ``arrived`` may take it: within ``cache_seconds`` of the question, or
        a question asked after the caller arrived (so it cannot predate a change the caller made or saw). A
        failure that came after the caller arrived serves too, so a burst waits one deadline of a hanging source.
        """
        if time.monotonic() - self.asked < cache_seconds or self.asked >= arrived:
            return True
        return isinstance(self.result, SourceDown) and self.answered >= arrived


class AlertmanagerSource:
    kind = "alertmanager"

    def __init__(self, config: AlertmanagerSourceConfig, secret: SecretReader) -> None:
        self.config = config
        self.name = config.name
        self._secret = secret
        self._lock = threading.Lock()
        self._cached: _Answer | None = None
        self._forgotten = 0  # how many times the cache was dropped: a fetch begun before keeps its answer to itself
        self._asking_since: float | None = None
        self.api_calls = 0

    @property
    def id_prefix(self) -> str:
        return f"{self.name}-"

    def describe(self) -> str:
        return f"alertmanager {self.name!r} at {self.config.url}"

    def may_wait(self, incident_id: str | None = None) -> bool:
        """Any look at everything may wait on Alertmanager; a look at one id only when the id is this source's."""
        return incident_id is None or incident_id.startswith(self.id_prefix)

    def look(self, wait: float | None = None) -> Listing:
        """The firing alerts as incidents (SourceDown); runbooks and problems come from elsewhere."""
        return Listing(self.incidents(wait), (), ())

    def find(self, incident_id: str) -> Incident | None:
        """The incident when the id is this source's (SourceDown, SourceLoading); None without asking otherwise."""
        if not incident_id.startswith(self.id_prefix):
            return None
        return self.incidents().get(incident_id)

    def own_log(self, incident_id: str) -> BinaryIO | None:
        """None: an alert has no log of its own, its service's configured log source is read."""
        return None

    def silencer(self) -> AlertmanagerSource:
        return self

    def known_up(self) -> bool | None:
        """Unknown without asking: the desk keeps each outside source's last answer itself."""
        return None

    def check(self) -> tuple[bool, str]:
        try:
            found = self.incidents()
        except SourceDown as exc:
            return False, str(exc)
        return True, f"{self.describe()}: {len(found)} firing"

    def incidents(self, wait: float | None = None) -> dict[str, Incident]:
        """The open incidents now (at most ``cache_seconds`` old); SourceDown when Alertmanager cannot answer.

        Blocks for at most the source's deadline, or ``wait`` seconds when given: a caller that finds another
        one's fetch under way after ``wait`` gets :class:`SourceLoading`. A caller that waited for another's fetch
        asks again unless the cache is fresh: that fetch's question may predate an alert the caller knows of. A
        burst makes at most two fetches (every waiter shares the second), and a failure is shared, so a burst
        against a hanging source waits one deadline, not one each.
        """
        started = time.monotonic()
        if not self._lock.acquire(timeout=-1 if wait is None else wait):
            asking = self._asking_since
            since = f" (asked {time.monotonic() - asking:.1f}s ago" if asking is not None else " ("
            raise SourceLoading(
                f"{self.describe()} is still loading{since}; it gets {self.config.timeout_seconds:g}s to answer)"
            )
        try:
            cached = self._cached
            if cached is None or not cached.serves(started, self.config.cache_seconds):
                asked = self._asking_since = time.monotonic()
                forgotten = self._forgotten
                try:
                    result: dict[str, Incident] | SourceDown = self._fetch()
                except SourceDown as exc:
                    result = exc
                finally:
                    self._asking_since = None
                cached = _Answer(asked, time.monotonic(), result)
                if self._forgotten == forgotten:  # else the desk made or expired a silence meanwhile: stale
                    self._cached = cached
            result = cached.result
        finally:
            self._lock.release()
        if isinstance(result, SourceDown):
            raise result
        return result

    def forget(self, incident_id: str | None = None) -> None:
        """Drop the cached answer (when ``incident_id`` is None or this source's): the next read asks Alertmanager
        (after the desk made or expired a silence, or for a fresh look at one incident). Never waits for the
        lock (a fetch may hold it for its whole deadline); a fetch under way when it is
        called does not put its answer, asked before the change, in the cache."""
        if incident_id is not None and not incident_id.startswith(self.id_prefix):
            return
        self._forgotten += 1
        self._cached = None

    def auth(self) -> tuple[dict[str, str], tuple[str, str] | None]:
        """Headers and basic auth for the request."""
        if self.config.auth == "none":
            return {}, None
        secret = self._secret()
        if not secret:
            raise SourceDown(
                f"{self.describe()} needs a {'password' if self.config.auth == 'basic' else 'token'}: set it with "
                f"`incident-desk key set --source {self.name}` or INCIDENT_DESK_"
                f"{self.config.secret_name.upper().replace('-', '_').replace('.', '_')}"
            )
        if self.config.auth == "basic":
            return {}, (self.config.username or "", secret)
        return {"Authorization": f"Bearer {secret}"}, None

    def _fetch(self) -> dict[str, Incident]:
        headers, basic = self.auth()
        self.api_calls += 1
        request = outside.Request(
            "GET",
            self.config.url.rstrip("/") + "/api/v2/alerts",
            what=self.describe(),
            deadline_seconds=self.config.timeout_seconds,
            max_bytes=self.config.max_response_bytes,
            params={"active": "true", "silenced": "true", "inhibited": "false"},
            headers={"accept": "application/json", **headers},
            auth=basic,
        )
        try:
            response = outside.exchange(request)
        except outside.OutsideError as exc:
            raise SourceDown(str(exc)) from None
        if response.status_code in (401, 403):
            raise SourceDown(f"{self.describe()} refused the credentials (HTTP {response.status_code})")
        if response.status_code != 200:
            raise SourceDown(f"{self.describe()} answered HTTP {response.status_code}")
        try:
            alerts = response.json()
        except ValueError:
            raise SourceDown(f"{self.describe()} answered something that is not JSON") from None
        if not isinstance(alerts, list):
            raise SourceDown(f"{self.describe()} answered JSON that is not a list of alerts")
        incidents: dict[str, Incident] = {}
        for alert in alerts:
            incident = self._incident(alert)
            if incident is not None:
                incidents[incident.id] = incident
        return incidents

    def _incident(self, alert: Any) -> Incident | None:
        """An alert as an incident; None for one that is not firing or lacks what an incident needs."""
        if not isinstance(alert, dict):
            return None
        status = alert.get("status") or {}
        state = status.get("state", "active") if isinstance(status, dict) else "active"
        silenced_by = status.get("silencedBy") if isinstance(status, dict) else None
        silences = [str(s) for s in silenced_by if isinstance(s, str)] if isinstance(silenced_by, list) else []
        inhibited = isinstance(status, dict) and bool(status.get("inhibitedBy"))
        fingerprint = alert.get("fingerprint")
        labels = alert.get("labels") or {}
        annotations = alert.get("annotations") or {}
        firing = state == "active" or (state == "suppressed" and silences and not inhibited)
        if not firing or not isinstance(fingerprint, str) or not isinstance(labels, dict):
            return None
        incident_id = f"{self.id_prefix}{fingerprint}"
        if not is_safe_name(incident_id, INCIDENT_ID):
            return None
        service = labels.get(self.config.service_label) or labels.get(self.config.fallback_service_label) or ""
        if not is_safe_name(str(service), SERVICE_NAME):
            service = "unknown"
        try:
            opened = opened_time(str(alert.get("startsAt", "")).replace("Z", "+00:00"))
        except ValueError:
            return None
        title = annotations.get("summary") if isinstance(annotations, dict) else None
        cap = self.config.max_field_chars
        return Incident(
            id=incident_id,
            title=masked_line(title or labels.get("alertname") or "alert", cap),
            service=str(service),
            severity=one_line(labels.get("severity") or "unknown", cap),
            status="firing",
            opened=opened,
            source=self.name,
            expression=alert_expression(
                alert.get("generatorURL") if isinstance(alert.get("generatorURL"), str) else None
            ),
            # Kept whole, not cut: a silence must match the alert's labels exactly.
            labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
            silenced_by=tuple(sorted(one_line(s, 100) for s in silences)),
        )
