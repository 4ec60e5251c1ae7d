"""What tables and reports know of a system comes from its declaration (issue 38, item B): its
row order (`table_order`), its family (`family = "debate"`: the report's debate dynamics), its
debaters, and whether it is the system a compute-matched run is matched to by default
(`matched_by_default`, mad's). A system registered here shows up in each without a line of
report/ or analysis/ changed (those used to hold SYSTEM_ORDER, DEBATE_SYSTEMS and "mad")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from mars_eval.analysis.tables import MasCell, paper_table, system_order
from mars_eval.mas import System, default_match_system, register
from mars_eval.mas.mad import MADDebate
from mars_eval.report import data as report_data
from mars_eval.run.rundirs import RunDir
from mars_eval.tasks import make_task


def _panel(**declared) -> type[System]:
    @register
    @dataclass
    class Panel(System):
        name = "panel"

    for key, value in declared.items():
        setattr(Panel, key, value)
    return Panel


def _cell(system: str) -> MasCell:
    run = RunDir(Path(f"/nowhere/{system}"), "mas", {"task": "arith", "system": system})
    return MasCell("m", system, "arith", 0.5, 0.4, 0.6, 10, 1, 0, run)


@pytest.mark.usefixtures("forget_file_systems")
def test_a_registered_systems_order_is_its_declaration() -> None:
    assert system_order(["vote", "dylan", "mad", "single"]) == ["single", "mad", "vote", "dylan"]
    _panel(table_order=1.5)  # between mad (1) and autogen (2)
    order = system_order(["autogen", "panel", "dylan", "mad", "single"])
    assert order == ["single", "mad", "panel", "autogen", "dylan"]
    _, rows = paper_table([_cell(s) for s in ("dylan", "panel", "single", "mad")], ["m"])
    assert [r[0] for r in rows] == ["single", "mad", "panel", "dylan"]


@pytest.mark.usefixtures("forget_file_systems")
def test_a_registered_debate_is_in_the_debate_dynamics() -> None:
    assert report_data.is_debate("mad") and report_data.is_debate("debate")
    assert not report_data.is_debate("vote") and not report_data.is_debate("panel")
    _panel(family="debate", debaters=("left", "right"))
    assert report_data.is_debate("panel")
    transcript = [
        {"agent": "left", "call": 0, "content": "\\boxed{3}"},
        {"agent": "right", "call": 0, "content": "\\boxed{4}"},
        {"agent": "judge", "call": 1, "content": "\\boxed{9}"},
        {"agent": "left", "call": 1, "content": "\\boxed{4}"},
        {"agent": "right", "call": 1, "content": "\\boxed{4}"},
    ]
    answers = report_data.debater_answers({"transcript": transcript}, "panel", make_task("arith"))
    assert answers == [["3", "4"], ["4", "4"]]


@pytest.mark.usefixtures("forget_file_systems")
def test_the_default_matched_system_is_declared(monkeypatch) -> None:
    from mars_eval.run.config import EvalConfig
    from mars_eval.run.options import BY_NAME, checked

    assert default_match_system() == "mad" and EvalConfig(task="arith").match_system == "mad"
    assert BY_NAME["match_system"].shown_in("mas") == "mad"
    monkeypatch.setattr(MADDebate, "matched_by_default", False)
    _panel(matched_by_default=True)
    assert default_match_system() == "panel"
    assert EvalConfig(task="arith").match_system == "panel"
    assert checked({}, "mas")["match_system"] == "panel"
    assert BY_NAME["match_system"].shown_in("mas") == "panel"
    assert EvalConfig(task="arith", match_system="single").match_system == "single"


@pytest.mark.usefixtures("forget_file_systems")
def test_the_default_system_is_declared(monkeypatch) -> None:
    from mars_eval.mas import default_system
    from mars_eval.mas.single import SingleAgent
    from mars_eval.run.config import EvalConfig

    assert default_system() == "single" and EvalConfig(task="arith").system == "single"
    monkeypatch.setattr(SingleAgent, "run_by_default", False)
    _panel(run_by_default=True)
    assert default_system() == "panel" and EvalConfig(task="arith").system == "panel"


@pytest.mark.usefixtures("forget_file_systems")
def test_a_registered_systems_own_counts_are_in_the_data_quality() -> None:
    _panel(counts=("left_gave_up", "right_gave_up"))
    assert report_data.system_counts("panel") == ("left_gave_up", "right_gave_up")
    outcomes = {"left_gave_up": 2, "right_gave_up": 0}
    quality = report_data.Quality(_cell("panel"), 4, 0, {}, outcomes, "", report_data.system_counts("panel"))
    assert quality.own_counts == "left gave up 2 / right gave up 0"
    assert report_data.Quality(_cell("single"), 4, 0, {}, {}, "", ()).own_counts == "–"


def test_no_system_is_named_in_the_packages_below_the_tables() -> None:
    """run/, analysis/, report/ and cli/ read systems from their declarations: no built-in
    system's name is written there as a literal (a default, an order, a family, a column)."""
    import re

    from mars_eval.mas import system_names

    root = Path(__file__).resolve().parents[2] / "mars_eval"
    names = "|".join(re.escape(n) for n in system_names())
    literal = re.compile(rf"""(["'])({names})\1""")
    found = [
        f"{path.relative_to(root)}:{i}: {line.strip()}"
        for folder in ("run", "analysis", "report", "cli")
        for path in sorted((root / folder).rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert not found, "\n".join(found)
