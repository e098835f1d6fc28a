"""PyInstaller entry point: the frozen executable behaves exactly like the ``incident-desk`` console script.

An absolute import, because PyInstaller runs this file as ``__main__`` outside any package. Nothing may be
printed here: in stdio mode stdout carries only protocol messages.
"""

from incident_desk.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
