"""Install (or check) the browser assets of the offline visdom server.

    python scripts/visdom_assets.py            # install what is missing from the npm registry (idempotent)
    python scripts/visdom_assets.py --check    # list missing files, no network; exit 1 when any is missing
    python scripts/visdom_assets.py --force    # re-install everything
    python scripts/visdom_assets.py --static DIR   # another visdom/static folder (default: the installed one)

The file list and the npm package of each file are in ltr/admin/visdom_server.py (ASSETS).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ltr.admin.visdom_server import VisdomAssetError, ensure_assets, missing_assets, static_dir  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install visdom's browser assets from npm (offline server).")
    parser.add_argument("--static", type=Path, default=None, help="visdom static folder (default: installed)")
    parser.add_argument("--check", action="store_true", help="only report missing files (no network)")
    parser.add_argument("--force", action="store_true", help="re-install every asset")
    parser.add_argument("--npm", default="npm", help="npm executable (default: npm on PATH)")
    args = parser.parse_args(argv)
    static = args.static if args.static is not None else static_dir()

    if args.check:
        missing = missing_assets(static)
        for rel in missing:
            print(f"missing: {static / rel}")
        print(f"{len(missing)} missing in {static}")
        return 1 if missing else 0
    try:
        ensure_assets(static, npm=args.npm, force=args.force)
    except VisdomAssetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
