"""A local visdom server that runs offline, bound to 127.0.0.1.

visdom 0.2.4's own entry point (``python -m visdom.server``) first downloads its JavaScript, CSS and fonts
from CDNs and exits when that fails. This module instead

* installs the same files once from the npm registry (``npm pack``) into the installed ``visdom/static``
  tree, at the paths visdom's ``server/build.py:download_scripts`` would write them (:func:`ensure_assets`);
* starts ``visdom.server.run_server.main`` (which has no download step) in a subprocess listening on the
  loopback interface only, and waits until it answers (:func:`start_server`, a context manager).

The Python client (``visdom.Visdom``) needs none of the static assets; only the browser page does.

CLI::

    python -m ltr.admin.visdom_server [--port 8097] [--env-path DIR] [--install-assets-only] [--skip-assets]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ltr.admin.extras import MissingExtra, import_extra

# free_port is re-exported: docs/visdom.md and scripts/visdom_screenshot.py import it from here
from ltr.admin.ports import LOOPBACK
from ltr.admin.ports import free_port as free_port

DEFAULT_PORT = 8097
# the one file visdom writes after a complete asset download; it holds visdom.__version__
VERSION_BUILT = "version.built"


class VisdomAssetError(RuntimeError):
    """The browser assets could not be installed (npm missing, registry unreachable, bad package layout)."""


class VisdomServerError(RuntimeError):
    """The visdom server process did not start or stopped answering."""


@dataclass(frozen=True)
class Asset:
    """One file of an npm package and where visdom's page expects it.

    ``source`` is the path inside the package (without the ``package/`` prefix of the tarball);
    ``target`` is relative to ``visdom/static``. ``source`` ending in ``/`` copies that whole subtree
    below ``target`` (also ending in ``/``).
    """

    package: str
    version: str
    source: str
    target: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


_MJ = "js/mathjax/2.7.5/"

# Target paths follow visdom 0.2.4 server/build.py: *.js and *.js.map go to js/, *.css to css/, the rest
# (fonts, and the extension-less ``classnames``) to fonts/; MathJax below js/mathjax/2.7.5/.
ASSETS: tuple[Asset, ...] = (
    Asset("jquery", "3.1.1", "dist/jquery.min.js", "js/jquery.min.js"),
    Asset("bootstrap", "3.3.7", "dist/js/bootstrap.min.js", "js/bootstrap.min.js"),
    Asset("bootstrap", "3.3.7", "dist/css/bootstrap.min.css", "css/bootstrap.min.css"),
    *(
        Asset(
            "bootstrap",
            "3.3.7",
            f"dist/fonts/glyphicons-halflings-regular.{ext}",
            f"fonts/glyphicons-halflings-regular.{ext}",
        )
        for ext in ("eot", "woff2", "woff", "ttf", "svg")
    ),
    Asset("react", "16.2.0", "umd/react.production.min.js", "js/react-react.min.js"),
    Asset("react-dom", "16.2.0", "umd/react-dom.production.min.js", "js/react-dom.min.js"),
    Asset("react-modal", "3.1.10", "dist/react-modal.min.js", "js/react-modal.min.js"),
    # cdn.plot.ly/plotly-2.11.1.min.js is the same build as plotly.js-dist-min@2.11.1
    Asset("plotly.js-dist-min", "2.11.1", "plotly.min.js", "js/plotly-plotly.min.js"),
    Asset("sjcl", "1.0.7", "sjcl.js", "js/sjcl.js"),
    Asset("layout-bin-packer", "1.4.0", "dist/layout-bin-packer.js", "js/layout_bin_packer.js"),
    Asset("layout-bin-packer", "1.4.0", "dist/layout-bin-packer.js.map", "js/layout-bin-packer.js.map"),
    # d3js.org/d3.v3.min.js and d3js.org/d3-selection-multi.v1.js
    Asset("d3", "3.5.17", "d3.min.js", "js/d3.v3.min.js"),
    Asset("d3-selection-multi", "1.0.1", "build/d3-selection-multi.js", "js/d3-selection-multi.v1.js"),
    Asset("save-svg-as-png", "1.4.17", "lib/saveSvgAsPng.js", "js/saveSvgAsPng.js"),
    Asset("react-resizable", "1.4.6", "css/styles.css", "css/react-resizable-styles.css"),
    Asset("react-grid-layout", "0.16.3", "css/styles.css", "css/react-grid-layout-styles.css"),
    # unpkg.com/classnames@2.2.5 serves the package's main file
    Asset("classnames", "2.2.5", "index.js", "fonts/classnames"),
    # the eight MathJax files visdom's build fetches ...
    *(
        Asset("mathjax", "2.7.5", p, _MJ + p)
        for p in (
            "MathJax.js",
            "config/Safe.js",
            "config/TeX-AMS-MML_HTMLorMML.js",
            "extensions/Safe.js",
            "jax/output/SVG/config.js",
            "jax/output/SVG/jax.js",
            "jax/output/SVG/fonts/TeX/fontdata.js",
            "jax/output/SVG/fonts/TeX/Size1/Regular/Main.js",
        )
    ),
    # ... and the subtrees MathJax loads on demand at runtime (about 20 MB; the 'unpacked' sources, tests and
    # the non-TeX web fonts are left out)
    *(
        Asset("mathjax", "2.7.5", p, _MJ + p)
        for p in ("extensions/", "jax/", "localization/en/", "fonts/HTML-CSS/TeX/woff/")
    ),
)


def static_dir() -> Path:
    """The ``static`` folder of the installed visdom package (where its web server serves files from)."""
    import importlib.util

    spec = importlib.util.find_spec("visdom")
    if spec is None or spec.origin is None:
        raise VisdomAssetError(
            "the python package 'visdom' is not installed; install it with: pip install 'ebmtrack[visdom]'"
        )
    return Path(spec.origin).parent / "static"


def _visdom_version() -> str:
    return str(import_extra("visdom", "visdom").__version__)


def missing_assets(static: Path | None = None) -> list[str]:
    """Relative paths (below ``static``) of required files that are absent, plus ``version.built`` when it is
    absent or names another visdom version. Subtree assets count as present when their folder is non-empty.
    """
    static = static_dir() if static is None else Path(static)
    missing = []
    for asset in ASSETS:
        path = static / asset.target
        present = path.is_dir() and any(path.iterdir()) if asset.target.endswith("/") else path.is_file()
        if not present:
            missing.append(asset.target)
    built = static / VERSION_BUILT
    if not built.is_file() or built.read_text().strip() != _visdom_version():
        missing.append(VERSION_BUILT)
    return missing


def _npm_pack(specs: Sequence[str], dest: Path, npm: str) -> dict[str, Path]:
    """Download the tarballs of ``specs`` (``name@version``) into ``dest`` with ``npm pack``.

    Returns spec -> tarball path. Raises VisdomAssetError naming the command when npm fails.
    """
    exe = shutil.which(npm)
    if exe is None:
        raise VisdomAssetError(
            f"npm executable {npm!r} not found on PATH; install Node.js/npm (e.g. 'apt-get install -y npm') "
            "to fetch the visdom browser assets, or pass --skip-assets and use only the Python client"
        )
    cmd = [exe, "pack", "--silent", "--pack-destination", str(dest), *specs]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise VisdomAssetError(
            f"'{' '.join(cmd)}' failed with exit code {proc.returncode} (is the npm registry reachable?):\n"
            f"{proc.stderr.strip()[-2000:]}"
        )
    out: dict[str, Path] = {}
    for spec in specs:
        name, version = spec.rsplit("@", 1)
        tarball = dest / f"{name.replace('@', '').replace('/', '-')}-{version}.tgz"
        if not tarball.is_file():
            raise VisdomAssetError(f"npm pack did not produce {tarball} for {spec}")
        out[spec] = tarball
    return out


def _copy_from_tarball(tarball: Path, assets: Sequence[Asset], static: Path) -> list[str]:
    """Copy the files named by ``assets`` out of an npm tarball into ``static``; returns the written paths.

    Only regular-file members under ``package/`` are read (no links, no extraction of anything else); every
    destination is checked to stay inside ``static``.
    """
    written: list[str] = []
    root = static.resolve()
    with tarfile.open(tarball, "r:gz") as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        for asset in assets:
            src = "package/" + asset.source
            if asset.source.endswith("/"):
                pairs = [(n, asset.target + n[len(src) :]) for n in members if n.startswith(src)]
            else:
                pairs = [(src, asset.target)] if src in members else []
            if not pairs:
                raise VisdomAssetError(f"{tarball.name} ({asset.spec}) has no {asset.source!r}")
            for name, rel in pairs:
                dst = (static / rel).resolve()
                if root not in dst.parents:
                    raise VisdomAssetError(
                        f"{tarball.name}: member {name!r} would be written outside {static}"
                    )
                dst.parent.mkdir(parents=True, exist_ok=True)
                fobj = tar.extractfile(members[name])
                if fobj is None:
                    raise VisdomAssetError(f"{tarball.name}: cannot read member {name!r}")
                tmp = dst.with_name(dst.name + ".part")
                with fobj, open(tmp, "wb") as fh:
                    shutil.copyfileobj(fobj, fh)
                os.replace(tmp, dst)
                written.append(rel)
    return written


def ensure_assets(
    static: Path | None = None,
    *,
    npm: str = "npm",
    force: bool = False,
    log: Callable[[str], None] = print,
) -> list[str]:
    """Make sure visdom's browser assets are installed below ``static`` (default: the installed package's).

    Idempotent: when nothing is missing (see :func:`missing_assets`) and ``force`` is false, nothing is
    downloaded and ``[]`` is returned. Otherwise only the npm packages that provide a missing file (all of
    them with ``force``) are fetched with ``npm pack`` into a temporary folder, the needed files are copied,
    and ``version.built`` is written last (so an interrupted install is completed next time). Returns the
    relative paths written.

    Raises VisdomAssetError when npm is missing, the registry is unreachable or a package lacks a file.
    """
    static = static_dir() if static is None else Path(static)
    missing = [a.target for a in ASSETS] + [VERSION_BUILT] if force else missing_assets(static)
    if not missing:
        log(f"visdom assets: all {len(ASSETS)} present in {static}")
        return []
    # Single files are written atomically, so a present one is complete. A subtree is only known complete once
    # version.built (written last) is there, so without it the subtrees are copied again.
    todo = [a for a in ASSETS if a.target in missing or (VERSION_BUILT in missing and a.target.endswith("/"))]
    specs = sorted({a.spec for a in todo})
    log(f"visdom assets: {len(missing)} missing in {static}; fetching {', '.join(specs)} with npm pack")
    written: list[str] = []
    with tempfile.TemporaryDirectory(prefix="visdom-npm-") as tmp:
        tarballs = _npm_pack(specs, Path(tmp), npm)
        for spec in specs:
            group = [a for a in todo if a.spec == spec]
            got = _copy_from_tarball(tarballs[spec], group, static)
            written.extend(got)
            targets = sorted({a.target for a in group})
            shown = ", ".join(targets[:3]) + (f", ... ({len(targets)} targets)" if len(targets) > 3 else "")
            log(f"  {spec}: {len(got)} file(s) -> {shown}")
    built = static / VERSION_BUILT
    tmp_built = built.with_name(VERSION_BUILT + ".part")
    tmp_built.write_text(_visdom_version())
    os.replace(tmp_built, built)
    written.append(VERSION_BUILT)
    still = missing_assets(static)
    if still:
        raise VisdomAssetError(f"after installing, still missing in {static}: {', '.join(still)}")
    log(f"visdom assets: wrote {len(written)} file(s); {VERSION_BUILT} = {_visdom_version()}")
    return written


def _answers(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child before exec
    """Linux: ask the kernel to SIGTERM the server when the process (thread) that started it dies, so a killed
    test run or CLI does not leave a server behind."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def server_command(port: int, env_path: Path | str) -> list[str]:
    """argv that runs visdom 0.2.4's server (``run_server.main``, no CDN download) on 127.0.0.1:``port``."""
    return [
        sys.executable,
        "-c",
        "from visdom.server.run_server import main; main()",
        "-port",
        str(port),
        "-bind_local",
        "-env_path",
        str(env_path),
        "-logging_level",
        "WARNING",
    ]


@dataclass
class VisdomServer:
    """A running visdom server subprocess (see :func:`start_server`); a context manager, or call close()."""

    port: int
    env_path: Path
    log_path: Path
    process: subprocess.Popen = field(repr=False)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def server(self) -> str:
        """The ``server`` argument for ``visdom.Visdom(server=..., port=handle.port)``."""
        return f"http://{LOOPBACK}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def close(self, timeout: float = 10.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``timeout`` seconds) and reap it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)

    def __enter__(self) -> VisdomServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_server(
    port: int,
    *,
    env_path: Path | str,
    log_path: Path | str | None = None,
    timeout: float = 60.0,
) -> VisdomServer:
    """Start visdom on 127.0.0.1:``port`` (loopback only) storing environments in ``env_path``.

    Returns once the port accepts connections. On Linux the server also gets SIGTERM when the thread that
    started it exits (PR_SET_PDEATHSIG), so call this from a thread that outlives the server. The server's stdout/stderr go to ``log_path`` (default
    ``<env_path>/visdom_server.log``). Raises VisdomServerError (with the log tail) when the process exits
    early or does not answer within ``timeout`` seconds, and when something already listens on ``port``.
    """
    env_path = Path(env_path)
    env_path.mkdir(parents=True, exist_ok=True)
    log_path = env_path / "visdom_server.log" if log_path is None else Path(log_path)
    if _answers(port, timeout=0.2):
        raise VisdomServerError(f"port {port} on {LOOPBACK} is already in use; pick another with --port")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            server_command(port, env_path),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal reaches only the parent; close() stops the child
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    handle = VisdomServer(port=port, env_path=env_path, log_path=log_path, process=proc)
    try:
        _wait_until_answering(handle, timeout)
    except BaseException:  # includes Ctrl-C while waiting: never leave the child running
        handle.close()
        raise
    return handle


def _wait_until_answering(handle: VisdomServer, timeout: float) -> None:
    proc, port, log_path = handle.process, handle.port, handle.log_path
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise VisdomServerError(
                f"visdom server exited with code {proc.returncode} before answering on port {port}; "
                f"log {log_path}:\n{handle.log_tail()}"
            )
        if _answers(port):
            return
        if time.monotonic() > deadline:
            raise VisdomServerError(
                f"visdom server did not answer on {handle.url} within {timeout:.0f} s; log {log_path}:\n"
                f"{handle.log_tail()}"
            )
        time.sleep(0.1)


def _tornado_check() -> str | None:
    """A warning when the installed tornado serves visdom's page with HTTP 403 (tornado >= 6.6)."""
    tornado = import_extra("tornado", "visdom")
    major, minor = (int(x) for x in tornado.version.split(".")[:2])
    if (major, minor) >= (6, 6):
        return (
            f"tornado {tornado.version} answers 403 for the visdom page; install 'tornado<6.6' "
            "(the Python client still works)"
        )
    return None


def _wait_interruptibly(process: subprocess.Popen, poll_seconds: float = 0.25) -> int:
    """``process.wait()`` that Ctrl-C always interrupts promptly.

    A blocking ``waitpid`` is interrupted only when the signal lands on the main thread; with other threads
    in the process (torch's, for one) the kernel may deliver SIGINT to one of them, and Python's handler
    then waits for the main thread to return from ``waitpid``, i.e. for the server to exit. Waking up every
    ``poll_seconds`` lets the pending KeyboardInterrupt through.
    """
    while True:
        try:
            return process.wait(timeout=poll_seconds)
        except subprocess.TimeoutExpired:
            continue


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ltr.admin.visdom_server",
        description="Run a local, offline visdom server on 127.0.0.1 (foreground; Ctrl-C stops it).",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port on 127.0.0.1 (default 8097)")
    parser.add_argument(
        "--env-path",
        type=Path,
        default=Path(os.environ.get("VISDOM_ENV_PATH", Path.home() / ".visdom")),
        help="folder where visdom saves environments (default $VISDOM_ENV_PATH or ~/.visdom)",
    )
    parser.add_argument(
        "--install-assets-only", action="store_true", help="install the browser assets from npm and exit"
    )
    parser.add_argument(
        "--skip-assets",
        action="store_true",
        help="do not check/install the browser assets (Python client only)",
    )
    parser.add_argument("--force-assets", action="store_true", help="re-install the browser assets")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535, got {args.port}")
    try:
        import_extra("visdom", "visdom")
    except MissingExtra as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if not args.skip_assets:
        try:
            ensure_assets(force=args.force_assets)
        except VisdomAssetError as exc:
            if args.install_assets_only:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            # the Python client (training/tracking --visdom) works without the assets; only the page needs them
            print(f"warning: {exc}\nwarning: serving anyway; the browser page stays blank", file=sys.stderr)
    if args.install_assets_only:
        return 0
    # SIGTERM (e.g. from a process manager) unwinds like Ctrl-C, so the server child is stopped too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    warning = _tornado_check()
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"starting visdom on http://{LOOPBACK}:{args.port} ...", flush=True)
    try:
        server = start_server(args.port, env_path=args.env_path)
    except VisdomServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted before the server answered; stopped it", file=sys.stderr)
        return 130
    with server:
        print(f"visdom server running at {server.url}  (environments in {server.env_path}; Ctrl-C stops it)")
        print(f"server log: {server.log_path}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            code = _wait_interruptibly(server.process)
            print(
                f"error: visdom server exited with code {code}; log tail:\n{server.log_tail()}",
                file=sys.stderr,
            )
            return 1
    print("visdom server stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
