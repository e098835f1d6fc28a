"""``incident-desk key`` and ``token``: keep the secrets the desk reads in the OS keychain, never in a file or argv.

``key set`` asks for a secret (input hidden); ``token create`` generates one and prints it once. Without a keychain,
``token create`` prints a fresh secret for the environment variable the desk also reads, and stores nothing.
"""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

from incident_desk.cli.output import err, out

if TYPE_CHECKING:
    from incident_desk.settings.model import Settings


def _secret_command(settings: Settings, name: str, action: str, *, value_source: str) -> int:
    from incident_desk.core import credentials

    service = settings.keyring_service
    try:
        if action in ("set", "create"):
            try:
                credentials.check_can_store(service, name)  # before the prompt: nothing typed is then lost
            except credentials.CredentialStoreError as exc:
                if value_source != "generate":
                    raise
                return _token_without_a_keychain(name, str(exc))
            if value_source == "generate":
                value = credentials.generate_token()
            else:
                try:
                    value = getpass.getpass(f"{name} (input hidden): ").strip()
                except EOFError:
                    value = ""
                if not value:
                    err("no value entered; nothing stored")
                    return 1
            credentials.store_secret(service, name, value)
            err(f"stored {name} in {credentials.backend_description()} (service {service!r})")
            if value_source == "generate":
                # Shown once, so it can be given to clients; it is never logged.
                out(value)
            return 0
        if action == "show":
            stored = credentials.read_secret(service, name)
            if stored is None:
                err(f"no {name} stored in the keychain (service {service!r})")
                return 1
            out(credentials.mask(stored))
            return 0
        removed = credentials.delete_secret(service, name)
        err(f"deleted {name}" if removed else f"no {name} was stored")
        return 0
    except credentials.CredentialStoreError as exc:
        err(str(exc))
        return 1


def _token_without_a_keychain(name: str, problem: str) -> int:
    """No keychain to keep a generated token: print one for the environment variable the desk also reads."""
    from incident_desk.core import credentials

    variable = credentials.env_var_name(name)
    share = "give it to each client" if name == credentials.HTTP_TOKEN else "the same on every replica"
    err(problem.split("; or set ")[0])
    err(
        f"nothing stored; here is a fresh {name} for {variable}: set it in the desk's environment ({share}), "
        "e.g. in the service's environment file, never in a config file"
    )
    out(credentials.generate_token())  # shown once, on stdout only, so it can be piped; never logged
    return 0


def run_key(settings: Settings, action: str, kind: str, source: str | None = None, metrics: str | None = None) -> int:
    from incident_desk.core.credentials import AUDIT_DB_PASSWORD, PROVIDER_API_KEY

    name = AUDIT_DB_PASSWORD if kind == "audit-db" else PROVIDER_API_KEY
    if source is not None:
        name = f"source-{source}"
    if metrics is not None:
        name = f"metrics-{metrics}"
    return _secret_command(settings, name, action, value_source="prompt")


def run_token(settings: Settings, action: str, kind: str) -> int:
    from incident_desk.core.credentials import HTTP_TOKEN, SEALING_KEY

    name = HTTP_TOKEN if kind == "http" else SEALING_KEY
    return _secret_command(settings, name, action, value_source="generate")
