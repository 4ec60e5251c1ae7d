"""The README is the newcomer's path and docs/ holds the rest (issue 31): every docs page is
linked from the README and says first what it is for, every relative link resolves, the README
stays short, names every system, and its test command is the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_docs_page_is_linked_from_the_readme_and_says_what_it_is_for() -> None:
    assert len(PAGES) >= 10, PAGES
    for page in PAGES:
        assert f"](docs/{page.name})" in README, f"{page.name} is not linked from README.md"
        text = page.read_text(encoding="utf-8")
        first = text.split("\n\n")[1] if text.startswith("# ") else text
        assert first.startswith("What this page is for:"), (page.name, first[:80])


def test_relative_links_resolve() -> None:
    for doc in [ROOT / "README.md", *PAGES]:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (doc.parent / target).exists(), f"{doc.name}: {target}"


def test_the_readme_is_short_and_names_every_system() -> None:
    from mars_eval.mas.registry import system_names

    assert len(README.splitlines()) <= 160
    opening = README.split("\n## ", 1)[0]
    for name in system_names():
        assert f"`{name}`" in opening, name


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    command = "bash scripts/setup.sh && .venv/bin/python -m pytest -q"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in ci, "the CI script no longer runs the README's test command"
    tests = README.split("## Tests", 1)[1]
    assert re.search(r"```bash\n([^\n]*)\n```", tests).group(1) == command
