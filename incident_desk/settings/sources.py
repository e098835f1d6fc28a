"""Where settings come from besides the command line: which config file, read how, and what counts as left empty.

The config file is read by pydantic-settings' own TOML source, refusing secrets; the file to read is chosen once
per load (``reading``) and handed to the model's sources through a context variable, since pydantic-settings builds
its sources from the class, not from the call.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from pydantic_settings import BaseSettings, EnvSettingsSource, TomlConfigSettingsSource

from incident_desk.core.credentials import ENV_PREFIX, SECRET_SETTINGS
from incident_desk.settings.errors import SettingsError

CONFIG_ENV_VAR = "INCIDENT_DESK_CONFIG"

_config_file_path: ContextVar[Path | None] = ContextVar("_config_file_path", default=None)


class ConfigFileSource(TomlConfigSettingsSource):
    """pydantic-settings' own TOML source, refusing secrets: a config file gets copied, pasted and committed.

    Read through the source's public constructor and its ``toml_data``, not its private per-file reader.
    """

    def __init__(self, settings_cls: type[BaseSettings], toml_file: Path | None) -> None:
        try:
            super().__init__(settings_cls, toml_file=toml_file)
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"config file {toml_file} cannot be read: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"config file {toml_file} is not valid TOML: {exc}") from None
        leaked = sorted(SECRET_SETTINGS & self.toml_data.keys())
        if leaked:
            raise SettingsError(
                f"config file {toml_file} holds {', '.join(leaked)}: secrets belong in the OS keychain "
                f"(`incident-desk key set` / `incident-desk token create`) or {ENV_PREFIX}* environment variables"
            )


class EnvironmentSource(EnvSettingsSource):
    """pydantic-settings' own ``INCIDENT_DESK_*`` source, where a variable left empty is no value at all.

    A client's plugin or a bundle passes ``INCIDENT_DESK_DATA_DIR=""`` (or its unfilled placeholder) for a field
    the user left empty; taken as a value it would override the config file and serve the sample desk.
    """

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self.env_vars = {name: value for name, value in self.env_vars.items() if not is_unset(value)}


def config_file_source(settings_cls: type[BaseSettings]) -> ConfigFileSource:
    """The config file source for the load under way (no file outside ``reading``)."""
    return ConfigFileSource(settings_cls, toml_file=_config_file_path.get())


@contextmanager
def reading(config_file: Path | None) -> Iterator[None]:
    """Settings built inside read ``config_file``."""
    token = _config_file_path.set(config_file)
    try:
        yield
    finally:
        _config_file_path.reset(token)


def chosen_config_file(config_file: Path | None) -> Path | None:
    """``config_file``, else ``INCIDENT_DESK_CONFIG``; one named must be a file."""
    if config_file is None and not is_unset(os.environ.get(CONFIG_ENV_VAR, "")):
        config_file = Path(os.environ[CONFIG_ENV_VAR]).expanduser()
    if config_file is not None and not config_file.is_file():
        # pydantic-settings skips a missing file; a typo in --config must not silently mean "no config".
        problem = "is not a file" if config_file.exists() else "does not exist"
        raise SettingsError(f"config file {config_file} {problem}")
    return config_file


# What a bundle host (Claude Desktop's .mcpb) leaves in place of an optional user_config field left empty.
_UNFILLED_PLACEHOLDER = re.compile(r"\$\{user_config\.[^}]*\}")


def is_unset(value: object) -> bool:
    """An optional value a client left empty: blank, or a bundle's user_config placeholder never filled in."""
    return isinstance(value, str) and (not value.strip() or _UNFILLED_PLACEHOLDER.fullmatch(value.strip()) is not None)
