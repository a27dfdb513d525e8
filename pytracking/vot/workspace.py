"""Set up a VOT toolkit workspace to evaluate one of this toolkit's trackers in one step.

``python -m pytracking.vot.workspace WORKSPACE dimp nce_plus [key=value ...] --net CKPT [--stack STACK]
[--identifier ID] [--device D] [--polygon RULE] [--timeout S]`` (console script ``pytracking-vot-setup``)
adds (or replaces) the tracker's section in ``WORKSPACE/trackers.ini``:

- ``protocol = traxpython``, ``command`` calling :func:`pytracking.vot.server.main` with these arguments,
- ``python`` = this interpreter (the toolkit may live in another environment: it starts the tracker with
  this one), ``paths`` = the folder holding the ``pytracking`` package (the toolkit puts it on PYTHONPATH),
- ``timeout``, only when given (the toolkit's default is 30 s per reply).

Without a ``config.yaml`` there, it also creates the workspace the way ``vot initialize --nodownload`` does
(``config.yaml`` naming ``--stack`` and ``trackers.ini`` as the registry, ``sequences/``, ``results/``), so
that ``vot evaluate --workspace WORKSPACE ID`` works next; the toolkit downloads the stack's sequences on
its first run unless ``sequences/list.txt`` exists. Everything is checked first (tracker, parameter set,
overrides, checkpoint), as :mod:`pytracking.vot.server` would at start; files are written atomically.
"""

from __future__ import annotations

import argparse
import configparser
import io
import json
import re
import sys
from pathlib import Path

import pytracking
from ltr.admin.io import atomic_write_text
from pytracking.vot.regions import POLYGON_RULES
from pytracking.vot.server import ServerOptions, check_options

#: what the VOT toolkit accepts as a tracker identifier
IDENTIFIER = re.compile(r"^[a-zA-Z0-9_\-]+$")


def default_identifier(tracker: str, param: str) -> str:
    return f"ebmtrack_{tracker}_{param}"


def server_arguments(options: ServerOptions) -> list[str]:
    """The argument list of :func:`pytracking.vot.server.main` for ``options`` (checkpoint path absolute)."""
    args = [options.tracker, options.param, *options.overrides]
    if options.net is not None:
        args += ["--net", str(Path(options.net).resolve())]
    if options.device != "auto":
        args += ["--device", options.device]
    if options.polygon != "preserve_area":
        args += ["--polygon", options.polygon]
    return args


def tracker_entry(options: ServerOptions, timeout: int | None = None) -> dict[str, str]:
    """The ``trackers.ini`` keys of the tracker (values as the toolkit reads them)."""
    code = (
        "from pytracking.vot.server import main; "
        f"raise SystemExit(main({json.dumps(server_arguments(options))}))"
    )
    entry = {
        "label": f"{options.tracker}/{options.param}"
        + (" " + " ".join(options.overrides) if options.overrides else ""),
        "protocol": "traxpython",
        "command": code,
        "python": sys.executable,
        "paths": str(Path(pytracking.__file__).resolve().parent.parent),
    }
    if timeout is not None:
        entry["timeout"] = str(timeout)
    return entry


def write_tracker_entry(ini_path: Path, identifier: str, entry: dict[str, str]) -> None:
    """Add or replace the section ``identifier`` of ``ini_path``, keeping the other trackers' sections."""
    if not IDENTIFIER.match(identifier):
        raise ValueError(f"--identifier {identifier!r}: the VOT toolkit accepts letters, digits, '_' and '-'")
    parser = configparser.ConfigParser(interpolation=None)
    if ini_path.is_file():
        try:
            parser.read(ini_path, encoding="utf-8")
        except configparser.Error as err:
            raise ValueError(
                f"{ini_path}: not a readable trackers.ini ({' '.join(str(err).split())})"
            ) from err
    if parser.has_section(identifier):
        parser.remove_section(identifier)
    parser.add_section(identifier)
    for key, value in entry.items():  # the toolkit reads with '%' interpolation: a literal '%' is '%%'
        parser.set(identifier, key, value.replace("%", "%%"))
    text = io.StringIO()
    parser.write(text)
    atomic_write_text(ini_path, text.getvalue())


def create_workspace(directory: Path, stack: str) -> None:
    """``config.yaml`` (stack, registry), ``sequences/``, ``results/``: the toolkit's own initial layout."""
    config = {"registry": ["./trackers.ini"], "stack": stack}
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / "config.yaml", json.dumps(config) + "\n")  # JSON is YAML
    (directory / "sequences").mkdir(exist_ok=True)
    (directory / "results").mkdir(exist_ok=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytracking.vot.workspace", description=__doc__.split("\n")[0])
    p.add_argument("workspace", help="VOT workspace folder (created when it has no config.yaml)")
    p.add_argument("tracker", help="tracker name, e.g. dimp")
    p.add_argument("param", help="parameter set, e.g. nce_plus")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="changes of parameter-set fields")
    p.add_argument(
        "--net", default=None, help="checkpoint path (default: latest of the param's train setting)"
    )
    p.add_argument("--device", default="auto", help="auto (GPU if available), cpu, cuda or cuda:K")
    p.add_argument("--polygon", default="preserve_area", choices=POLYGON_RULES)
    p.add_argument("--identifier", default=None, help="tracker identifier (default: ebmtrack_TRACKER_PARAM)")
    p.add_argument(
        "--stack", default=None, help="experiment stack of a new workspace, e.g. vot2018/shortterm"
    )
    p.add_argument("--timeout", type=int, default=None, help="seconds the toolkit waits for each reply")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_intermixed_args(argv)
    options = ServerOptions(
        args.tracker, args.param, tuple(args.overrides), args.net, args.device, args.polygon
    )
    workspace = Path(args.workspace)
    identifier = args.identifier or default_identifier(args.tracker, args.param)
    try:
        check_options(options)
        if args.timeout is not None and args.timeout < 1:
            raise ValueError(f"--timeout must be >= 1 second, got {args.timeout}")
        new = not (workspace / "config.yaml").is_file()
        if new and args.stack is None:
            raise ValueError(
                f"{workspace} has no config.yaml: pass --stack (e.g. vot2018/shortterm) to create it"
            )
        if new:
            create_workspace(workspace, args.stack)
        write_tracker_entry(workspace / "trackers.ini", identifier, tracker_entry(options, args.timeout))
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{workspace / 'trackers.ini'}: tracker {identifier}")
    print(f"next: vot evaluate --workspace {workspace} --persist {identifier}")
    print(f"      vot analysis --workspace {workspace} {identifier}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
