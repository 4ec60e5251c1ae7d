"""`system_for`: every system option of a run configuration reaches the system (suite and runner
build systems through it, so a new option is added in one place)."""

from __future__ import annotations

import dataclasses

from mars_eval.mas import SYSTEM_OPTIONS, system_for
from mars_eval.run.runner import EvalConfig


def test_every_system_option_is_a_run_config_field() -> None:
    fields = {f.name for f in dataclasses.fields(EvalConfig)}
    assert set(SYSTEM_OPTIONS) <= fields


def test_system_for_passes_the_run_configs_options() -> None:
    cfg = EvalConfig(
        task="arith",
        rounds=5,
        agents=4,
        votes=7,
        autogen_client="openai",
        autogen_style="solver-reviewer",
        mad_judge="last-round",
    )
    mad = system_for("mad", cfg)
    assert (mad.rounds, mad.judge_sees) == (5, "last-round")
    debate = system_for("debate", cfg)
    assert (debate.agents, debate.rounds) == (4, 5)
    assert system_for("vote", cfg).votes == 7
    autogen = system_for("autogen", cfg)
    assert (autogen.rounds, autogen.style, autogen.client) == (5, "solver-reviewer", "openai")


def test_unset_options_leave_the_systems_defaults() -> None:
    mad = system_for("mad", EvalConfig(task="arith"))
    assert (mad.rounds, mad.judge_sees) == (3, "first-round")


def test_the_runner_builds_its_system_through_system_for(tmp_path, monkeypatch) -> None:
    """run_eval reads the run options through `system_for` (the one list), so an option added to
    SYSTEM_OPTIONS reaches runs too; `vote` without --votes is rebuilt once its votes are known."""
    import asyncio

    import mars_eval.run.runner as runner
    from mars_eval.models.base import SamplingParams
    from tests.test_runner import Oracle

    seen: list[tuple[str, int | None]] = []

    def spy(name, cfg):
        seen.append((name, cfg.votes))
        return system_for(name, cfg)

    import json

    monkeypatch.setattr(runner, "system_for", spy)
    matched = tmp_path / "a-finished-mad-run"
    matched.mkdir()
    (matched / "config.json").write_text(json.dumps({"system": "mad"}))
    (matched / "summary.json").write_text(json.dumps({"llm_calls_per_sample": 4.5, "llm_calls": 9}))
    cfg = EvalConfig(
        task="arith",
        system="vote",
        limit=2,
        output=str(tmp_path),
        params=SamplingParams(max_tokens=8),
        match_run=str(matched),
    )
    summary = asyncio.run(runner.run_eval(cfg, client=Oracle(), progress=False))
    assert seen == [("vote", None), ("vote", 5)]
    assert summary["system"] == "vote" and summary["llm_calls_per_sample"] == 5  # 4.5 half up
