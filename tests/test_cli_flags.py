"""The command line's setting flags are read from the Settings model: one description of each setting."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal, get_args, get_origin

from incident_desk.cli.main import _settings_from
from incident_desk.cli.parser import SERVE_FLAGS, SETTINGS_FLAGS, build_parser
from incident_desk.settings.model import Settings


def _all_actions(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    found = [("incident-desk", action) for action in parser._actions]
    for sub in parser._actions:
        if isinstance(sub, argparse._SubParsersAction):
            for name, child in sub.choices.items():
                found += [(name, action) for action in child._actions]
    return found


# Flags that share a setting's name but mean something else: `key --metrics NAME` names a service's secret.
NOT_SETTINGS = {("key", "metrics")}


def test_every_flag_that_sets_a_setting_is_described_by_the_model() -> None:
    checked = 0
    for command, action in _all_actions(build_parser()):
        if action.dest not in Settings.model_fields or not action.option_strings:
            continue
        if (command, action.dest) in NOT_SETTINGS:
            continue
        assert action.dest in (*SETTINGS_FLAGS, *SERVE_FLAGS), f"`{command}` has a hand-written flag for {action.dest}"
        field = Settings.model_fields[action.dest]
        description = (field.description or "").rstrip(".")
        assert description, f"{action.dest} has no description in the Settings model"
        assert action.help is not None
        assert description[1:] in action.help, (command, action.option_strings, action.help)
        if get_origin(field.annotation) is Literal:
            assert list(action.choices or []) == list(get_args(field.annotation)), (command, action.dest)
        checked += 1
    assert checked > 30, "the walk over the parser saw almost no setting flags"


def test_the_flags_the_cli_passes_on_are_the_ones_it_declares(tmp_path: Path) -> None:
    assert set(SETTINGS_FLAGS) | set(SERVE_FLAGS) <= set(Settings.model_fields)
    args = build_parser(only="serve").parse_args(
        ["serve", "--data-dir", str(tmp_path), "--port", "9001", "--transport", "http", "--read-only", "--no-redact"]
    )
    settings = _settings_from(args)
    assert settings.data_dir == tmp_path
    assert (settings.port, settings.transport, settings.read_only) == (9001, "http", True)
    assert settings.redact_secrets is False
    assert settings.log_level == Settings.model_fields["log_level"].default, "an absent flag leaves the default"
