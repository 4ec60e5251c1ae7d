"""The task registry (issue 26, item 3): each task declared once, found only through it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mars_eval.models.base import ConfigError
from mars_eval.tasks import TASK_ALIASES, TASK_NAMES, make_task, registry


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("gpqa-dimond", "gpqa-diamond"), ("math5000", "math500"), ("arithm", "arith"), ("custon", "custom")],
)
def test_a_typo_names_the_nearest_task(typo: str, meant: str) -> None:
    with pytest.raises(ConfigError) as err:
        make_task(typo)
    msg = str(err.value)
    assert f"did you mean {meant!r}?" in msg and "\n" not in msg
    assert all(name in msg for name in TASK_NAMES)


def test_a_name_far_from_any_task_gets_no_guess() -> None:
    with pytest.raises(ConfigError) as err:
        make_task("mmlu")
    assert "did you mean" not in str(err.value)


def test_names_aliases_and_help_come_from_the_declarations() -> None:
    entries = registry.entries()
    assert TASK_NAMES == tuple(e.name for e in entries)
    assert TASK_NAMES == (
        "aime24",
        "aime25",
        "math500",
        "gpqa-diamond",
        "gpqa-diamond-maslab",
        "arith",
        "custom",
    )
    assert TASK_ALIASES == {a: e.name for e in entries for a in e.aliases}
    for alias, name in TASK_ALIASES.items():
        assert make_task(alias).name == name == registry.canonical(alias.upper())
    help_text = registry.task_help()
    assert "aime24 (aime, aime2024)" in help_text and "gpqa-diamond (gpqa)" in help_text
    assert {e.name: e.answer_type for e in entries}["gpqa-diamond"] == "choice"
    assert all(e.help and "\n" not in e.help and e.source for e in entries)
    from mars_eval.cli.options import TASKS_HELP

    assert TASKS_HELP.startswith(help_text) and "FILE.yaml" in TASKS_HELP


def test_a_declared_task_is_found_and_a_name_taken_twice_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(registry, "_TASKS", dict(registry._TASKS))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))

    @registry.register_task(
        "tiny", aliases=("tiny-math",), source="here", answer_type="math", help="a test task"
    )
    def tiny(prompts):
        task = make_task("arith", prompts=prompts.pack)
        task.name = "tiny"
        return task

    assert make_task("tiny-math").name == "tiny" and "tiny" in registry.task_names()
    with pytest.raises(ValueError, match="declared twice"):
        registry.register_task("arith", source="x", answer_type="math", help="again")(tiny)
    with pytest.raises(ValueError, match="answer_type"):
        registry.register_task("other", source="x", answer_type="essay", help="no such scoring")(tiny)
    with pytest.raises(ConfigError, match="--answer-field is used by --task custom only"):
        make_task("tiny", answer_field="gold")


def test_importing_the_package_imports_no_task_module() -> None:
    code = (
        "import sys, mars_eval.tasks\n"
        "names = [m for m in sys.modules if m.startswith('mars_eval.tasks.')]\n"
        "print(sorted(set(names) - {'mars_eval.tasks.base'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"  # the math scorer's worker imports the package: it stays cheap
