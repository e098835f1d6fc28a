"""Desktop MCP client configs: a registry of twelve clients, ready snippets, and a merge that keeps the rest.

The names below are loaded on first use: the CLI's parser needs only the registry's client names, and serving
must not pay for the YAML and TOML writers (ruamel, tomlkit) that only ``config --write`` uses.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from incident_desk.client_configs.merge import write_config as write_config
    from incident_desk.client_configs.registry import CLIENT_NAMES as CLIENT_NAMES
    from incident_desk.client_configs.registry import CLIENTS as CLIENTS
    from incident_desk.client_configs.registry import SERVER_NAME as SERVER_NAME
    from incident_desk.client_configs.registry import ClientConfigError as ClientConfigError
    from incident_desk.client_configs.registry import Launcher as Launcher
    from incident_desk.client_configs.registry import default_config_path as default_config_path
    from incident_desk.client_configs.registry import detect_launcher as detect_launcher
    from incident_desk.client_configs.registry import display_config_path as display_config_path
    from incident_desk.client_configs.registry import uvx_launcher as uvx_launcher
    from incident_desk.client_configs.render import DEFAULT_HTTP_URL as DEFAULT_HTTP_URL
    from incident_desk.client_configs.render import PLACEHOLDER_CHECKOUT as PLACEHOLDER_CHECKOUT
    from incident_desk.client_configs.render import PLACEHOLDER_EXECUTABLE as PLACEHOLDER_EXECUTABLE
    from incident_desk.client_configs.render import example_files as example_files
    from incident_desk.client_configs.render import readme_table as readme_table
    from incident_desk.client_configs.render import render_snippet as render_snippet
    from incident_desk.client_configs.render import write_examples as write_examples

_HOME = {
    "write_config": "merge",
    "CLIENT_NAMES": "registry",
    "CLIENTS": "registry",
    "SERVER_NAME": "registry",
    "ClientConfigError": "registry",
    "Launcher": "registry",
    "default_config_path": "registry",
    "detect_launcher": "registry",
    "display_config_path": "registry",
    "uvx_launcher": "registry",
    "DEFAULT_HTTP_URL": "render",
    "PLACEHOLDER_CHECKOUT": "render",
    "PLACEHOLDER_EXECUTABLE": "render",
    "example_files": "render",
    "readme_table": "render",
    "render_snippet": "render",
    "write_examples": "render",
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
