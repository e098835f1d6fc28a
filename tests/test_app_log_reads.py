"""DeskApp.read_page and DeskApp.search own a whole log call: cursors sealed, lines redacted, scans off the loop."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from incident_desk.core.search import engine
from incident_desk.core.search.paging import CursorError
from incident_desk.core.search.pattern import PatternError
from tests.helpers import AppFactory

pytestmark = pytest.mark.anyio

LOG = "boot ok\ndb error: timeout\npassword=hunter2 error\nretry ok\ndb error: refused\n"


def desk_data(root: Path) -> Path:
    entry = root / "incidents" / "INC-1"
    entry.mkdir(parents=True)
    (entry / "incident.toml").write_text(
        'title = "db down"\nservice = "db"\nseverity = "high"\nstatus = "open"\nopened = 2026-11-30\n',
        encoding="utf-8",
    )
    (entry / "log.txt").write_text(LOG, encoding="utf-8")
    return root


async def test_read_page_pages_with_sealed_cursors_and_redacts(make_app: AppFactory, tmp_path: Path) -> None:
    app = make_app(data_dir=desk_data(tmp_path / "data"))
    first = await app.read_page("INC-1", None, 2)
    assert [(line.number, line.text) for line in first.lines] == [(1, "boot ok"), (2, "db error: timeout")]
    assert first.next_cursor is not None and first.total_bytes == len(LOG)
    second = await app.read_page("INC-1", first.next_cursor, 10)
    assert [line.number for line in second.lines] == [3, 4, 5] and second.next_cursor is None
    assert "hunter2" not in second.lines[0].text and "[REDACTED]" in second.lines[0].text
    with pytest.raises(CursorError):
        await app.read_page("INC-1", "forged", 2)


async def test_search_matches_in_the_search_threads_and_resumes(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(data_dir=desk_data(tmp_path / "data"))
    threads: list[str] = []
    real_search = engine.search

    def recorded(*args: object, **kwargs: object) -> engine.SearchResult:
        threads.append(threading.current_thread().name)
        return real_search(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "search", recorded)
    first = await app.search("INC-1", "ERROR", None, 1, ignore_case=True)
    assert [line.number for line in first.matches] == [2] and first.stopped == "match limit"
    assert first.next_cursor is not None
    rest = await app.search("INC-1", "ERROR", first.next_cursor, 10, ignore_case=True)
    assert [line.number for line in rest.matches] == [5] and rest.next_cursor is None  # line 3 masked first
    secret = await app.search("INC-1", "password", None, 10)
    assert [line.number for line in secret.matches] == [3] and "hunter2" not in secret.matches[0].text
    assert threads and threading.main_thread().name not in threads
    with pytest.raises(PatternError):
        await app.search("INC-1", "(?=x)", None, 1)
    with pytest.raises(CursorError):
        await app.search("INC-1", "error", "forged", 1)
