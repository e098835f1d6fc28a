# Replaces pyinstaller-hooks-contrib's hook, which names psycopg_binary._uuid: a module psycopg-binary 3.3 no longer
# ships, so every build warned `Hidden import "psycopg_binary._uuid" not found!`. These are the compiled modules
# psycopg loads from it by name (psycopg_binary cannot be imported on its own, so they are listed, not collected).
hiddenimports = ["psycopg_binary._psycopg", "psycopg_binary.pq"]
