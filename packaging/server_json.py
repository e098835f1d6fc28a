"""Write the release's server.json: the repository's, plus one ``mcpb`` package per bundle with its SHA-256.

    python packaging/server_json.py RELEASE_DIR TAG > server.json

The registry needs each bundle's download URL and digest, which exist only once the release is built, so the
copy in the repository lists the PyPI package alone and the release workflow adds the bundles.
"""
# ruff: noqa: T201 -- writes the document on stdout

from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def with_bundles(base: dict[str, Any], bundles: list[Path], tag: str) -> dict[str, Any]:
    """``base`` with an ``mcpb`` package for each bundle, downloaded from the GitHub release of ``tag``."""
    document = copy.deepcopy(base)
    repository = document["repository"]["url"].rstrip("/")
    for bundle in sorted(bundles):
        document["packages"].append(
            {
                "registryType": "mcpb",
                "identifier": f"{repository}/releases/download/{tag}/{bundle.name}",
                "version": document["version"],
                "fileSha256": hashlib.sha256(bundle.read_bytes()).hexdigest(),
                "transport": {"type": "stdio"},
            }
        )
    return document


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    release, tag = Path(argv[0]), argv[1]
    base = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    if tag.removeprefix("v") != base["version"]:
        print(f"tag {tag} does not match server.json version {base['version']}", file=sys.stderr)
        return 1
    bundles = list(release.glob("*.mcpb"))
    if not bundles:
        print(f"no .mcpb bundles in {release}", file=sys.stderr)
        return 1
    print(json.dumps(with_bundles(base, bundles, tag), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
