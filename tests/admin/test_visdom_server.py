"""Tests of the offline visdom server (ltr/admin/visdom_server.py).

The default run starts one real server on a free loopback port (about 4 s) and talks to it with the real
``visdom.Visdom`` client; the browser assets are not needed for that. The asset installer is tested offline
against a fake npm tarball. The slow test installs the real assets from npm and screenshots the page with
headless chromium (scripts/visdom_screenshot.py).
"""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from ltr.admin import visdom_server as vs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    env_path = tmp_path_factory.mktemp("visdom_env")
    with vs.start_server(vs.free_port(), env_path=env_path) as handle:
        yield handle
    assert handle.process.returncode is not None, "server still running after the context manager exited"


@pytest.fixture(scope="module")
def client(server: vs.VisdomServer):
    visdom = pytest.importorskip("visdom")
    return visdom.Visdom(
        server=server.server,
        port=server.port,
        env="ltr_test",
        raise_exceptions=True,
        use_incoming_socket=False,
    )


def _decode_png_data_url(src: str) -> np.ndarray:
    import cv2

    prefix = "data:image/png;base64,"
    assert src.startswith(prefix), src[:40]
    buf = np.frombuffer(base64.b64decode(src[len(prefix) :]), dtype=np.uint8)
    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    assert bgr is not None
    return bgr[:, :, ::-1]


def test_image_line_text_round_trip(server: vs.VisdomServer, client) -> None:
    img = np.zeros((3, 6, 10), dtype=np.float32)  # CHW in [0, 1]: red left half, blue right half
    img[0, :, :5] = 1.0
    img[2, :, 5:] = 1.0
    assert client.image(img, win="frame", opts={"title": "frame 0"}) == "frame"
    assert (
        client.line(Y=np.array([0.9, 0.7]), X=np.array([0, 1]), win="loss", opts={"title": "loss"}) == "loss"
    )
    assert client.line(Y=np.array([0.4]), X=np.array([2]), win="loss", update="append") == "loss"
    assert client.text("epoch 3: <b>done</b>", win="log") == "log"

    assert client.win_exists("frame") and client.win_exists("loss") and client.win_exists("log")
    assert not client.win_exists("never_posted")

    frame = json.loads(client.get_window_data("frame"))
    assert frame["type"] == "image" and frame["title"] == "frame 0"
    rgb = _decode_png_data_url(frame["content"]["src"])
    assert rgb.shape == (6, 10, 3)
    np.testing.assert_array_equal(rgb[:, :5], np.broadcast_to([255, 0, 0], (6, 5, 3)))
    np.testing.assert_array_equal(rgb[:, 5:], np.broadcast_to([0, 0, 255], (6, 5, 3)))

    loss = json.loads(client.get_window_data("loss"))
    assert loss["type"] == "plot"
    (trace,) = loss["content"]["data"]
    assert trace["x"] == [0.0, 1.0, 2.0]
    np.testing.assert_allclose(trace["y"], [0.9, 0.7, 0.4])

    log = json.loads(client.get_window_data("log"))
    assert log["type"] == "text" and log["content"] == "epoch 3: <b>done</b>"


def test_page_is_served(server: vs.VisdomServer) -> None:
    # tornado >= 6.6 answers 403 here (visdom's page asks for ../user/style.css); setup.py pins tornado<6.6
    with urllib.request.urlopen(server.url + "/", timeout=10) as resp:
        assert resp.status == 200
        assert "<title>visdom</title>" in resp.read().decode()


def test_environment_saved_under_env_path(server: vs.VisdomServer, client) -> None:
    client.text("persist me", win="saved", env="ltr_saved")
    assert json.loads(client.save(["ltr_saved"])) == ["ltr_saved"]
    saved = json.loads((server.env_path / "ltr_saved.json").read_text())
    assert saved["jsons"]["saved"]["content"] == "persist me"


def _listening_addresses(port: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of sockets in LISTEN state on ``port``."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            addr, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A = TCP_LISTEN
                out.append(addr)
    return out


def _non_loopback_ipv4() -> str | None:
    """An IPv4 address of this machine that is not 127.x (none on an isolated box)."""
    candidates = set()
    try:
        candidates.update(
            info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
        )
    except OSError:
        pass
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))  # TEST-NET-1; UDP connect sends nothing, it only picks a route
            candidates.add(sock.getsockname()[0])
        except OSError:
            pass
    candidates = {c for c in candidates if not c.startswith("127.") and c != "0.0.0.0"}
    return min(candidates) if candidates else None


def test_bound_to_loopback_only(server: vs.VisdomServer) -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("needs Linux /proc/net/tcp")
    # 0100007F is 127.0.0.1 in /proc's little-endian hex; 0.0.0.0 would be 00000000
    assert _listening_addresses(server.port) == ["0100007F"]
    other = _non_loopback_ipv4()
    if other is not None:
        with pytest.raises(OSError):
            socket.create_connection((other, server.port), timeout=2).close()


def test_port_in_use_is_a_clear_error(server: vs.VisdomServer, tmp_path: Path) -> None:
    with pytest.raises(vs.VisdomServerError, match=f"port {server.port}.*already in use"):
        vs.start_server(server.port, env_path=tmp_path)


def test_early_exit_reports_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a server command that fails immediately: the error carries its exit code and output
    monkeypatch.setattr(
        vs,
        "server_command",
        lambda port, env: [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
    )
    with pytest.raises(vs.VisdomServerError, match=r"exited with code 3(.|\n)*boom"):
        vs.start_server(vs.free_port(), env_path=tmp_path, timeout=20)


def test_server_command_flags() -> None:
    cmd = vs.server_command(8097, "/x/envs")
    assert cmd[0] == sys.executable
    assert "download" not in " ".join(cmd)
    assert cmd[cmd.index("-port") + 1] == "8097"
    assert cmd[cmd.index("-env_path") + 1] == "/x/envs"
    assert "-bind_local" in cmd


def test_cli_serves_in_foreground_until_interrupted(tmp_path: Path) -> None:
    port = vs.free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "ltr.admin.visdom_server", "--port", str(port), "--env-path", str(tmp_path)]
    # a terminal's Ctrl-C: SIGINT at its default disposition in the CLI, also when this test run inherited it
    # ignored (a shell's background job: `make test &` ignores SIGINT, and the CLI would never see it)
    proc = subprocess.Popen(
        [*cmd, "--skip-assets"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout.readline().startswith(f"starting visdom on http://127.0.0.1:{port} ")
        first = proc.stdout.readline()  # printed once the server answers
        assert first.startswith(f"visdom server running at http://127.0.0.1:{port} "), (
            first + proc.stderr.read()
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "visdom server stopped" in out
    deadline = time.monotonic() + 10
    while _listening_addresses(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _listening_addresses(port) == [], "server child still listening after the CLI exited"


def test_cli_rejects_bad_port() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ltr.admin.visdom_server", "--port", "70000", "--skip-assets"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "--port must be in 1..65535, got 70000" in proc.stderr


# ---------------------------------------------------------------- asset installer, offline


def _fake_npm(tmp_path: Path, assets: tuple[vs.Asset, ...]) -> Path:
    """A stand-in ``npm``: ``npm pack --silent --pack-destination D spec...`` copies tarballs holding every
    file the assets name (content = the source path; a subtree gets two files)."""
    store = tmp_path / "store"
    store.mkdir()
    by_spec: dict[str, list[vs.Asset]] = {}
    for asset in assets:
        by_spec.setdefault(asset.spec, []).append(asset)
    for spec, group in by_spec.items():
        name, version = spec.rsplit("@", 1)
        with tarfile.open(store / f"{name}-{version}.tgz", "w:gz") as tar:
            for asset in group:
                members = (
                    [asset.source + "a/b.js", asset.source + "c.js"]
                    if asset.source.endswith("/")
                    else [asset.source]
                )
                for member in members:
                    data = member.encode()
                    info = tarfile.TarInfo("package/" + member)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    log = tmp_path / "npm_calls.txt"
    script = tmp_path / "npm"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{log}"\n'
        'dest="$4"; shift 4\n'
        'for spec in "$@"; do\n'
        '  name="${spec%@*}"; ver="${spec##*@}"\n'
        f'  cp "{store}/$name-$ver.tgz" "$dest/" || exit 1\n'
        "done\n"
    )
    script.chmod(0o755)
    return script


SMALL = (
    vs.Asset("jquery", "3.1.1", "dist/jquery.min.js", "js/jquery.min.js"),
    vs.Asset("classnames", "2.2.5", "index.js", "fonts/classnames"),
    vs.Asset("mathjax", "2.7.5", "jax/", "js/mathjax/2.7.5/jax/"),
)


def test_ensure_assets_installs_then_is_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vs, "ASSETS", SMALL)
    npm = _fake_npm(tmp_path, SMALL)
    static = tmp_path / "static"
    assert vs.missing_assets(static) == [a.target for a in SMALL] + [vs.VERSION_BUILT]

    written = vs.ensure_assets(static, npm=str(npm), log=lambda s: None)
    assert sorted(written) == sorted(
        ["js/jquery.min.js", "fonts/classnames", "js/mathjax/2.7.5/jax/a/b.js", "js/mathjax/2.7.5/jax/c.js"]
        + [vs.VERSION_BUILT]
    )
    assert (static / "js/jquery.min.js").read_text() == "dist/jquery.min.js"
    assert (static / "fonts/classnames").read_text() == "index.js"
    assert (static / "js/mathjax/2.7.5/jax/a/b.js").read_text() == "jax/a/b.js"
    import visdom

    assert (static / vs.VERSION_BUILT).read_text() == visdom.__version__
    assert vs.missing_assets(static) == []
    calls = (tmp_path / "npm_calls.txt").read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("pack --silent --pack-destination ")

    # second call: nothing missing, npm not run again (a broken npm path would fail if it were)
    assert vs.ensure_assets(static, npm=str(tmp_path / "no-such-npm"), log=lambda s: None) == []

    # one file lost: only its package is fetched again
    (static / "fonts/classnames").unlink()
    assert vs.missing_assets(static) == ["fonts/classnames"]
    assert vs.ensure_assets(static, npm=str(npm), log=lambda s: None) == [
        "fonts/classnames",
        vs.VERSION_BUILT,
    ]
    assert (tmp_path / "npm_calls.txt").read_text().splitlines()[-1].endswith(" classnames@2.2.5")


def test_stale_version_marker_counts_as_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vs, "ASSETS", SMALL[:1])
    static = tmp_path / "static"
    (static / "js").mkdir(parents=True)
    (static / "js/jquery.min.js").write_text("x")
    (static / vs.VERSION_BUILT).write_text("0.0.1")
    assert vs.missing_assets(static) == [vs.VERSION_BUILT]


def test_missing_npm_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vs, "ASSETS", SMALL[:1])
    with pytest.raises(vs.VisdomAssetError, match="npm executable 'no-such-npm-xyz' not found"):
        vs.ensure_assets(tmp_path / "static", npm="no-such-npm-xyz", log=lambda s: None)


def test_failing_npm_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vs, "ASSETS", SMALL[:1])
    npm = tmp_path / "npm"
    npm.write_text("#!/bin/sh\necho 'npm error network ENOTFOUND registry.npmjs.org' >&2\nexit 1\n")
    npm.chmod(0o755)
    with pytest.raises(
        vs.VisdomAssetError, match=r"exit code 1 \(is the npm registry reachable\?\)(.|\n)*ENOTFOUND"
    ):
        vs.ensure_assets(tmp_path / "static", npm=str(npm), log=lambda s: None)
    assert not (tmp_path / "static" / vs.VERSION_BUILT).exists()


def test_asset_table_matches_visdom_page() -> None:
    """Every static file visdom's index.html references (except its own files) is in the asset table."""
    import re

    index = (vs.static_dir() / "index.html").read_text()
    referenced = set(re.findall(r"static_url\(['\"]([^'\"]+)['\"]\)", index))
    shipped = {"js/main.js", "css/style.css", "css/network.css", "../user/style.css"}
    targets = {a.target for a in vs.ASSETS}
    assert referenced - shipped, "no asset references parsed from index.html"
    assert referenced - shipped <= targets, sorted(referenced - shipped - targets)


# ---------------------------------------------------------------- real assets + browser (slow)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    out = tmp_path / "visdom.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "visdom_screenshot.py"),
            "--out",
            str(out),
            "--install-chromium",
        ],
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    import cv2

    bgr = cv2.imread(str(out), cv2.IMREAD_COLOR)
    assert bgr is not None and bgr.shape[0] >= 600 and bgr.shape[1] >= 1000
    gray = bgr.mean(axis=2)
    assert gray.std() > 10.0  # not a blank page
    # the script posts a pure-red image pane; its pixels must show up on the page
    red = (bgr[:, :, 2] > 200) & (bgr[:, :, 1] < 60) & (bgr[:, :, 0] < 60)
    assert red.sum() > 500
    # ... and a loss curve in plotly's first trace colour #1f77b4 (BGR 180,119,31) spanning the plot
    on_trace = np.abs(bgr.astype(int) - [180, 119, 31]).max(axis=2) < 20
    xs = np.nonzero(on_trace)[1]
    assert on_trace.sum() > 150 and xs.max() - xs.min() > 150
