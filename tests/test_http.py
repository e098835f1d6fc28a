"""Streamable HTTP mode: real server processes on loopback, driven by mcp.Client in both eras."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CreateMessageResult, ElicitResult, InputRequiredResult, InputResponses, TextContent

from incident_desk.features import tool_catalog
from tests.helpers import ROOT, SAMPLE_1043_LOG, text_of
from tests.http_desk import TOKEN, desk_env, run_desk

pytestmark = [pytest.mark.anyio, pytest.mark.http]

SEALING_KEY = "shared-sealing-key-for-two-replicas-000"


@asynccontextmanager
async def _client(url: str, mode: str, token: str | None = None, **callbacks: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **callbacks) as client,
    ):
        yield client


async def _accept(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-2291"})


async def _sample(context: Any, params: Any) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="Sampled."), model="m")


async def _tools_and_calls(url: str, mode: str, token: str | None = None, **callbacks: Any) -> dict[str, Any]:
    async with _client(url, mode, token, elicitation_callback=_accept, **callbacks) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        log = text_of(await client.read_resource("incident://INC-1043/log"))
        restart = await client.call_tool("restart_service", {"service": "payments-api"})
        summary = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    return {"tools": tools, "log": log, "restart": text_of(restart), "restart_result": restart, "summary": summary}


@pytest.mark.parametrize("stateless", [False, True], ids=["stateful", "stateless"])
async def test_tools_and_approval_per_mode_and_era(tmp_path: Path, stateless: bool) -> None:
    args = ["--stateless"] if stateless else []
    with run_desk(tmp_path, *args) as desk:
        legacy = await _tools_and_calls(desk.url, "legacy")
        modern = await _tools_and_calls(desk.url, "2026-07-28")
        declared = await _tools_and_calls(desk.url, "legacy", sampling_callback=_sample)
        stderr = desk.stderr()
    assert legacy["tools"] == modern["tools"]
    # the surface's read and act tools, show_incident_timeline and query_incident_metrics
    assert len(legacy["tools"]) == len(tool_catalog())
    assert legacy["log"] == modern["log"] == SAMPLE_1043_LOG
    # 2026-07-28 keeps approval by multi round-trip in every mode.
    assert modern["restart"].startswith("RESTARTED payments-api under CHG-2291")
    if stateless:
        # 2025-11-25 over stateless HTTP has no back-channel: the degrade text, never Unknown tool or a gap.
        assert legacy["restart"] == (
            "ELICITATION_UNAVAILABLE -- refusing to restart payments-api without an approval channel"
        )
        # The client declared both capabilities: the reason is the transport, never "did not declare".
        restart_reason = declared["restart_result"].structured_content["reason"]
        assert (
            restart_reason == "stateless HTTP cannot send an approval question to a 2025-11-25 client (no back-channel)"
        )
        assert declared["summary"].structured_content["skipped"][0] == (
            "sampling: stateless HTTP cannot send a sampling request to a 2025-11-25 client (no back-channel)"
        )
    else:
        assert legacy["restart"].startswith("RESTARTED payments-api under CHG-2291")
    for result in (legacy["summary"], modern["summary"]):
        assert result.structured_content["mode"] == "raw"
        assert not result.is_error
    assert "era_2025-11-25" in stderr and "era_2026-07-28" in stderr


async def test_tools_list_is_identical_in_stateful_and_stateless_modes(tmp_path: Path) -> None:
    listings = []
    for args in ([], ["--stateless"]):
        with run_desk(tmp_path, *args) as desk:
            for mode in ("legacy", "2026-07-28"):
                async with _client(desk.url, mode) as client:
                    tools = (await client.list_tools()).tools
                listings.append([tool.model_dump(mode="json", exclude={"meta"}) for tool in tools])
    assert all(listing == listings[0] for listing in listings)


@pytest.mark.parametrize("source", ["environment", "keychain"])
async def test_approval_started_on_one_replica_finishes_on_another(tmp_path: Path, source: str) -> None:
    if source == "environment":
        shared = {"INCIDENT_DESK_SEALING_KEY": SEALING_KEY}
    else:
        shared = {
            "PYTHON_KEYRING_BACKEND": "tests.fakes.FileKeyring",
            "DESK_TEST_KEYRING_FILE": str(tmp_path / "keychain.json"),
        }
        subprocess.run(
            [sys.executable, "-m", "incident_desk", "token", "create", "--kind", "sealing"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**desk_env(tmp_path), **shared},
            check=True,
        )
    with (
        run_desk(tmp_path, "--stateless", name="a", **shared) as first,
        run_desk(tmp_path, "--stateless", name="b", **shared) as second,
        run_desk(tmp_path, "--stateless", name="c") as stranger,
    ):
        async with _client(first.url, "2026-07-28", elicitation_callback=_accept) as client:
            asked = await client.session.call_tool(
                "restart_service", {"service": "payments-api"}, allow_input_required=True
            )
        assert isinstance(asked, InputRequiredResult)
        (key,) = asked.input_requests or {}
        answer: InputResponses = {key: ElicitResult(action="accept", content={"confirm": True, "ticket": "CHG-7"})}
        async with _client(second.url, "2026-07-28", elicitation_callback=_accept) as client:
            finished = await client.session.call_tool(
                "restart_service",
                {"service": "payments-api"},
                input_responses=answer,
                request_state=asked.request_state,
            )
        async with _client(stranger.url, "2026-07-28", elicitation_callback=_accept) as client:
            with pytest.raises(Exception, match="requestState"):
                await client.session.call_tool(
                    "restart_service",
                    {"service": "payments-api"},
                    input_responses=answer,
                    request_state=asked.request_state,
                )
    assert text_of(finished).startswith("RESTARTED payments-api under CHG-7")


async def test_bearer_token_is_required_when_configured(tmp_path: Path) -> None:
    with run_desk(tmp_path, INCIDENT_DESK_HTTP_TOKEN=TOKEN) as desk:
        missing = httpx2.post(desk.url, json={}, timeout=5)
        wrong = httpx2.post(desk.url, json={}, headers={"Authorization": "Bearer nope"}, timeout=5)
        health = httpx2.get(f"http://127.0.0.1:{desk.port}/healthz", timeout=5)
        good = await _tools_and_calls(desk.url, "legacy", TOKEN)
        stderr = desk.stderr()
        audit = subprocess.run(
            [sys.executable, "-m", "incident_desk", "audit"],
            capture_output=True,
            text=True,
            env=desk_env(tmp_path),
            check=True,
        ).stdout
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer realm="incident-desk"'
    assert wrong.status_code == 401
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert good["restart"].startswith("RESTARTED payments-api")
    assert "bearer:" in audit, "the approver comes from the authenticated token"
    assert TOKEN not in stderr
    assert TOKEN not in audit


async def test_dns_rebinding_attempts_are_refused(tmp_path: Path) -> None:
    with run_desk(tmp_path) as desk:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        bad_host = httpx2.post(desk.url, json=body, headers={"Host": "evil.example"}, timeout=5)
        bad_origin = httpx2.post(desk.url, json=body, headers={"Origin": "http://evil.example"}, timeout=5)
    assert bad_host.status_code == 421
    assert bad_origin.status_code == 403


async def test_a_host_or_origin_with_user_information_is_refused(tmp_path: Path) -> None:
    """``127.0.0.1:PORT@evil.example`` starts with an allowed ``127.0.0.1:`` but names another host: the SDK's
    wildcard check matched it by prefix."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with run_desk(tmp_path, INCIDENT_DESK_ALLOWED_HOSTS='["desk.example:*"]') as desk:
        port = desk.port
        hosts = [
            f"127.0.0.1:{port}@evil.example",
            f"localhost:{port}@evil.example",
            f"127.0.0.1:{port}/x",
            f"desk.example:{port}@evil.example",
            f"127.0.0.1:{port}.evil.example",
            "127.0.0.1:",
        ]
        origins = [
            f"http://127.0.0.1:{port}@evil.example",
            f"http://user@127.0.0.1:{port}",
            f"http://localhost:{port}@evil.example/",
            f"http://127.0.0.1:{port}/path",
            f"http://[::1]:{port}@x",
        ]
        by_host = {
            host: httpx2.post(desk.url, json=body, headers={"Host": host}, timeout=5).status_code for host in hosts
        }
        by_origin = {
            origin: httpx2.post(desk.url, json=body, headers={"Origin": origin}, timeout=5).status_code
            for origin in origins
        }
        plain_host = httpx2.post(desk.url, json=body, headers={"Host": f"127.0.0.1:{port}"}, timeout=5)
        plain_origin = httpx2.post(desk.url, json=body, headers={"Origin": f"http://localhost:{port}"}, timeout=5)
    assert by_host == dict.fromkeys(hosts, 421)
    assert by_origin == dict.fromkeys(origins, 403)
    assert plain_host.status_code not in (421, 403)
    assert plain_origin.status_code not in (421, 403)


def test_a_busy_port_is_an_error_before_anything_is_announced(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        completed = subprocess.run(
            [sys.executable, "-m", "incident_desk", "--transport", "http", "--port", str(port)],
            capture_output=True,
            text=True,
            env=desk_env(tmp_path),
            timeout=30,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    assert completed.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in completed.stderr
    assert "serving Streamable HTTP" not in completed.stderr
    assert completed.stdout == ""


def test_refuses_to_bind_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "incident_desk", "--transport", "http", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True,
        text=True,
        env=desk_env(tmp_path),
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert completed.returncode == 2
    assert "refusing to serve on 0.0.0.0" in completed.stderr
    assert completed.stdout == ""


def test_refuses_a_wildcard_bind_without_allowed_hosts(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "incident_desk", "--transport", "http", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True,
        text=True,
        env=desk_env(tmp_path, INCIDENT_DESK_HTTP_TOKEN=TOKEN),
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert completed.returncode == 2
    assert "refusing to serve on 0.0.0.0 without allowed_hosts" in completed.stderr
    assert TOKEN not in completed.stderr


def test_secrets_never_reach_the_log(tmp_path: Path) -> None:
    with run_desk(
        tmp_path, "--log-level", "debug", INCIDENT_DESK_HTTP_TOKEN=TOKEN, INCIDENT_DESK_SEALING_KEY=SEALING_KEY
    ) as desk:
        httpx2.post(desk.url, json={}, headers={"Authorization": f"Bearer {TOKEN}x"}, timeout=5)
        stderr = desk.stderr()
    assert "serving Streamable HTTP" in stderr
    assert TOKEN not in stderr
    assert SEALING_KEY not in stderr


async def test_the_http_token_comes_from_the_keychain(tmp_path: Path) -> None:
    """`incident-desk token create` stores the token; the HTTP desk finds it there, with no flag or env var."""
    keyring_env = {
        "PYTHON_KEYRING_BACKEND": "tests.fakes.FileKeyring",
        "DESK_TEST_KEYRING_FILE": str(tmp_path / "keychain.json"),
    }
    created = subprocess.run(
        [sys.executable, "-m", "incident_desk", "token", "create"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**desk_env(tmp_path), **keyring_env},
        check=True,
    )
    token = created.stdout.strip()
    assert len(token) >= 40 and token in (tmp_path / "keychain.json").read_text()
    with run_desk(tmp_path, "--host", "127.0.0.2", **keyring_env) as desk:
        url = desk.url
        refused = httpx2.post(url, json={}, timeout=5)
        async with _client(url, "2026-07-28", token) as client:
            tools = (await client.list_tools()).tools
        stderr = desk.stderr()
    assert refused.status_code == 401
    assert len(tools) == len(tool_catalog())
    assert "bearer token from keychain" in stderr
    assert token not in stderr


async def test_allowed_hosts_and_origins_are_settings(tmp_path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with run_desk(
        tmp_path,
        INCIDENT_DESK_ALLOWED_HOSTS='["desk.example:*"]',
        INCIDENT_DESK_ALLOWED_ORIGINS='["https://ops.example"]',
    ) as desk:
        good_host = httpx2.post(desk.url, json=body, headers={"Host": f"desk.example:{desk.port}"}, timeout=5)
        bad_host = httpx2.post(desk.url, json=body, headers={"Host": "evil.example"}, timeout=5)
        good_origin = httpx2.post(desk.url, json=body, headers={"Origin": "https://ops.example"}, timeout=5)
        bad_origin = httpx2.post(desk.url, json=body, headers={"Origin": "https://evil.example"}, timeout=5)
    # Accepted requests get past the rebinding checks (the SDK then wants a handshake or JSON+SSE accept).
    assert good_host.status_code not in (421, 403)
    assert good_origin.status_code not in (421, 403)
    assert bad_host.status_code == 421
    assert bad_origin.status_code == 403


async def test_log_notifications_over_http_follow_each_sessions_level(tmp_path: Path) -> None:
    told: list[Any] = []
    silent: list[Any] = []

    async def collect(params: Any) -> None:
        told.append(params.data)

    async def collect_silent(params: Any) -> None:
        silent.append(params.data)

    with run_desk(tmp_path) as desk:
        async with (
            _client(desk.url, "legacy", logging_callback=collect) as asking,
            _client(desk.url, "legacy", logging_callback=collect_silent) as quiet,
        ):
            await asking.set_logging_level("warning")
            await asking.call_tool("summarize_incident", {"incidentId": "INC-1043"})
            await quiet.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    assert [d["step"] for d in told] == ["sampling", "provider"]
    assert silent == [], "a session that never asked for logs gets none"


async def test_one_client_waiting_on_a_human_does_not_block_others(tmp_path: Path) -> None:
    import anyio

    released = anyio.Event()

    async def slow_human(context: Any, params: Any) -> ElicitResult:
        await released.wait()
        return ElicitResult(action="decline")

    with run_desk(tmp_path) as desk:
        async with (
            _client(desk.url, "legacy", elicitation_callback=slow_human) as waiting,
            _client(desk.url, "legacy") as other,
            anyio.create_task_group() as group,
        ):
            outcome: list[str] = []

            async def restart() -> None:
                outcome.append(text_of(await waiting.call_tool("restart_service", {"service": "payments-api"})))

            group.start_soon(restart)
            await anyio.sleep(0.5)
            with anyio.fail_after(10):
                index = text_of(await other.read_resource("incident://index"))
            released.set()
    assert index == "INC-1042\nINC-1043"
    assert outcome == ["NOT RESTARTED -- operator declined"]
