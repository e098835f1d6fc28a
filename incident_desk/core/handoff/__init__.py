"""The shift handoff: who is on call (``oncall``, from an iCalendar feed) and what the next shift inherits
(``shift``: open incidents, silences, acts, pending approvals, changes, resolutions, and its text). No MCP imports."""
