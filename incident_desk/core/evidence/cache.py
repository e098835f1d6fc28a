"""The template pass's resume point on disk, beside the timeline's, so a log that has only grown (or that a budget
stopped) is read on from where the last pass ended. Keyed like the timeline's summaries (the file's identity);
an entry that cannot be read or written is ignored."""

from __future__ import annotations

import base64
from typing import Any, BinaryIO

from incident_desk.core.evidence.scan import Resume, TemplateScan, scan_templates
from incident_desk.core.evidence.tally import Boundary, Tally
from incident_desk.core.timeline.cache import TimelineCache

MAX_ENTRY_BYTES = 32 * 1024 * 1024


def _encode(resume: Resume) -> dict[str, Any]:
    tally = resume.tally
    return {
        "offset": resume.offset,
        "baseline_end": resume.baseline_end,
        "skipped": resume.skipped_lines,
        "check": resume.check,
        "lines": tally.lines,
        "baseline_lines": tally.baseline_lines,
        "overflow": tally.overflow,
        "table": [[base64.b64encode(key).decode(), *row] for key, row in tally.table.items()],
    }


def _decode(data: dict[str, Any]) -> Resume:
    table = {base64.b64decode(key): [int(value) for value in row] for key, *row in data["table"]}
    if any(len(row) != 5 for row in table.values()):
        raise ValueError("a row of the template table is not five numbers")
    tally = Tally(table, int(data["lines"]), int(data["baseline_lines"]), int(data["overflow"]))
    return Resume(int(data["offset"]), float(data["baseline_end"]), tally, int(data["skipped"]), str(data["check"]))


class TemplateCache(TimelineCache):
    """Resume points of template passes in ``directory``, one JSON file per log."""

    def load_resume(self, handle: BinaryIO) -> Resume | None:
        return self._read(handle, _decode, MAX_ENTRY_BYTES, "template summary unreadable, reading afresh")

    def store_resume(self, handle: BinaryIO, resume: Resume | None) -> None:
        if resume is not None:
            self._keep(handle, _encode(resume), "template summary")

    def scan_templates(self, handle: BinaryIO, boundary: Boundary, **options: Any) -> TemplateScan:
        """``scan_templates`` from this log's resume point, if it still holds; the new one is kept."""
        scan = scan_templates(handle, boundary, resume=self.load_resume(handle), **options)
        self.store_resume(handle, scan.resume)
        return scan
