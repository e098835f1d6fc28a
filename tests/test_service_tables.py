"""``[services.<name>]`` tables: the restart action, logs, metrics and approval each reach their own setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import load_settings
from incident_desk.settings.service_tables import split_service_tables


def test_each_key_of_a_service_table_goes_to_its_own_setting() -> None:
    raw = {
        "services": {
            "api": {"kind": "simulate", "logs": {"kind": "files"}, "metrics": {"url": "u"}, "approval": "in-band"},
            "web": {"approval": "out-of-band"},
            "db": {"logs": {"kind": "journald"}},
            "cache": {"actions": {"flush": {"description": "Flush"}}},
            "pay": {"oncall_calendar": "/etc/oncall/pay.ics"},
        },
        "service_logs": {"cache": {"kind": "command"}},
    }
    assert split_service_tables(raw) == {
        "services": {"api": {"kind": "simulate"}},
        "service_logs": {"cache": {"kind": "command"}, "api": {"kind": "files"}, "db": {"kind": "journald"}},
        "service_metrics": {"api": {"url": "u"}},
        "service_approval": {"api": "in-band", "web": "out-of-band"},
        "service_actions": {"cache": {"flush": {"description": "Flush"}}},
        "service_oncall_calendar": {"pay": "/etc/oncall/pay.ics"},
    }


def test_a_config_file_service_table_loads_with_its_approval(tmp_path: Path) -> None:
    config = tmp_path / "desk.toml"
    config.write_text(
        '[services.api]\nkind = "simulate"\napproval = "in-band"\n\n[services.web]\napproval = "in-band"\n',
        encoding="utf-8",
    )
    settings = load_settings({}, config)
    assert sorted(settings.services) == ["api"]
    assert settings.service_approval == {"api": "in-band", "web": "in-band"}


def test_a_bad_service_name_in_any_sub_table_is_named(tmp_path: Path) -> None:
    config = tmp_path / "desk.toml"
    config.write_text('[services."bad name"]\napproval = "in-band"\n', encoding="utf-8")
    with pytest.raises(SettingsError, match=r"invalid service name.*'bad name'"):
        load_settings({}, config)
