"""Silences in an incident's Alertmanager (API v2): made, expired and read back through :mod:`core.outside`, so
each call has the source's deadline and size cap. Blocking: callers run these off the event loop.

Matchers select exactly the alert: every one of its labels, by equality. The desk shows a silence from
Alertmanager's own state, so one made with ``amtool`` or the API shows the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from incident_desk.core import errors
from incident_desk.core.neighbours import outside
from incident_desk.core.neighbours.untrusted import masked_line, one_line
from incident_desk.core.sources.alertmanager import AlertmanagerSource, SourceDown


class SilenceError(errors.Unavailable):
    """Alertmanager did not make, expire or show the silence; the message says which and why."""


@dataclass(frozen=True)
class Silence:
    id: str
    state: str  # active, pending or expired (Alertmanager's word)
    ends_at: datetime
    created_by: str
    comment: str


def matchers(labels: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    return [{"name": name, "value": value, "isRegex": False, "isEqual": True} for name, value in labels]


def _call(source: AlertmanagerSource, method: str, path: str, body: Any = None) -> outside.Response:
    config = source.config
    try:
        headers, basic = source.auth()
    except SourceDown as exc:
        raise SilenceError(str(exc)) from None
    request = outside.Request(
        method,
        config.url.rstrip("/") + path,
        what=source.describe(),
        deadline_seconds=config.timeout_seconds,
        max_bytes=config.max_response_bytes,
        headers={"accept": "application/json", **headers},
        json_body=body,
        auth=basic,
    )
    try:
        return outside.exchange(request)
    except outside.OutsideError as exc:
        raise SilenceError(str(exc)) from None


def _answer_error(source: AlertmanagerSource, response: outside.Response, doing: str) -> SilenceError:
    detail = one_line(response.content.decode("utf-8", "replace"), 300)
    return SilenceError(f"{source.describe()} refused to {doing} (HTTP {response.status_code}: {detail})")


def create(
    source: AlertmanagerSource,
    labels: tuple[tuple[str, str], ...],
    starts: datetime,
    ends: datetime,
    created_by: str,
    comment: str,
) -> str:
    """Make the silence; its id."""
    body = {
        "matchers": matchers(labels),
        "startsAt": starts.isoformat(),
        "endsAt": ends.isoformat(),
        "createdBy": created_by,
        "comment": comment,
    }
    response = _call(source, "POST", "/api/v2/silences", body)
    if response.status_code != 200:
        raise _answer_error(source, response, "make the silence")
    try:
        silence_id = response.json()["silenceID"]
    except (ValueError, KeyError, TypeError):
        raise SilenceError(f"{source.describe()} made a silence but did not say its id") from None
    source.forget()
    return one_line(str(silence_id), 100)


def expire(source: AlertmanagerSource, silence_id: str) -> None:
    response = _call(source, "DELETE", f"/api/v2/silence/{silence_id}")
    if response.status_code != 200:
        raise _answer_error(source, response, f"expire silence {silence_id}")
    source.forget()


def read(source: AlertmanagerSource, silence_id: str) -> Silence:
    response = _call(source, "GET", f"/api/v2/silence/{silence_id}")
    if response.status_code != 200:
        raise _answer_error(source, response, f"show silence {silence_id}")
    try:
        data = response.json()
        return Silence(
            id=one_line(str(data["id"]), 100),
            state=one_line(str((data.get("status") or {}).get("state", "")), 20),
            ends_at=datetime.fromisoformat(str(data["endsAt"]).replace("Z", "+00:00")),
            created_by=masked_line(str(data.get("createdBy", "")), 200),
            comment=masked_line(str(data.get("comment", "")), 500),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise SilenceError(f"{source.describe()} answered silence {silence_id} with something unreadable") from None
