"""Check that the offline visdom page renders: install the browser assets, start a loopback server, post an
image, a line plot and a text pane, take a headless chromium screenshot and check the PNG is not blank.

    python scripts/visdom_screenshot.py --out /tmp/visdom.png [--install-chromium] [--port P]

Exit code 0 when the page shows the posted panes (pixel checks below), 1 otherwise. Needs chromium
(``apt-get install -y chromium``; ``--install-chromium`` runs that when it is missing) and, on the first run,
npm with the registry reachable (for the assets).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ltr.admin.visdom_server import ensure_assets, free_port, start_server  # noqa: E402

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
WINDOW = (1280, 900)


def find_chromium(install: bool) -> str:
    """Path of a chromium executable; with ``install``, apt-get installs Debian's ``chromium`` if none."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    if not install:
        raise SystemExit("chromium not found; run 'apt-get install -y chromium' or pass --install-chromium")
    print("installing chromium with apt-get (about 30 s)", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "chromium"],
        check=True,
        env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    path = shutil.which("chromium")
    if path is None:
        raise SystemExit("apt-get installed chromium but it is not on PATH")
    return path


def post_demo_panes(server_url: str, port: int) -> None:
    """Post the panes the pixel checks look for into env 'main' (the page's default environment)."""
    import visdom

    viz = visdom.Visdom(
        server=server_url, port=port, env="main", raise_exceptions=True, use_incoming_socket=False
    )
    frame = np.zeros((3, 120, 160), dtype=np.float32)  # CHW in [0, 1]; pure red
    frame[0] = 1.0
    viz.image(frame, win="frame", opts={"title": "frame (pure red)", "width": 320, "height": 260})
    steps = np.arange(50)
    loss = 2.0 * np.exp(-steps / 15.0) + 0.1
    viz.line(Y=loss[:25], X=steps[:25], win="loss", opts={"title": "training loss", "xlabel": "iteration"})
    viz.line(Y=loss[25:], X=steps[25:], win="loss", update="append")
    viz.text("offline visdom on 127.0.0.1: image, line (append) and text panes", win="info")


def screenshot(chromium: str, url: str, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="visdom-chromium-") as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--screenshot={out}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--virtual-time-budget=5000",
            url,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    if proc.returncode != 0 or not out.is_file():
        raise SystemExit(f"chromium failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def check_png(path: Path) -> list[str]:
    """Problems found in the screenshot (empty list = looks rendered)."""
    import cv2

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        return [f"{path} is not a readable PNG"]
    problems = []
    gray = bgr.mean(axis=2)
    if gray.std() < 10.0:
        problems.append(f"page looks blank: grey-level std {gray.std():.1f} < 10")
    red = int(((bgr[:, :, 2] > 200) & (bgr[:, :, 1] < 60) & (bgr[:, :, 0] < 60)).sum())
    if red < 500:
        problems.append(f"the red image pane is not visible ({red} red pixels < 500)")
    # plotly's default first trace colour is #1f77b4 (BGR 180,119,31); visdom's page background
    # (BGR 152,89,59) is 30 away, so the tolerance stays below that. The curve spans ~250 px of its pane.
    on_trace = np.abs(bgr.astype(int) - [180, 119, 31]).max(axis=2) < 20
    trace = int(on_trace.sum())
    xs = np.nonzero(on_trace)[1]
    span = int(xs.max() - xs.min()) if trace else 0
    if trace < 150 or span < 150:
        problems.append(f"the loss curve is not visible ({trace} trace-coloured pixels spanning {span} px)")
    size = f"{bgr.shape[1]}x{bgr.shape[0]}"
    stats = f"grey std {gray.std():.1f}, red pixels {red}, trace pixels {trace} over {span} px"
    print(f"screenshot {path}: {size}, {stats}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where to write the PNG")
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: a free one)")
    parser.add_argument("--install-chromium", action="store_true", help="apt-get install chromium if missing")
    args = parser.parse_args(argv)

    ensure_assets()
    chromium = find_chromium(args.install_chromium)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    port = args.port or free_port()
    with tempfile.TemporaryDirectory(prefix="visdom-env-") as env_path:
        with start_server(port, env_path=env_path) as server:
            post_demo_panes(server.server, server.port)
            screenshot(chromium, server.url + "/", args.out)
    problems = check_png(args.out)
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
