"""The desk's secrets in the OS keychain, so no API key or token ever sits in a client's config file.

The environment (already parsed by pydantic-settings) wins over the keychain. A missing or broken keychain
backend (headless Linux has only keyring's ``fail`` backend) is reported as a sentence, never as a crash,
and no message here ever contains a secret value. ``keyring`` is imported lazily: its backend discovery
costs start-up time the stdio path should not pay unless a secret is actually needed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from incident_desk.core import errors

if TYPE_CHECKING:
    from pydantic import SecretStr

ENV_PREFIX = "INCIDENT_DESK_"
# The settings that hold secrets: never accepted from a config file, never handed to a restart command.
SECRET_SETTINGS = frozenset(
    {"provider_api_key", "http_token", "sealing_key", "audit_db_password", "oauth_introspection_client_secret"}
)

# Keychain entry names (the keyring "username" under the configured service).
PROVIDER_API_KEY = "provider-api-key"
HTTP_TOKEN = "http-token"  # noqa: S105 -- a keychain entry name, not a secret
SEALING_KEY = "sealing-key"
AUDIT_DB_PASSWORD = "audit-db-password"  # noqa: S105 -- a keychain entry name, not a secret

_MASK = "****"
_MIN_LEN_TO_SHOW_TAIL = 16
_TAIL = 4
_VENDOR_PREFIXES = ("sk-ant-", "sk-proj-", "sk-")


class CredentialStoreError(errors.Unavailable):
    """The keychain could not store, read or delete a secret; the message names the backend problem."""


@dataclass(frozen=True)
class SecretLookup:
    """Where a secret came from, or why the keychain could not be asked (``problem``, secret-free)."""

    value: str | None
    source: Literal["environment", "keychain"] | None
    problem: str | None = None


def env_var_name(name: str) -> str:
    """The environment variable that overrides a keychain entry, for hints in messages."""
    return ENV_PREFIX + name.upper().replace("-", "_")


def resolve_secret(env_value: SecretStr | None, service: str, name: str) -> SecretLookup:
    """Environment first, then the keychain; an unusable keychain becomes ``problem`` instead of raising.

    An empty environment value counts as unset: ``VAR=`` in a launcher usually means "not configured".
    """
    if env_value is not None and env_value.get_secret_value():
        return SecretLookup(env_value.get_secret_value(), "environment", None)
    try:
        value = read_secret(service, name)
    except CredentialStoreError as exc:
        return SecretLookup(None, None, str(exc))
    if value is None:
        return SecretLookup(None, None, None)
    return SecretLookup(value, "keychain", None)


def read_secret(service: str, name: str) -> str | None:
    """The stored secret, or None when nothing (or an empty string) is stored."""
    try:
        import keyring

        value = keyring.get_password(service, name)
    except Exception as exc:
        raise CredentialStoreError(_describe_failure("read", name, exc)) from None
    return value or None


def store_secret(service: str, name: str, value: str) -> None:
    """Store and read back: some backends (keyring's ``null``) accept a secret and silently drop it."""
    if not value:
        raise CredentialStoreError(f"refusing to store an empty {name}")
    try:
        import keyring

        keyring.set_password(service, name, value)
        kept = keyring.get_password(service, name)
    except Exception as exc:
        raise CredentialStoreError(_describe_failure("store", name, exc, secret=value)) from None
    if kept != value:
        raise CredentialStoreError(
            f"the keychain backend {backend_description()} did not keep {name} "
            f"(it stores nothing); use a real keychain or set {env_var_name(name)}"
        )


def check_can_store(service: str, name: str) -> None:
    """Raise the reason ``store_secret`` would fail, before anyone types a secret that would then be lost."""
    try:
        import keyring
        from keyring.backends import fail, null

        backend = keyring.get_keyring()
        if isinstance(backend, fail.Keyring):
            keyring.get_password(service, name)  # raises NoKeyringError, described below
        if isinstance(backend, null.Keyring):
            raise CredentialStoreError(
                f"the keychain backend {backend_description()} would not keep {name} "
                f"(it stores nothing); use a real keychain or set {env_var_name(name)}"
            )
        keyring.get_password(service, name)
    except CredentialStoreError:
        raise
    except Exception as exc:
        raise CredentialStoreError(_describe_failure("store", name, exc)) from None


def delete_secret(service: str, name: str) -> bool:
    """Remove a stored secret; False when there was nothing to remove."""
    if read_secret(service, name) is None:
        return False
    try:
        import keyring

        keyring.delete_password(service, name)
    except Exception as exc:
        raise CredentialStoreError(_describe_failure("delete", name, exc)) from None
    return True


def mask(value: str) -> str:
    """Enough of a key to recognise it (vendor prefix, last 4 characters), never enough to use it."""
    if len(value) < _MIN_LEN_TO_SHOW_TAIL:
        return _MASK
    prefix = next((p for p in _VENDOR_PREFIXES if value.startswith(p)), "")
    return f"{prefix}…{value[-_TAIL:]}"


def generate_token() -> str:
    """A fresh random HTTP bearer token or sealing key (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def backend_description() -> str:
    """The active keyring backend and its priority, for ``doctor``; never raises."""
    try:
        import keyring

        backend = keyring.get_keyring()
        cls = type(backend)
        return f"{cls.__module__}.{cls.__qualname__} (priority {cls.priority:g})"
    except Exception as exc:
        return f"unavailable ({type(exc).__name__}: {exc})"


def _describe_failure(action: str, name: str, exc: Exception, *, secret: str | None = None) -> str:
    """One sentence for a keychain failure, with a hint for the headless-Linux case and no secret in it."""
    if _is_no_keyring(exc):
        detail = (
            "no OS keychain is available (keyring found only its 'fail' backend, typical of headless "
            "Linux without a Secret Service); start a Secret Service such as gnome-keyring, choose a "
            "backend with PYTHON_KEYRING_BACKEND"
        )
    else:
        reason = str(exc).strip()
        if secret:
            reason = reason.replace(secret, "[redacted]")
        detail = f"the keychain backend {backend_description()} failed: {type(exc).__name__}"
        if reason:
            detail += f": {reason}"
    return f"cannot {action} {name} in the OS keychain: {detail}; or set {env_var_name(name)} instead"


def _is_no_keyring(exc: Exception) -> bool:
    try:
        from keyring.errors import NoKeyringError
    except ImportError:
        return False
    return isinstance(exc, NoKeyringError)
