"""Build incident-desk with PyInstaller for this host, then prove the executable works before anyone ships it.

    python packaging/build.py                      # onedir, smoke-tested
    python packaging/build.py --mode both --archive --mcpb   # what the release workflow runs
    python packaging/build.py --smoke-only packaging/dist/onedir/incident-desk/incident-desk

The smoke test drives the built executable the way clients do and fails loudly (exit 1, a message saying what
broke) on any gap a frozen build typically has: a module imported by name that PyInstaller did not collect,
missing package data, keyring backends without their entry points, a lazily imported HTTP stack. It checks:

1. ``--version`` and ``config claude-desktop`` (the printed command must be the executable itself);
2. ``key show`` with the default keyring backend and with one chosen by name (PYTHON_KEYRING_BACKEND);
3. stdio through ``mcp.Client``: initialize, list tools, read ``incident://index``, call ``list_incidents``
   and the degrading ``summarize_incident``, get the ``postmortem`` prompt;
4. Streamable HTTP on a free loopback port: list tools and read the index;
5. every stderr for ``ModuleNotFoundError`` / ``ImportError`` / ``Traceback``, and PyInstaller's warnings for
   modules the desk imports unconditionally but that were not found.
"""
# ruff: noqa: T201 -- a build script reports on stdout

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = HERE / "incident_desk.spec"
MANIFEST = ROOT / "client_configs" / "claude-desktop" / "manifest.json"
NAME = "incident-desk"
EXE_SUFFIX = ".exe" if sys.platform == "win32" else ""
EXPECTED_INDEX = "INC-1042\nINC-1043"
EXPECTED_TOOLS = {"list_incidents", "read_incident_log", "get_runbook", "summarize_incident", "restart_service"}
IMPORT_PROBLEMS = re.compile(r"ModuleNotFoundError|ImportError|No module named|Traceback \(most recent call last\)")
STEP_TIMEOUT = 90.0
MCPB_PACKAGE = "@anthropic-ai/mcpb@2.1.2"  # the official bundle tool, pinned: it validates against its own schema


class SmokeFailure(Exception):
    """The built executable does not work; the message says which check failed and shows its output."""


# ---------------------------------------------------------------------------------------------------------------
# Building


def platform_tag() -> str:
    system = {"win32": "windows", "darwin": "macos"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"{system}-{arch}"


def executable_path(mode: str, dist_dir: Path) -> Path:
    if mode == "onefile":
        return dist_dir / "onefile" / f"{NAME}{EXE_SUFFIX}"
    return dist_dir / "onedir" / NAME / f"{NAME}{EXE_SUFFIX}"


def build(mode: str, dist_dir: Path, work_dir: Path) -> Path:
    """Run PyInstaller on the spec for ``mode`` (onedir or onefile); return the executable's path."""
    mode_dist = dist_dir / mode
    mode_work = work_dir / mode
    command = [
        sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
        "--distpath", str(mode_dist), "--workpath", str(mode_work), str(SPEC), "--", "--mode", mode,
    ]  # fmt: skip
    print(f"==> building {mode}: {' '.join(command)}", flush=True)
    started = time.monotonic()
    completed = subprocess.run(command, cwd=ROOT, check=False)
    if completed.returncode != 0:
        raise SmokeFailure(f"PyInstaller failed for {mode} (exit {completed.returncode}); see its output above")
    exe = executable_path(mode, dist_dir)
    if not exe.is_file():
        raise SmokeFailure(f"PyInstaller finished but {exe} does not exist")
    print(f"==> built {exe} in {time.monotonic() - started:.1f}s", flush=True)
    check_warnings(mode_work)
    return exe


def _is_real_module(name: str) -> bool:
    """True when ``name`` is a module in this environment (not a name imported from a package, such as
    ``pydantic.BaseModel``), or when its top-level package is not installed at all."""
    try:
        if importlib.util.find_spec(name.split(".")[0]) is None:
            return True
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# Packages of an optional extra (postgres): a build without them is a build without that feature, which the desk
# reports by name when it is configured (app.require_postgres_driver), so their absence is no build failure.
OPTIONAL_EXTRAS = frozenset({"psycopg", "psycopg_pool", "psycopg_binary"})


def check_warnings(work_dir: Path) -> None:
    """Fail on modules that the desk imports at top level but PyInstaller could not collect."""
    for warn_file in work_dir.rglob("warn-*.txt"):
        for line in warn_file.read_text(encoding="utf-8", errors="replace").splitlines():
            match = re.match(r"missing module named (\S+) - imported by (.*)$", line)
            if not match:
                continue
            importers = [part.strip() for part in match.group(2).split(",")]
            ours = [imp for imp in importers if imp.startswith("incident_desk") and "(top-level)" in imp]
            if ours and match.group(1).split(".")[0] in OPTIONAL_EXTRAS:
                continue
            if ours and _is_real_module(match.group(1)):
                raise SmokeFailure(f"PyInstaller could not find {match.group(1)}, imported by {', '.join(ours)}")


# ---------------------------------------------------------------------------------------------------------------
# Smoke test


def smoke_env(scratch: Path) -> dict[str, str]:
    """Variables for the executable: its own audit journal and data home, nothing from the developer's."""
    return {
        "INCIDENT_DESK_AUDIT_DB": str(scratch / "audit.sqlite3"),
        "INCIDENT_DESK_LOG_LEVEL": "info",
        "XDG_DATA_HOME": str(scratch / "xdg-data"),
    }


def _full_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INCIDENT_DESK_")}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    env.update(extra)
    return env


def _check_output(what: str, *streams: str) -> None:
    for text in streams:
        if IMPORT_PROBLEMS.search(text):
            raise SmokeFailure(f"{what}: an import failed inside the executable:\n{text}")


def run_exe(exe: Path, args: Sequence[str], env: dict[str, str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        completed = subprocess.run(
            [str(exe), *args],
            env=_full_env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=STEP_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SmokeFailure(f"{what}: no answer within {STEP_TIMEOUT:.0f}s") from None
    _check_output(what, completed.stdout, completed.stderr)
    return completed


def check_cli(exe: Path, env: dict[str, str]) -> None:
    from incident_desk import __version__

    version = run_exe(exe, ["--version"], env, "--version")
    if version.returncode != 0 or __version__ not in version.stdout + version.stderr:
        raise SmokeFailure(f"--version: exit {version.returncode}, expected {__version__}:\n{version.stderr}")

    config = run_exe(exe, ["config", "claude-desktop"], env, "config claude-desktop")
    if config.returncode != 0:
        raise SmokeFailure(f"config claude-desktop: exit {config.returncode}:\n{config.stderr}")
    try:
        entry = json.loads(config.stdout)["mcpServers"][NAME]
    except (ValueError, KeyError) as exc:
        raise SmokeFailure(f"config claude-desktop printed no usable snippet ({exc}):\n{config.stdout}") from None
    if Path(entry["command"]).resolve() != exe.resolve() or entry["args"]:
        raise SmokeFailure(f"a frozen build must launch itself, but the snippet runs {entry}")

    for backend in (None, "keyring.backends.null.Keyring"):
        label = f"key show ({backend or 'default keyring backend'})"
        backend_env = {**env, "PYTHON_KEYRING_BACKEND": backend} if backend else env
        shown = run_exe(exe, ["key", "show"], backend_env, label)
        if shown.returncode not in (0, 1):
            raise SmokeFailure(f"{label}: exit {shown.returncode}:\n{shown.stderr}")
    print("==> CLI, config snippet and keyring backends OK", flush=True)


async def exercise(client: Any, *, full: bool) -> None:
    """The calls a client makes; raises SmokeFailure with what was wrong."""
    tools = {tool.name for tool in (await client.list_tools()).tools}
    if not tools >= EXPECTED_TOOLS:
        raise SmokeFailure(f"tools/list lacks {sorted(EXPECTED_TOOLS - tools)} (got {sorted(tools)})")
    index = await client.read_resource("incident://index")
    text = "".join(getattr(content, "text", "") for content in index.contents).strip()
    if text != EXPECTED_INDEX:
        raise SmokeFailure(f"incident://index returned {text!r}, expected {EXPECTED_INDEX!r}")
    listed = await client.call_tool("list_incidents", {})
    if listed.is_error or "INC-1042" not in str(listed.content):
        raise SmokeFailure(f"list_incidents failed: {listed.content}")
    if not full:
        return
    summary = await client.call_tool("summarize_incident", {"incidentId": "INC-1043"})
    if summary.is_error or "SAMPLING_UNAVAILABLE" not in str(summary.content):
        raise SmokeFailure(f"summarize_incident did not degrade to the raw log: {summary.content}")
    prompt = await client.get_prompt("postmortem", {"incidentId": "INC-1042"})
    if not prompt.messages:
        raise SmokeFailure("the postmortem prompt returned no message")


async def check_stdio(exe: Path, env: dict[str, str], scratch: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(exe), args=[], env=env, cwd=str(scratch))
    errlog_path = scratch / "stdio-stderr.log"
    try:
        with errlog_path.open("w", encoding="utf-8") as errlog:
            with anyio.fail_after(STEP_TIMEOUT):
                async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                    await exercise(client, full=True)
    except SmokeFailure as exc:
        raise SmokeFailure(f"stdio: {exc}\n--- server stderr ---\n{_read(errlog_path)}") from None
    except BaseException as exc:  # ExceptionGroup, TimeoutError, McpError...
        raise SmokeFailure(f"stdio session failed: {exc!r}\n--- server stderr ---\n{_read(errlog_path)}") from None
    _check_output("stdio server stderr", _read(errlog_path))
    print("==> stdio: initialize, tools, incident://index, list_incidents, summarize_incident, prompt OK", flush=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def check_http(exe: Path, env: dict[str, str], scratch: Path) -> None:
    import anyio

    port = _free_port()
    log_path = scratch / "http-stderr.log"
    out_path = scratch / "http-stdout.log"
    with log_path.open("w", encoding="utf-8") as log, out_path.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [str(exe), "--transport", "http", "--port", str(port)],
            env=_full_env(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=log,
            cwd=scratch,
        )
        try:
            deadline = time.monotonic() + STEP_TIMEOUT
            while True:
                if process.poll() is not None:
                    raise SmokeFailure(f"HTTP server exited with {process.returncode}:\n{_read(log_path)}")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SmokeFailure(f"HTTP server not listening on {port}:\n{_read(log_path)}") from None
                    time.sleep(0.2)
            try:
                anyio.run(_http_session, f"http://127.0.0.1:{port}/mcp")
            except SmokeFailure as exc:
                raise SmokeFailure(f"HTTP: {exc}\n--- server stderr ---\n{_read(log_path)}") from None
            except BaseException as exc:
                raise SmokeFailure(f"HTTP session failed: {exc!r}\n--- server stderr ---\n{_read(log_path)}") from None
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)
    _check_output("HTTP server output", _read(log_path), _read(out_path))
    print(f"==> Streamable HTTP on 127.0.0.1:{port}: tools, incident://index, list_incidents OK", flush=True)


async def _http_session(url: str) -> None:
    import anyio
    from mcp import Client

    with anyio.fail_after(STEP_TIMEOUT):
        async with Client(url, mode="legacy") as client:
            await exercise(client, full=False)


def check_bundle(exe: Path) -> None:
    """onedir only: the files PyInstaller must have copied are there."""
    internal = exe.parent / "_internal"
    if not internal.is_dir():
        return
    needed = {
        "sample desk": internal / "incident_desk" / "data" / "sample" / "incidents",
        "server instructions": internal / "incident_desk" / "data" / "instructions.md",
        "timeline view": internal / "incident_desk" / "data" / "timeline.html",
    }
    for what, path in needed.items():
        if not path.exists():
            raise SmokeFailure(f"the bundle lacks the {what}: {path}")
    if not list(internal.glob("keyring-*.dist-info/entry_points.txt")):
        raise SmokeFailure("the bundle lacks keyring's dist-info: backends would not be discovered")


def smoke(exe: Path) -> float:
    """Run every check against ``exe``; return the seconds it took. Raises SmokeFailure."""
    import anyio

    started = time.monotonic()
    exe = exe.absolute()
    if not exe.is_file():
        raise SmokeFailure(f"{exe} does not exist")
    print(f"==> smoke-testing {exe}", flush=True)
    with tempfile.TemporaryDirectory(prefix="incident-desk-smoke-") as tmp:
        scratch = Path(tmp)
        env = smoke_env(scratch)
        check_bundle(exe)
        check_cli(exe, env)
        anyio.run(check_stdio, exe, env, scratch)
        check_http(exe, env, scratch)
    elapsed = time.monotonic() - started
    print(f"==> smoke test passed in {elapsed:.1f}s", flush=True)
    return elapsed


# ---------------------------------------------------------------------------------------------------------------
# Release artefacts


def _zip_dir(zf: zipfile.ZipFile, folder: Path, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            info = zipfile.ZipInfo.from_file(path, f"{prefix}/{path.relative_to(folder).as_posix()}")
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())  # from_file keeps the mode bits (executables stay executable)


def archive(exe: Path, mode: str, release_dir: Path) -> Path:
    from incident_desk import __version__

    release_dir.mkdir(parents=True, exist_ok=True)
    base = f"{NAME}-{__version__}-{platform_tag()}"
    if mode == "onefile":
        target = release_dir / f"{base}{EXE_SUFFIX}"
        shutil.copy2(exe, target)
        return target
    if sys.platform == "win32":
        target = release_dir / f"{base}-onedir.zip"
        with zipfile.ZipFile(target, "w") as zf:
            _zip_dir(zf, exe.parent, NAME)
        return target
    target = release_dir / f"{base}-onedir.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        tar.add(exe.parent, arcname=NAME)
    return target


def mcpb_cli() -> list[str]:
    """The official bundle tool: $MCPB_CLI, an ``mcpb`` on PATH, or the pinned npm package through npx."""
    chosen = os.environ.get("MCPB_CLI") or shutil.which("mcpb")
    if chosen:
        return [chosen]
    npx = shutil.which("npx")
    if npx is None:
        raise SmokeFailure(f"packing a .mcpb needs the official tool: npm install -g {MCPB_PACKAGE} (or npx)")
    return [npx, "--yes", MCPB_PACKAGE]


def _run_mcpb(cli: Sequence[str], *args: str) -> str:
    done = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SmokeFailure(f"mcpb {args[0]} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def mcpb(onedir_exe: Path, release_dir: Path, cli: Sequence[str] | None = None) -> Path:
    """A Claude Desktop bundle for this platform, packed by the official tool: the manifest plus the onedir build
    under server/; the manifest is validated before packing and the bundle read back after."""
    from incident_desk import __version__

    cli = list(cli) if cli is not None else mcpb_cli()
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    manifest["version"] = __version__
    manifest["compatibility"] = {**manifest.get("compatibility", {}), "platforms": [sys.platform]}
    release_dir.mkdir(parents=True, exist_ok=True)
    target = release_dir / f"{NAME}-{__version__}-{platform_tag()}.mcpb"
    with tempfile.TemporaryDirectory(prefix="incident-desk-mcpb-") as tmp:
        stage = Path(tmp) / NAME
        shutil.copytree(onedir_exe.parent, stage / "server", symlinks=True)
        (stage / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        _run_mcpb(cli, "validate", str(stage / "manifest.json"))
        target.unlink(missing_ok=True)
        _run_mcpb(cli, "pack", str(stage), str(target))
    _run_mcpb(cli, "info", str(target))
    return target


# ---------------------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["onedir", "onefile", "both"], default="onedir")
    parser.add_argument("--dist", type=Path, default=HERE / "dist", help="output folder (default packaging/dist)")
    parser.add_argument("--work", type=Path, default=HERE / "build", help="PyInstaller work folder")
    parser.add_argument("--no-smoke", action="store_true", help="build only (not for release)")
    parser.add_argument("--smoke-only", type=Path, metavar="EXE", help="smoke-test an existing executable")
    parser.add_argument("--archive", action="store_true", help="write release archives to <dist>/release")
    parser.add_argument("--mcpb", action="store_true", help="also write a Claude Desktop .mcpb (needs onedir)")
    args = parser.parse_args(argv)

    try:
        if args.smoke_only:
            smoke(args.smoke_only)
            return 0
        modes = ["onedir", "onefile"] if args.mode == "both" else [args.mode]
        built = {mode: build(mode, args.dist.absolute(), args.work.absolute()) for mode in modes}
        if not args.no_smoke:
            for exe in built.values():
                smoke(exe)
        release_dir = args.dist.absolute() / "release"
        for mode, exe in built.items():
            if args.archive:
                print(f"==> wrote {archive(exe, mode, release_dir)}", flush=True)
        if args.mcpb:
            if "onedir" not in built:
                raise SmokeFailure("--mcpb needs the onedir build (--mode onedir or both)")
            print(f"==> wrote {mcpb(built['onedir'], release_dir)}", flush=True)
    except SmokeFailure as exc:
        print(f"\nFROZEN BUILD FAILED: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
