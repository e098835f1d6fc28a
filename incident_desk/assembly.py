"""A desk built from its settings: its incident sources, and the journal and incident memory the settings name,
on SQLite or PostgreSQL.

The CLI's journal commands open the journal without a whole desk; ``build_app`` opens everything for one.
"""

from __future__ import annotations

import structlog

from incident_desk.app import DeskApp, source_secret
from incident_desk.core import credentials
from incident_desk.core.incidents import DataFolder, bundled_sample_data
from incident_desk.core.journal.audit import AuditJournal, Journal
from incident_desk.core.journal.memory import Memory, SqliteMemory
from incident_desk.core.sources import IncidentSources
from incident_desk.memory_keeper import MemoryKeeper
from incident_desk.settings.errors import SettingsError
from incident_desk.settings.model import Settings

logger = structlog.get_logger(__name__)

POSTGRES_INSTALL = 'pip install "incident-desk[postgres]" or uv tool install "incident-desk[postgres]"'


def require_postgres_driver() -> None:
    """psycopg comes with the ``postgres`` extra, which a desktop install goes without: say how to add it."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise SettingsError(
            f"audit_db is a PostgreSQL URL, but the PostgreSQL driver is not installed ({exc}); install the "
            f"desk with its postgres extra: {POSTGRES_INSTALL}"
        ) from None


def open_journal(settings: Settings) -> Journal:
    """The SQLite journal (the default), or the PostgreSQL one replicas share; ``AuditError`` names the setting,
    ``SettingsError`` the extra to install when the PostgreSQL driver is missing."""
    journal = _open_journal(settings)
    if journal.adopted:
        logger.info("the journal's rows of former names are now this desk's", desk=journal.desk, former=journal.adopted)
    return journal


def _open_journal(settings: Settings) -> Journal:
    """The journal ``settings`` name, its desk taking over the rows of its former names (``core.journal.desks``)."""
    desk, derived, renamed_from = settings.journal_desk, settings.desk_name is None, settings.desk_renamed_from
    if settings.audit_url is None:
        return AuditJournal(settings.audit_path, desk=desk, derived=derived, renamed_from=renamed_from)
    require_postgres_driver()
    from incident_desk.core.journal.audit_pg import PostgresJournal

    # The password never comes from the URL (settings refuse one there): environment first, then the keychain.
    found = credentials.resolve_secret(
        settings.audit_db_password, settings.keyring_service, credentials.AUDIT_DB_PASSWORD
    )
    return PostgresJournal(settings.audit_url, found.value, desk=desk, derived=derived, renamed_from=renamed_from)


def open_memory(settings: Settings, journal: Journal) -> Memory:
    """The incident memory beside the journal: SQLite FTS5 in its file, or PostgreSQL full text on a team desk."""
    if isinstance(journal, AuditJournal):
        return SqliteMemory(journal.path, journal.desk)
    from incident_desk.core.journal.audit_pg import PostgresJournal
    from incident_desk.core.journal.memory_pg import PostgresMemory

    if not isinstance(journal, PostgresJournal):
        raise TypeError(f"no incident memory beside a {type(journal).__name__}")
    return PostgresMemory(journal)


def build_app(settings: Settings, sealing_keys: list[bytes] | None = None) -> DeskApp:
    root = settings.data_dir if settings.data_dir is not None else bundled_sample_data()
    data = DataFolder(
        root, max_file_bytes=settings.max_data_file_bytes, freshness_seconds=settings.data_freshness_seconds
    )
    app = DeskApp(
        settings=settings,
        sources=IncidentSources(
            data,
            settings.incident_sources,
            settings.service_logs,
            secret=source_secret(settings),
            spool_max_bytes=settings.log_spool_max_bytes,
        ),
        journal=open_journal(settings),
        sealing_keys=sealing_keys or [],
    )
    app.memory = MemoryKeeper(
        open_memory(settings, app.journal),
        app.journal,
        app.read_log,
        app.redactor,
        look=lambda: app.sources.listing().incidents,
    )
    return app
