"""The desk's durable memory: the audit journal, incident activity, restart locks, incident memory."""
