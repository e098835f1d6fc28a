"""Desktop MCP client configs: a registry of twelve clients, ready snippets, and a merge that keeps the rest."""

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
