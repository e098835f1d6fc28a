"""Which settings a client's entry carries, so the desk the client starts is the one this shell would serve.

``incident-desk config`` writes them into the entry's ``env``: paths absolute, secrets and serving settings left
out, everything validated here as the launched desk will load it.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from incident_desk.core.credentials import ENV_PREFIX, SECRET_SETTINGS
from incident_desk.core.journal.audit import is_postgres_url
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import Settings, load_settings
from incident_desk.settings.sources import CONFIG_ENV_VAR

# How a desk serves: a client starts its desk over stdio, whatever the shell that ran `config` serves with.
_SERVING_SETTINGS = frozenset({"transport", "host", "port", "stateless", "allowed_hosts", "allowed_origins"})
# Read relative to the working directory, which is the client's own when a client starts the desk.
_PATH_SETTINGS = ("config", "data_dir", "audit_db")


@dataclass(frozen=True)
class ClientLaunch:
    """What ``incident-desk config`` puts in a client's entry so the desk the client starts is the user's own."""

    env: dict[str, str]  # INCIDENT_DESK_* variables: non-secret, paths absolute
    left_out: dict[str, str]  # variable -> why it is not written
    settings: Settings  # what the launched desk will load, already validated
    config_file: Path | None

    def desk(self) -> str:
        """Which desk the client will see, in words."""
        data = self.settings.data_dir
        where = f"the desk in {data}" if data is not None else "the bundled sample desk"
        return where + (f", configured by {self.config_file}" if self.config_file else "")


def client_launch(flags: Mapping[str, Any]) -> ClientLaunch:
    """The settings this shell runs with, ``flags`` over ``INCIDENT_DESK_*`` variables, as a client entry's env.

    Paths become absolute (a client starts the desk in a working directory of its own); secrets are left out (a
    client config gets copied and shared); so are serving settings (the client talks stdio). Everything carried
    is loaded as the launched desk will load it, so a typo fails here instead of in the client's log.
    """
    env: dict[str, str] = {}
    left_out: dict[str, str] = {}
    for name, value in sorted(os.environ.items()):
        if not name.upper().startswith(ENV_PREFIX) or not value.strip():
            continue
        setting = name[len(ENV_PREFIX) :].lower().split("__")[0]
        if setting in SECRET_SETTINGS:
            left_out[name] = (
                "a secret; the desk the client starts reads it from the OS keychain (`incident-desk key set` / "
                "`incident-desk token create`) or from the client's own environment"
            )
        elif setting in _SERVING_SETTINGS:
            left_out[name] = "the client starts its desk over stdio"
        elif setting in Settings.model_fields or setting == "config":
            env[name if "__" in name else name.upper()] = value
        else:
            left_out[name] = "not a setting of this desk"  # settings.errors.unknown_environment_variables
    env.update({ENV_PREFIX + name.upper(): str(value) for name, value in flags.items() if value is not None})
    paths = {name: ENV_PREFIX + name.upper() for name in _PATH_SETTINGS}
    for variable in paths.values():
        if variable in env and not is_postgres_url(env[variable]):
            env[variable] = str(Path(env[variable]).expanduser().absolute())
    config_file = Path(env[CONFIG_ENV_VAR]) if CONFIG_ENV_VAR in env else None
    # The launched desk serves stdio with defaults for the rest, whatever this shell's serving variables say.
    serving = {name: Settings.model_fields[name].get_default(call_default_factory=True) for name in _SERVING_SETTINGS}
    carried = {name: env[variable] for name, variable in paths.items() if variable in env and name != "config"}
    other_flags = {name: value for name, value in flags.items() if name != "config"}
    settings = load_settings({**other_flags, **serving, **carried}, config_file)
    for name in ("data_dir", "audit_db"):
        value = getattr(settings, name)
        if isinstance(value, Path) and not value.is_absolute():
            raise SettingsError(
                f"invalid setting {name} in config file {config_file}: {value} is relative, and a client starts "
                "the desk in a working directory of its own; make it absolute"
            )
    file_values = tomllib.loads(config_file.read_text(encoding="utf-8")) if config_file else {}
    if file_values.get("transport", "stdio") != "stdio":
        env[ENV_PREFIX + "TRANSPORT"] = "stdio"  # the file serves HTTP; the desk of this entry talks stdio
    return ClientLaunch(dict(sorted(env.items())), left_out, settings, config_file)
