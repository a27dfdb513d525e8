"""Relative links in README.md and docs/*.md lead somewhere: the file exists and, for ``#anchor`` links, a
heading of that file has that anchor (GitHub's rule: lower case, punctuation dropped, spaces to hyphens, a
repeated heading gets ``-1``, ``-2``, ...)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file."""
    seen: dict[str, int] = {}
    result = set()
    for _, line in _prose_lines(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1)).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def test_anchor_rule_on_known_headings(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Speed\n## The 1D study\n### What works, measured\n## GPU\n## GPU\n```\n# not a heading\n```\n"
    )
    assert anchors(page) == {"speed", "the-1d-study", "what-works-measured", "gpu", "gpu-1"}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(document: Path) -> None:
    broken = []
    for number, line in _prose_lines(document):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            file = (document.parent / path_part).resolve() if path_part else document
            where = f"{document.relative_to(ROOT)}:{number}: {target}"
            if not file.exists():
                broken.append(f"{where} (no file {path_part})")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{where} (no heading with anchor #{anchor} in {file.relative_to(ROOT)})")
    assert not broken, "broken links:\n" + "\n".join(broken)
