"""`incident-desk key set|show|delete`: the provider key goes to the OS keychain and is never printed in full."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from mcp.server.mcpserver import MCPServer

from incident_desk.cli import main as cli
from tests.fakes import FakeProvider, MemoryKeyring, failing_keyring, using_keyring
from tests.helpers import connect, text_of

KEY = "sk-proj-CLIKEY0123456789abcdefghSECRET"
SERVICE = "incident-desk"
ENTRY = "provider-api-key"


def _typed(monkeypatch: pytest.MonkeyPatch, value: str) -> list[str]:
    """Answer the hidden prompt with ``value``; returns the prompts shown."""
    prompts: list[str] = []

    def fake_getpass(prompt: str = "Password: ", stream: object = None) -> str:
        prompts.append(prompt)
        return value

    monkeypatch.setattr("getpass.getpass", fake_getpass)
    return prompts


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["key", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_never_in_full(*outputs: str) -> None:
    for output in outputs:
        assert KEY not in output
        assert KEY[8:24] not in output


def test_set_stores_the_typed_key_in_the_keychain(
    memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = _typed(monkeypatch, f"  {KEY}\n")
    code, out, err = _run(capsys, "set")
    assert code == 0
    assert prompts == ["provider-api-key (input hidden): "]
    assert memory_keyring.store == {(SERVICE, ENTRY): KEY}
    assert out == ""
    assert err == (
        "incident-desk: stored provider-api-key in tests.fakes.MemoryKeyring (priority -10) (service 'incident-desk')\n"
    )
    _assert_never_in_full(out, err)


@pytest.mark.parametrize("typed", ["", "   ", "\n"])
def test_set_with_nothing_typed_refuses_and_stores_nothing(
    memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    memory_keyring.set_password(SERVICE, ENTRY, KEY)
    _typed(monkeypatch, typed)
    code, out, err = _run(capsys, "set")
    assert code == 1
    assert (out, err) == ("", "incident-desk: no value entered; nothing stored\n")
    assert memory_keyring.store == {(SERVICE, ENTRY): KEY}, "an empty answer must not replace the stored key"


def test_show_prints_the_masked_key_only(memory_keyring: MemoryKeyring, capsys: pytest.CaptureFixture[str]) -> None:
    memory_keyring.set_password(SERVICE, ENTRY, KEY)
    code, out, err = _run(capsys, "show")
    assert code == 0
    assert out == "sk-proj-…CRET\n"
    assert err == ""
    _assert_never_in_full(out, err)


def test_show_without_a_key(memory_keyring: MemoryKeyring, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "show")
    assert code == 1
    assert (out, err) == ("", "incident-desk: no provider-api-key stored in the keychain (service 'incident-desk')\n")


def test_delete_removes_the_key_and_says_so_twice(
    memory_keyring: MemoryKeyring, capsys: pytest.CaptureFixture[str]
) -> None:
    memory_keyring.set_password(SERVICE, ENTRY, KEY)
    memory_keyring.set_password(SERVICE, "http-token", "other-secret-value-123456")
    first = _run(capsys, "delete")
    second = _run(capsys, "delete")
    assert first == (0, "", "incident-desk: deleted provider-api-key\n")
    assert second == (0, "", "incident-desk: no provider-api-key was stored\n")
    assert memory_keyring.store == {(SERVICE, "http-token"): "other-secret-value-123456"}


def test_keyring_service_setting_is_honoured(
    memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INCIDENT_DESK_KEYRING_SERVICE", "desk-staging")
    _typed(monkeypatch, KEY)
    assert _run(capsys, "set")[0] == 0
    assert memory_keyring.store == {("desk-staging", ENTRY): KEY}
    assert _run(capsys, "show")[:2] == (0, "sk-proj-…CRET\n")


@pytest.mark.parametrize("action", ["set", "show", "delete"])
def test_headless_keychain_exits_1_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    prompts = _typed(monkeypatch, KEY)
    verb = "store" if action == "set" else "read"
    with using_keyring(failing_keyring()):
        code, out, err = _run(capsys, action)
    assert code == 1
    assert prompts == [], "the keychain is checked before the secret is asked for"
    assert out == ""
    assert err.startswith(
        f"incident-desk: cannot {verb} provider-api-key in the OS keychain: no OS keychain is available"
    )
    assert err.endswith("; or set INCIDENT_DESK_PROVIDER_API_KEY instead\n")
    assert "Traceback" not in err
    _assert_never_in_full(out, err)


def test_a_backend_that_keeps_nothing_is_not_reported_as_stored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """tests/conftest.py selects keyring's null backend, which accepts a secret and drops it."""
    prompts = _typed(monkeypatch, KEY)
    code, out, err = _run(capsys, "set")
    assert code == 1
    assert "would not keep provider-api-key (it stores nothing)" in err
    assert prompts == [], "the keychain is checked before the secret is asked for"
    assert "stored provider-api-key in" not in err
    _assert_never_in_full(out, err)


@pytest.mark.parametrize(
    ("kind", "variable"), [("http", "INCIDENT_DESK_HTTP_TOKEN"), ("sealing", "INCIDENT_DESK_SEALING_KEY")]
)
def test_token_create_without_a_keychain_prints_a_fresh_token_for_the_variable(
    capsys: pytest.CaptureFixture[str], kind: str, variable: str
) -> None:
    with using_keyring(failing_keyring()):
        code = cli.main(["token", "create", "--kind", kind])
    captured = capsys.readouterr()
    assert code == 0
    token = captured.out.strip()
    assert len(token) >= 40 and "\n" not in token
    assert "no OS keychain is available" in captured.err
    assert f"nothing stored; here is a fresh {kind}" in captured.err and f"for {variable}" in captured.err
    assert token not in captured.err, "the token goes to stdout only"
    with using_keyring(failing_keyring()):
        cli.main(["token", "create", "--kind", kind])
    assert capsys.readouterr().out.strip() != token, "a fresh token each time"


def test_token_create_with_a_keychain_stores_and_prints_it_once(
    memory_keyring: MemoryKeyring, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["token", "create"]) == 0
    captured = capsys.readouterr()
    assert memory_keyring.store == {(SERVICE, "http-token"): captured.out.strip()}
    assert "stored http-token in" in captured.err


def test_set_with_closed_stdin_exits_cleanly(
    memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def eof(prompt: str = "", stream: object = None) -> str:
        raise EOFError

    monkeypatch.setattr("getpass.getpass", eof)
    code, _out, err = _run(capsys, "set")
    assert code == 1
    assert "nothing stored" in err
    assert memory_keyring.store == {}


@pytest.mark.anyio
async def test_a_key_set_with_the_cli_is_the_one_the_provider_receives(
    make_server: Callable[..., MCPServer],
    memory_keyring: MemoryKeyring,
    fake_provider: FakeProvider,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _typed(monkeypatch, KEY)
    assert _run(capsys, "set")[0] == 0
    fake_provider.answer_openai("Merge slowed search. Wait it out.")
    server = make_server(provider="openai", provider_base_url=fake_provider.url + "/v1", provider_model="gpt-test")
    async with connect(server, "legacy") as client:
        result = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    assert text_of(result) == "Merge slowed search. Wait it out."
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {KEY}"
