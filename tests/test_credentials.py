"""Keychain access through real keyring backends: in-memory, keyring's fail and null ones, a broken one."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from keyring.backend import KeyringBackend
from keyring.errors import PasswordSetError
from pydantic import SecretStr

from incident_desk.core import credentials
from incident_desk.core.credentials import (
    HTTP_TOKEN,
    PROVIDER_API_KEY,
    SEALING_KEY,
    CredentialStoreError,
    SecretLookup,
    backend_description,
    delete_secret,
    generate_token,
    mask,
    read_secret,
    resolve_secret,
    store_secret,
)
from tests.fakes import MemoryKeyring, failing_keyring, null_keyring, using_keyring

SERVICE = "incident-desk-test"
SECRET = "sk-live-0123456789abcdefghijWXYZ"


class BrokenKeyring(MemoryKeyring):
    """A backend whose daemon misbehaves, echoing the secret in its error (some do)."""

    def get_password(self, service: str, username: str) -> str | None:
        raise RuntimeError("org.freedesktop.DBus.Error.ServiceUnknown: the name is not activatable")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise PasswordSetError(f"could not write {password!r} to the collection")


@pytest.fixture
def memory() -> Iterator[MemoryKeyring]:
    with using_keyring(MemoryKeyring()) as backend:
        assert isinstance(backend, MemoryKeyring)
        yield backend


@pytest.fixture
def failing() -> Iterator[KeyringBackend]:
    with using_keyring(failing_keyring()) as backend:
        yield backend


@pytest.fixture
def broken() -> Iterator[KeyringBackend]:
    with using_keyring(BrokenKeyring()) as backend:
        yield backend


def test_names_are_stable() -> None:
    assert (PROVIDER_API_KEY, HTTP_TOKEN, SEALING_KEY) == ("provider-api-key", "http-token", "sealing-key")


def test_store_read_delete_round_trip(memory: MemoryKeyring) -> None:
    store_secret(SERVICE, PROVIDER_API_KEY, SECRET)
    assert memory.store == {(SERVICE, PROVIDER_API_KEY): SECRET}
    assert read_secret(SERVICE, PROVIDER_API_KEY) == SECRET
    assert read_secret(SERVICE, HTTP_TOKEN) is None
    assert delete_secret(SERVICE, PROVIDER_API_KEY) is True
    assert memory.store == {}
    assert delete_secret(SERVICE, PROVIDER_API_KEY) is False


def test_resolve_prefers_environment(memory: MemoryKeyring) -> None:
    store_secret(SERVICE, PROVIDER_API_KEY, SECRET)
    assert resolve_secret(SecretStr("from-env"), SERVICE, PROVIDER_API_KEY) == SecretLookup(
        "from-env", "environment", None
    )


def test_resolve_falls_back_to_keychain_and_to_nothing(memory: MemoryKeyring) -> None:
    assert resolve_secret(None, SERVICE, SEALING_KEY) == SecretLookup(None, None, None)
    store_secret(SERVICE, SEALING_KEY, SECRET)
    assert resolve_secret(None, SERVICE, SEALING_KEY) == SecretLookup(SECRET, "keychain", None)
    assert resolve_secret(SecretStr(""), SERVICE, SEALING_KEY) == SecretLookup(SECRET, "keychain", None)


def test_fail_backend_is_a_problem_not_a_crash(failing: KeyringBackend) -> None:
    lookup = resolve_secret(None, SERVICE, PROVIDER_API_KEY)
    assert lookup.value is None
    assert lookup.source is None
    assert lookup.problem is not None
    assert "no OS keychain is available" in lookup.problem
    assert "INCIDENT_DESK_PROVIDER_API_KEY" in lookup.problem
    assert resolve_secret(SecretStr("env"), SERVICE, PROVIDER_API_KEY) == SecretLookup("env", "environment", None)


def test_fail_backend_store_and_delete_raise_clear_errors(failing: KeyringBackend) -> None:
    with pytest.raises(CredentialStoreError, match="cannot store http-token in the OS keychain: no OS keychain"):
        store_secret(SERVICE, HTTP_TOKEN, SECRET)
    with pytest.raises(CredentialStoreError, match="cannot read http-token"):
        delete_secret(SERVICE, HTTP_TOKEN)


def test_broken_backend_errors_never_contain_the_secret(broken: KeyringBackend) -> None:
    lookup = resolve_secret(None, SERVICE, PROVIDER_API_KEY)
    assert lookup.problem is not None
    assert "BrokenKeyring" in lookup.problem
    assert "RuntimeError: org.freedesktop.DBus.Error.ServiceUnknown" in lookup.problem
    with pytest.raises(CredentialStoreError) as caught:
        store_secret(SERVICE, PROVIDER_API_KEY, SECRET)
    assert SECRET not in str(caught.value)
    assert "PasswordSetError: could not write '[redacted]'" in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_null_backend_that_drops_secrets_is_reported() -> None:
    with (
        using_keyring(null_keyring()),
        pytest.raises(CredentialStoreError, match=r"did not keep sealing-key \(it stores nothing\)"),
    ):
        store_secret(SERVICE, SEALING_KEY, SECRET)


def test_empty_secret_is_refused(memory: MemoryKeyring) -> None:
    with pytest.raises(CredentialStoreError, match="empty"):
        store_secret(SERVICE, HTTP_TOKEN, "")
    assert memory.store == {}


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("sk-proj-abcdefghijklmnopqrstuvwxyza1b2", "sk-proj-…a1b2"),
        ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz9z8y", "sk-ant-…9z8y"),
        ("sk-abcdefghijklmnopqrstuvwxyza1b2", "sk-…a1b2"),
        ("plain-token-without-vendor-c3d4", "…c3d4"),
        ("short", "****"),
        ("fifteen-chars-x", "****"),
        ("", "****"),
    ],
)
def test_mask(value: str, shown: str) -> None:
    assert mask(value) == shown


def test_generate_token_is_random_and_url_safe() -> None:
    first, second = generate_token(), generate_token()
    assert first != second
    assert re.fullmatch(r"[A-Za-z0-9_\-]{43}", first)


def test_backend_description_names_the_active_backend(memory: MemoryKeyring, failing: KeyringBackend) -> None:
    assert backend_description() == "keyring.backends.fail.Keyring (priority 0)"


def test_backend_description_of_test_backend(memory: MemoryKeyring) -> None:
    assert backend_description() == "tests.fakes.MemoryKeyring (priority -10)"


def test_keyring_is_imported_lazily() -> None:
    assert "keyring" not in vars(credentials)
