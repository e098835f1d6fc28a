"""PyInstaller entry point: the frozen executable behaves exactly like the ``incident-desk`` console script.

An absolute import, because PyInstaller runs this file as ``__main__`` outside any package. Nothing may be
printed here: in stdio mode stdout carries only protocol messages.
"""

import multiprocessing

from incident_desk.cli.main import main

if __name__ == "__main__":
    # The timeline's helper processes are this executable started again: this line makes them helpers.
    multiprocessing.freeze_support()
    raise SystemExit(main())
