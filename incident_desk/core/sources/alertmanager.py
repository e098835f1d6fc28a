"""Prometheus Alertmanager (API v2) as an incident source: each active, unsilenced, uninhibited alert is an open
incident ``<source name>-<fingerprint>``; resolved or silenced alerts leave the index.

Answers are cached for ``cache_seconds`` and fetched under a lock, so a burst of tool calls makes one API call;
a failure is cached the same way, so a source that is down is not hammered either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx2

from incident_desk.core.desk import Incident, opened_time
from incident_desk.core.names import INCIDENT_ID, SERVICE_NAME, is_safe_name
from incident_desk.core.sources.config import AlertmanagerSourceConfig

SecretReader = Callable[[], str | None]


class SourceDown(Exception):
    """The source could not be asked; the message names the source and the reason, never a secret."""


class AlertmanagerSource:
    kind = "alertmanager"

    def __init__(self, config: AlertmanagerSourceConfig, secret: SecretReader) -> None:
        self.config = config
        self.name = config.name
        self._secret = secret
        self._lock = threading.Lock()
        self._cached: tuple[float, dict[str, Incident] | SourceDown] | None = None
        self.api_calls = 0

    @property
    def id_prefix(self) -> str:
        return f"{self.name}-"

    def describe(self) -> str:
        return f"alertmanager {self.name!r} at {self.config.url}"

    def incidents(self) -> dict[str, Incident]:
        """The open incidents now (at most ``cache_seconds`` old); SourceDown when Alertmanager cannot answer."""
        with self._lock:
            if self._cached is None or time.monotonic() - self._cached[0] >= self.config.cache_seconds:
                try:
                    result: dict[str, Incident] | SourceDown = self._fetch()
                except SourceDown as exc:
                    result = exc
                self._cached = (time.monotonic(), result)
            result = self._cached[1]
        if isinstance(result, SourceDown):
            raise result
        return result

    def _auth(self) -> httpx2.Auth | dict[str, str] | None:
        if self.config.auth == "none":
            return None
        secret = self._secret()
        if not secret:
            raise SourceDown(
                f"{self.describe()} needs a {'password' if self.config.auth == 'basic' else 'token'}: set it with "
                f"`incident-desk key set --source {self.name}` or INCIDENT_DESK_"
                f"{self.config.secret_name.upper().replace('-', '_').replace('.', '_')}"
            )
        if self.config.auth == "basic":
            return httpx2.BasicAuth(self.config.username or "", secret)
        return {"Authorization": f"Bearer {secret}"}

    def _fetch(self) -> dict[str, Incident]:
        auth = self._auth()
        url = self.config.url.rstrip("/") + "/api/v2/alerts"
        params = {"active": "true", "silenced": "false", "inhibited": "false"}
        self.api_calls += 1
        try:
            with httpx2.Client(timeout=self.config.timeout_seconds, follow_redirects=False) as client:
                response = client.get(
                    url,
                    params=params,
                    headers=auth if isinstance(auth, dict) else None,
                    auth=auth if isinstance(auth, httpx2.BasicAuth) else None,
                )
        except httpx2.TimeoutException:
            raise SourceDown(f"{self.describe()} did not answer within {self.config.timeout_seconds:g}s") from None
        except httpx2.HTTPError as exc:
            raise SourceDown(f"{self.describe()} cannot be reached: {exc.__class__.__name__}: {exc}") from None
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
        state = (alert.get("status") or {}).get("state", "active")
        fingerprint = alert.get("fingerprint")
        labels = alert.get("labels") or {}
        annotations = alert.get("annotations") or {}
        if state != "active" or not isinstance(fingerprint, str) or not isinstance(labels, dict):
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
        return Incident(
            id=incident_id,
            title=str(title or labels.get("alertname") or "alert"),
            service=str(service),
            severity=str(labels.get("severity") or "unknown"),
            status="firing",
            opened=opened,
            source=self.name,
        )
