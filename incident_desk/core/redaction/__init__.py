"""Masking secrets in what the desk shows: the rules (``rules``), the key shapes (``keys``), and the engine that
applies them (``engine``). ``incident_desk.core.redaction.face`` is the face the rest of the desk uses."""
