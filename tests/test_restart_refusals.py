"""restart_service refuses before asking anyone: no elicitation channel, or a service it does not know.

Nothing runs, no question is asked, and the refusal is journalled.
"""

from __future__ import annotations

import pytest

from incident_desk.core.journal.audit import AuditJournal
from tests.helpers import AppFactory, connect, text_of
from tests.restart_helpers import (
    NO_CHANNEL,
    PROTOCOL,
    SERVICE,
    Restarts,
    approve,
    desk,
    restarts_fixture,  # noqa: F401 -- the `restarts` fixture
    rows,
)

pytestmark = pytest.mark.anyio


async def test_no_elicitation_capability_refuses_without_asking(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services())
    async with connect(server, era) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert text_of(result) == NO_CHANNEL
    assert result.structured_content is not None
    assert result.structured_content["outcome"] == "refused_no_channel"
    assert restarts.executions() == []
    (row,) = rows(app.journal)
    assert (row.outcome, row.service, row.protocol_era) == ("refused_no_channel", SERVICE, PROTOCOL[era])


@pytest.mark.parametrize("service", ["no-such-service", "../payments-api"])
async def test_unknown_service_is_refused_before_any_question(
    make_app: AppFactory, restarts: Restarts, era: str, service: str
) -> None:
    app, server = desk(make_app, services=restarts.services())
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool("restart_service", {"service": service})
    assert result.is_error is True
    assert text_of(result) == f"No such service: {service}. Known services: payments-api, search-api"
    assert operator.asked == []
    assert restarts.executions() == []
    (row,) = rows(app.journal)
    assert (row.outcome, row.service) == ("refused_unknown_service", service)


async def test_a_service_being_restarted_is_refused_before_any_question(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    app, server = desk(make_app, services=restarts.services())
    operator = approve()
    async with (
        app.journal.locks.hold(SERVICE, "this desk for os:alice"),
        connect(server, era, elicitation_callback=operator) as client,
    ):
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert operator.asked == []
    assert result.is_error is True
    assert text_of(result).startswith(
        "NOT RESTARTED -- a restart of payments-api is already running (held by this desk for os:alice since "
    )
    assert restarts.executions() == []
    (row,) = rows(app.journal)
    assert (row.outcome, row.ticket) == ("refused_busy", None)


async def test_a_journal_that_cannot_take_the_answer_is_found_before_any_question(
    make_app: AppFactory, restarts: Restarts, era: str
) -> None:
    """Asking a human, then refusing their yes because the journal is broken, wastes the one thing they gave."""
    app, server = desk(make_app, services=restarts.services())
    assert isinstance(app.journal, AuditJournal)
    for leftover in app.journal.path.parent.glob(app.journal.path.name + "-*"):
        leftover.unlink()
    app.journal.path.write_bytes(b"not a database, whatever its name says\n" * 100)
    operator = approve()
    async with connect(server, era, elicitation_callback=operator) as client:
        result = await client.call_tool("restart_service", {"service": SERVICE})
    assert operator.asked == []
    assert result.is_error is True
    assert text_of(result).startswith(
        "NOT RESTARTED -- the audit journal cannot be written, so nothing was done: "
        f"audit journal {app.journal.path} is not an SQLite database"
    )
    assert restarts.executions() == []
