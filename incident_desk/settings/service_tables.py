"""``[services.<name>]``: one table per service in the config file, one setting per idea in the model.

A service's table holds its restart action beside ``logs``, ``metrics``, ``approval``, ``actions`` and
``oncall_calendar``; the model keeps each in a
field of its own (``services``, ``service_logs``, ``service_metrics``, ``service_approval``), so each is validated
against its own shape and a service may have any of them without the others.
"""

from __future__ import annotations

from typing import Any

from incident_desk.core.names import SERVICE_NAME, is_safe_name

# Each key of a service's table that is a setting of its own, and that setting.
SUB_TABLES = {
    "logs": "service_logs",
    "metrics": "service_metrics",
    "approval": "service_approval",
    "actions": "service_actions",
    "oncall_calendar": "service_oncall_calendar",
}
SERVICE_SETTINGS = ("services", *SUB_TABLES.values())


def split_service_tables(data: Any) -> Any:
    """The raw settings with each ``[services.<name>]`` table's logs, metrics, approval and actions in their own
    settings."""
    if not (isinstance(data, dict) and isinstance(data.get("services"), dict)):
        return data
    services: dict[str, Any] = {}
    split = {setting: dict(data.get(setting) or {}) for setting in SUB_TABLES.values()}
    for name, table in data["services"].items():
        if isinstance(table, dict) and SUB_TABLES.keys() & table.keys():
            for key, setting in SUB_TABLES.items():
                if key in table:
                    split[setting][name] = table[key]
            table = {key: value for key, value in table.items() if key not in SUB_TABLES}
            if not table:
                continue  # a service with a log source, metrics, an approval mode or actions and no restart action
        services[name] = table
    return {**data, "services": services, **split}


def check_service_names(value: dict[str, Any]) -> dict[str, Any]:
    """``value``, if every service name in it is a safe one."""
    bad = sorted(name for name in value if not is_safe_name(name, SERVICE_NAME))
    if bad:
        raise ValueError(f"invalid service name(s) {', '.join(map(repr, bad))}: use letters, digits, . _ -")
    return value
