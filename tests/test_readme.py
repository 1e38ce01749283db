"""README.md is what a user reads first: at most README_LINES lines, and no dated chronicle (a date
appears only inside a link's target, the report a figure comes from; history is CHANGELOG.md's)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_LINES = 200
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
LINK_TARGET = re.compile(r"\]\([^)\s]*\)")


def dated_lines(text: str) -> list[str]:
    """Lines that name a date outside a markdown link's target."""
    return [f"{i}: {line}" for i, line in enumerate(text.splitlines(), 1) if DATE.search(LINK_TARGET.sub("]()", line))]


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines (at most {README_LINES}): move detail to docs/"


def test_the_readme_has_no_dates_outside_links():
    found = dated_lines((ROOT / "README.md").read_text())
    assert not found, "dates in README.md (history goes to CHANGELOG.md, a report into a link):\n" + "\n".join(found)


def test_a_date_is_found_only_outside_a_link():
    assert dated_lines("a [report](lab/reports/2026-12-04-walk-order.md) and more") == []
    assert dated_lines("measured on 2026-12-04 ([report](lab/reports/x.md))") != []
    assert dated_lines("`lab/reports/2026-12-04-walk-order.md`") != []


def test_every_relative_link_of_the_readme_exists():
    text = (ROOT / "README.md").read_text()
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, missing
