"""Write the release's server.json: the repository's, plus the bundles and the container image it publishes.

    python packaging/server_json.py RELEASE_DIR TAG > server.json
    python packaging/server_json.py --image          # the image reference the release pushes

The registry needs each bundle's download URL and digest, and an image that exists, none of which do until the
release is built, so the copy in the repository lists the PyPI package alone. The release workflow pushes the image
under ``--image``'s reference and adds one ``mcpb`` package per bundle (with its SHA-256) and one ``oci`` package.
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
IMAGE_REGISTRY = "ghcr.io"


def image_reference(base: dict[str, Any]) -> str:
    """The image's ``registry/owner/name:version``: GitHub's container registry of the repository, lower-cased
    as OCI names must be."""
    owner_and_name = base["repository"]["url"].rstrip("/").removeprefix("https://github.com/").lower()
    return f"{IMAGE_REGISTRY}/{owner_and_name}:{base['version']}"


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


def with_image(base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with the ``oci`` package of the pushed image. The registry takes the tag from the identifier and
    checks the image's ``io.modelcontextprotocol.server.name`` label; the image serves HTTP unless told stdio."""
    document = copy.deepcopy(base)
    document["packages"].append(
        {
            "registryType": "oci",
            "identifier": image_reference(base),
            "runtimeHint": "docker",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "named", "name": "--transport", "value": "stdio"}],
        }
    )
    return document


def main(argv: list[str]) -> int:
    base = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    if argv == ["--image"]:
        print(image_reference(base))
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    release, tag = Path(argv[0]), argv[1]
    if tag.removeprefix("v") != base["version"]:
        print(f"tag {tag} does not match server.json version {base['version']}", file=sys.stderr)
        return 1
    bundles = list(release.glob("*.mcpb"))
    if not bundles:
        print(f"no .mcpb bundles in {release}", file=sys.stderr)
        return 1
    print(json.dumps(with_image(with_bundles(base, bundles, tag)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
