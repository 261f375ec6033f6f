"""The documentation stays inside the repository: every link resolves, nothing points at material a user
does not have, and the views' reference page is what the catalog's own comments say today.
"""

from __future__ import annotations

import io
import re
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from turnlens.queries import catalog

from turnlens.cli import main

ROOT = Path(__file__).resolve().parent.parent

# Pointers to things outside the repository: design notes, articles, trackers, the machine and the people
# a text was written with. Each pattern is written so that it does not match its own source line.
FORBIDDEN = {
    r"\bDESIGN\.md\b": "a design document that is not in the repository",
    r"\bSTYLE\.md\b": "a style guide that is not in the repository",
    r"\.\./shared\b": "a folder outside the repository",
    r"(?<![\w.-])/wor[k]/": "a path on the machine the text was written on",
    r"\bseed[- ]articles?\b": "articles that are not in the repository",
    r"\bseed[s]/": "articles that are not in the repository",
    r"\bseed[- ]\d{3}\b": "an article that is not in the repository",
    r"\breadme-part[s]\b": "drafts that are not in the repository",
    r"\bthe [i]ssues?\b": "a tracker entry the reader cannot see",
    r"\bissues? #?\d+\b": "a tracker entry the reader cannot see",
    r"\bthis shared [m]achine\b": "the machine a text was written on",
    r"\b(?:this|shared) \d-core machine\b": "the machine a text was written on",
    r"\b(?:an)?other (?:people|engineers?)\b": "the people a text was written with",
    r"\bgithub\.com/[\w.-]+/[\w.-]+/(?:issue|pull)s?/\d": "a tracker entry the reader cannot see",
}
BINARY_SUFFIXES = (".gz", ".parquet", ".png", ".jpg", ".duckdb", ".so")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def repository_files() -> list[Path]:
    """Every file git tracks or would track (not ignored), so a new file is checked before its commit."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def documentation_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_no_file_points_outside_the_repository() -> None:
    patterns = [(re.compile(pattern, re.IGNORECASE), why) for pattern, why in FORBIDDEN.items()]
    found = []
    for path in repository_files():
        if path.name.endswith(BINARY_SUFFIXES):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for pattern, why in patterns:
                match = pattern.search(line)
                if match:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r} ({why})")
    assert not found, "say it in the project's own words instead:\n" + "\n".join(found)


def _without_code(text: str) -> str:
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def anchors(page: Path) -> set[str]:
    """The anchors a Markdown renderer gives the page's headings (lower case, punctuation dropped, dashes)."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", _without_code(page.read_text(encoding="utf-8")), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_of_the_docs_resolves() -> None:
    broken = []
    for page in documentation_pages():
        text = _without_code(page.read_text(encoding="utf-8"))
        for number, line in enumerate(text.splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                    continue  # a URL
                path, _, anchor = target.partition("#")
                resolved = (page.parent / path).resolve() if path else page
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    broken.append(f"{page.relative_to(ROOT)}:{number}: {target}")
                elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                    broken.append(f"{page.relative_to(ROOT)}:{number}: {target} (no such heading)")
    assert not broken, "links to files that are not in the repository:\n" + "\n".join(broken)


def test_the_views_page_is_what_the_catalog_says() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["views", "--markdown"]) == 0
    page = ROOT / catalog.VIEWS_PAGE
    assert page.is_file(), f"{catalog.VIEWS_PAGE} is missing: run `{catalog.VIEWS_PAGE_COMMAND}`"
    assert page.read_text(encoding="utf-8") == out.getvalue(), (
        f"{catalog.VIEWS_PAGE} is out of date with the views' comments: run `{catalog.VIEWS_PAGE_COMMAND}`"
        " and commit the result"
    )


def test_the_views_page_documents_every_view() -> None:
    page = (ROOT / catalog.VIEWS_PAGE).read_text(encoding="utf-8")
    for view in catalog.load_views():
        assert f"\n## {view.name}\n" in page, f"{view.name} has no section in {catalog.VIEWS_PAGE}"


def test_the_alerts_page_lists_every_rule_as_the_rule_files_say() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["alerts", "list", "--markdown"]) == 0
    assert out.getvalue() in (ROOT / "docs" / "alerts.md").read_text(encoding="utf-8"), (
        "docs/alerts.md's rule catalogue differs from the rule files: paste `turnlens alerts list --markdown`"
    )
