"""The `incident-desk` command: serving, and the subcommands that manage keys, the journal, clients and docs."""
