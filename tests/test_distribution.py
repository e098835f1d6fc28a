"""What users install: the MCP Registry's server.json, the PyPI metadata, and the built sdist and wheel."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from pydantic import SecretStr

from incident_desk import __version__
from incident_desk.settings.model import Settings
from incident_desk.settings.sources import CONFIG_ENV_VAR
from tests.helpers import ROOT, child_env, text_of

SERVER_JSON = ROOT / "server.json"
# The registry's published rules (modelcontextprotocol/registry docs/reference/server-json), as this test reads them.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
DESCRIPTION_MAX = 100
VERSION_RANGE = re.compile(r"^[\^~<>=]|\.x$|\*|^latest$")
ALLOWED_BASE_URLS = {"pypi": {"https://pypi.org"}, "npm": {"https://registry.npmjs.org"}}
TRANSPORTS = {"stdio", "streamable-http", "sse"}
OCI_REGISTRIES = re.compile(
    r"^(docker\.io|ghcr\.io|quay\.io|mcr\.microsoft\.com|[a-z0-9.-]+\.pkg\.dev|[a-z0-9-]+\.azurecr\.io)/"
)
OCI_REFERENCE = re.compile(r"^[a-z0-9.-]+(/[a-z0-9._-]+)+(:[A-Za-z0-9._-]+|@sha256:[a-f0-9]{64})$")


def server_json() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SERVER_JSON.read_text(encoding="utf-8"))
    return document


def load_script(name: str) -> ModuleType:
    """packaging/ is not a package (it would shadow the PyPI ``packaging``): load a script by path."""
    spec = importlib.util.spec_from_file_location(f"incident_desk_{name}", ROOT / "packaging" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def registry_problems(document: dict[str, Any]) -> list[str]:
    """What the registry would refuse in ``document``: an empty list when it follows the rules."""
    problems = [f"missing {key}" for key in ("name", "description", "version") if not document.get(key)]
    name = document.get("name", "")
    if not NAME_PATTERN.match(name) or not 3 <= len(name) <= 200:
        problems.append(f"name {name!r} is not namespace/server in reverse DNS")
    if len(document.get("description", "")) > DESCRIPTION_MAX:
        problems.append(f"description longer than {DESCRIPTION_MAX} characters")
    owner = name.partition("/")[0]
    repository = document.get("repository", {})
    if owner.startswith("io.github.") and repository.get("source") == "github":
        expected = f"https://github.com/{owner.removeprefix('io.github.')}/"
        if not repository.get("url", "").startswith(expected):
            problems.append(f"an io.github namespace must be the repository's owner: {expected}")
    for package in document.get("packages", []):
        kind = package.get("registryType")
        # An image's version is the tag in its identifier.
        for key in ("registryType", "identifier", *(() if kind == "oci" else ("version",)), "transport"):
            if key not in package:
                problems.append(f"{kind} package without {key}")
        if kind == "oci":
            identifier = package.get("identifier", "")
            if not OCI_REGISTRIES.match(identifier):
                problems.append(f"oci package {identifier!r} on a registry the official registry does not accept")
            if not OCI_REFERENCE.match(identifier):
                problems.append(f"oci package {identifier!r} is not registry/namespace/repository:tag")
        if VERSION_RANGE.search(package.get("version", "")):
            problems.append(f"{kind} package version {package.get('version')!r} is not one specific version")
        if (
            kind in ALLOWED_BASE_URLS
            and package.get("registryBaseUrl", next(iter(ALLOWED_BASE_URLS[kind]))) not in (ALLOWED_BASE_URLS[kind])
        ):
            problems.append(f"{kind} package from a registry the official registry does not accept")
        if kind == "mcpb":
            if not re.fullmatch(r"[a-f0-9]{64}", package.get("fileSha256", "")):
                problems.append("an mcpb package needs the bundle's fileSha256")
            if not package.get("identifier", "").startswith(("https://github.com/", "https://gitlab.com/")):
                problems.append("an mcpb package must download from GitHub or GitLab releases")
        if package.get("transport", {}).get("type") not in TRANSPORTS:
            problems.append(f"{kind} package with an unknown transport")
        for variable in package.get("environmentVariables", []):
            if not variable.get("name"):
                problems.append("an environment variable without a name")
    return problems


def test_server_json_follows_the_registrys_rules_and_the_packages_version() -> None:
    document = server_json()
    assert registry_problems(document) == []
    assert document["version"] == __version__
    pypi = [package for package in document["packages"] if package["registryType"] == "pypi"]
    assert [package["identifier"] for package in pypi] == ["incident-desk"]
    assert pypi[0]["version"] == __version__
    manifest = json.loads((ROOT / "client_configs" / "claude-desktop" / "manifest.json").read_text())
    assert manifest["version"] == __version__


def test_the_rules_catch_what_the_registry_refuses() -> None:
    document = server_json()
    assert registry_problems({**document, "name": "incident-desk"})
    assert registry_problems({**document, "description": "x" * 101})
    assert registry_problems({**document, "packages": [{**document["packages"][0], "version": "latest"}]})
    assert registry_problems({**document, "packages": [{**document["packages"][0], "version": "^0.1"}]})
    mcpb = {"registryType": "mcpb", "identifier": "https://example.com/a.mcpb", "version": "1", "transport": {}}
    assert len(registry_problems({**document, "packages": [mcpb]})) == 3


def test_server_json_environment_variables_are_the_desks_settings_with_secrets_marked() -> None:
    (package,) = [package for package in server_json()["packages"] if package["registryType"] == "pypi"]
    for variable in package["environmentVariables"]:
        name = variable["name"]
        if name == CONFIG_ENV_VAR:
            assert variable["isSecret"] is False
            continue
        field = Settings.model_fields.get(name.removeprefix("INCIDENT_DESK_").lower())
        assert field is not None, f"{name} is no setting of the desk"
        secret = SecretStr in getattr(field.annotation, "__args__", (field.annotation,))
        assert variable["isSecret"] is secret, name


def test_the_readme_carries_the_mcp_name_marker_the_registry_checks_on_pypi() -> None:
    name = server_json()["name"]
    assert f"mcp-name: {name}" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_release_copy_adds_each_bundle_with_its_digest(tmp_path: Path) -> None:
    script = load_script("server_json")
    bundle = tmp_path / f"incident-desk-{__version__}-linux-x86_64.mcpb"
    bundle.write_bytes(b"a bundle")
    released = script.with_bundles(server_json(), [bundle], f"v{__version__}")
    assert registry_problems(released) == []
    (added,) = [package for package in released["packages"] if package["registryType"] == "mcpb"]
    assert added["fileSha256"] == hashlib.sha256(b"a bundle").hexdigest()
    assert added["identifier"].endswith(f"/releases/download/v{__version__}/{bundle.name}")
    assert server_json()["packages"] == released["packages"][:-1], "the repository's copy was changed"


def test_the_release_document_names_the_pypi_package_each_bundle_and_the_labelled_image(tmp_path: Path) -> None:
    names = [f"incident-desk-{__version__}-{target}.mcpb" for target in ("linux-x86_64", "darwin-arm64")]
    for name in names:
        (tmp_path / name).write_bytes(name.encode())
    written = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "server_json.py"), str(tmp_path), f"v{__version__}"],
        capture_output=True,
        text=True,
        check=True,
    )
    released = json.loads(written.stdout)
    assert registry_problems(released) == []
    packages: dict[str, list[dict[str, Any]]] = {}
    for package in released["packages"]:
        packages.setdefault(package["registryType"], []).append(package)
    assert set(packages) == {"pypi", "mcpb", "oci"}
    assert [package["identifier"] for package in packages["pypi"]] == ["incident-desk"]
    digests = {package["identifier"].rpartition("/")[2]: package["fileSha256"] for package in packages["mcpb"]}
    assert digests == {name: hashlib.sha256(name.encode()).hexdigest() for name in names}
    (image,) = packages["oci"]
    assert image["identifier"] == f"ghcr.io/incident-desk/incident-desk:{__version__}"
    assert image["transport"] == {"type": "stdio"}
    assert {"type": "named", "name": "--transport", "value": "stdio"} in image["packageArguments"], (
        "the image serves HTTP by default; a stdio client must say so"
    )
    labels = dict(re.findall(r'^LABEL ([\w.]+)="([^"]*)"$', (ROOT / "Containerfile").read_text(), re.MULTILINE))
    assert labels["io.modelcontextprotocol.server.name"] == released["name"], "the registry checks this label"


def test_server_json_validates_against_the_registrys_published_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    document = server_json()
    try:
        schema = httpx2.get(document["$schema"], timeout=10, follow_redirects=True).json()
    except (httpx2.HTTPError, ValueError) as exc:
        pytest.skip(f"the registry's schema at {document['$schema']} is unreachable from here: {exc}")
    jsonschema.validate(document, schema)


def test_pypi_metadata_is_complete() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(project["urls"])
    assert project["license"] == "MIT"
    classifiers = project["classifiers"]
    assert any(entry.startswith("Development Status ::") for entry in classifiers)
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert project["urls"]["Repository"] == server_json()["repository"]["url"]


def _uv() -> str:
    beside_python = Path(sys.executable).parent / ("uv.exe" if sys.platform == "win32" else "uv")
    found = str(beside_python) if beside_python.exists() else shutil.which("uv")
    assert found is not None, "uv is not installed (it comes with the test extra)"
    return found


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(900)
@pytest.mark.anyio
async def test_the_built_wheel_passes_twine_and_serves_from_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    assert wheel.name == f"incident_desk-{__version__}-py3-none-any.whl"
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"incident_desk-{__version__}.dist-info/METADATA").decode()
        assert "incident_desk/data/timeline.html" in archive.namelist()
    assert f"mcp-name: {server_json()['name']}" in metadata
    assert "Project-URL: Repository, https://github.com/incident-desk/incident-desk" in metadata
    with tarfile.open(sdist) as archive:
        assert any(member.endswith("/server.json") for member in archive.getnames())

    # The fresh environment is made and filled by uv (a test dependency): the same wheel and resolution as pip,
    # in seconds rather than a minute of pip's own start and single-threaded installs.
    fresh = tmp_path / "venv"
    uv = _uv()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(fresh)], check=True, timeout=120)
    python = fresh / ("Scripts" if sys.platform == "win32" else "bin") / "python"
    installed = subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    command = python.parent / "incident-desk"
    env = child_env(tmp_path / "audit.sqlite3")
    async with Client(StdioServerParameters(command=str(command), args=[], cwd=str(tmp_path), env=env)) as client:
        assert client.server_info is not None
        assert client.server_info.version == __version__
        index = text_of(await client.read_resource("incident://index"))
    assert "INC-1043" in index


def test_a_bundle_field_left_empty_is_an_unset_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A .mcpb host leaves ``${user_config.x}`` in place of an optional field the user did not fill in."""
    from incident_desk.settings.model import load_settings

    monkeypatch.setenv("INCIDENT_DESK_DATA_DIR", "${user_config.data_dir}")
    monkeypatch.setenv(CONFIG_ENV_VAR, "${user_config.config_file}")
    monkeypatch.setenv("INCIDENT_DESK_PROVIDER_API_KEY", "${user_config.provider_api_key}")
    settings = load_settings({})
    assert settings.data_dir is None
    assert settings.provider_api_key is None


def test_the_release_workflow_builds_every_artifact_and_publishes_only_when_turned_on() -> None:
    import yaml

    text = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    workflow = yaml.safe_load(text)
    jobs = workflow["jobs"]
    matrix = jobs["executables"]["strategy"]["matrix"]["include"]
    built = {(entry["os"].split("-")[0], entry["arch"]) for entry in matrix}
    assert built == {(os, arch) for os in ("ubuntu", "macos", "windows") for arch in ("x86-64", "arm64")}
    steps = "\n".join(step.get("run", "") for step in jobs["executables"]["steps"])
    assert "--mode both --archive --mcpb" in steps
    assert workflow["env"]["MCPB_PACKAGE"] == load_script("build").MCPB_PACKAGE
    assert "twine check --strict" in "\n".join(step.get("run", "") for step in jobs["python-package"]["steps"])
    release = "\n".join(step.get("run", "") for step in jobs["release"]["steps"])
    assert "sha256sum" in release
    assert "packaging/server_json.py" in release
    assert "container-image" in jobs["release"]["needs"], "server.json names the image only once it is pushed"
    image_steps = jobs["container-image"]["steps"]
    assert "packaging/server_json.py --image" in "\n".join(step.get("run", "") for step in image_steps)
    (push,) = [step["with"] for step in image_steps if step.get("uses", "").startswith("docker/build-push-action")]
    assert push["file"] == "Containerfile"
    assert push["push"] == "${{ startsWith(github.ref, 'refs/tags/v') }}", "a manual run builds without pushing"
    for name, variable in (("publish-pypi", "PUBLISH_PYPI"), ("publish-mcp-registry", "PUBLISH_MCP_REGISTRY")):
        assert f"vars.{variable} == 'true'" in jobs[name]["if"], "publishing must stay off until turned on"
    with_oidc = {name for name, job in jobs.items() if job.get("permissions", {}).get("id-token") == "write"}
    assert with_oidc == {"publish-pypi", "publish-mcp-registry"}
    assert workflow["permissions"] == {"contents": "read"}
    assert "secrets." not in text, "trusted publishing needs no stored token"
