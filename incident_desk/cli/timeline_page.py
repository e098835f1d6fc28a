"""``incident-desk timeline ID [--html FILE]``: the timeline for people whose client does not render MCP Apps.

It builds the timeline ``show_incident_timeline`` answers (``timeline_view``, without loading the MCP SDK: a
command starts like one), prints its text, and with ``--html`` writes the same view the app-rendering clients show
as one self-contained page: the built view with the tool's structured content inside it and a
Content-Security-Policy that allows no load at all.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from incident_desk.settings.model import Settings

# The page may run its own inline script and style, and load nothing: no network, no file, not even an image.
_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"


class TimelineUnavailable(Exception):
    """The desk answered the timeline with an error (an unknown incident, an unreadable log); the message is its."""


async def _call(settings: Settings, incident_id: str) -> tuple[str, dict[str, Any]]:
    from incident_desk.assembly import build_app
    from incident_desk.core.incidents import DataError
    from incident_desk.timeline_view import gather, render_text

    app = build_app(settings)
    try:
        view = await gather(app, incident_id)
    except DataError as exc:
        raise TimelineUnavailable(str(exc)) from None
    finally:
        app.journal.close()
    return render_text(view), view.model_dump(mode="json", by_alias=True)


def timeline_of(settings: Settings, incident_id: str) -> tuple[str, dict[str, Any]]:
    """The text timeline and the structured content, as ``show_incident_timeline`` answers them."""
    return anyio.run(_call, settings, incident_id)


def render_page(view: str, timeline: dict[str, Any]) -> str:
    """The built view with ``timeline`` inside it (JSON that cannot close its script element) and a strict CSP."""
    if "<head>" not in view or "</body>" not in view:
        raise ValueError("the built view has no <head> or </body>: rebuild app/timeline")
    data = json.dumps(timeline, ensure_ascii=False, sort_keys=True)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = html.escape(f"{timeline.get('incident_id', '')} timeline: {timeline.get('title', '')}")
    head = f'<head>\n    <meta http-equiv="Content-Security-Policy" content="{_CSP}" />'
    page = view.replace("<head>", head, 1).replace("<title>Incident timeline</title>", f"<title>{title}</title>", 1)
    embedded = f'<script type="application/json" id="timeline-data">{data}</script>\n  </body>'
    return page.replace("</body>", embedded, 1)


def write_page(path: Path, page: str) -> None:
    """Write the page whole or not at all: a temporary file beside it, then renamed over (a link is replaced,
    never written through)."""
    target = path.expanduser().absolute()
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        umask = os.umask(0)
        os.umask(umask)
        Path(temporary).chmod(0o666 & ~umask)
        Path(temporary).replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(temporary).unlink()
        raise


def run_timeline(settings: Settings, incident_id: str, html_path: Path | None) -> int:
    from incident_desk.timeline_view import view_html

    try:
        text, timeline = timeline_of(settings, incident_id)
    except TimelineUnavailable as exc:
        sys.stderr.write(f"incident-desk: {exc}\n")
        return 1
    sys.stdout.write(text + "\n")
    if html_path is not None:
        try:
            write_page(html_path, render_page(view_html(), timeline))
        except OSError as exc:
            sys.stderr.write(f"incident-desk: cannot write {html_path}: {exc.strerror or exc}\n")
            return 1
        sys.stderr.write(f"incident-desk: wrote {html_path}: open it in a browser (it loads nothing from anywhere)\n")
    return 0
