"""Systems are declarations found through the registry: options, validation, flags and identity
all come from the one declaration (issue 26)."""

from __future__ import annotations

import asyncio
import json
import textwrap

import pytest

from mars_eval.mas import make_system, system_class, system_for, system_names
from mars_eval.mas.system import MAX_COUNT, option_specs
from mars_eval.models.base import ConfigError
from mars_eval.run.config import EvalConfig

BUILTIN = ("single", "mad", "autogen", "debate", "vote", "self-consistency", "dylan", "agentverse", "macnet")


def test_every_builtin_system_is_registered_in_order() -> None:
    assert system_names()[: len(BUILTIN)] == BUILTIN


def test_a_typo_gets_a_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown system 'madd'; did you mean 'mad'\?"):
        system_class("madd")


def test_system_for_passes_the_run_configs_options_each_to_its_systems() -> None:
    cfg = EvalConfig(
        task="arith",
        system_options={
            "rounds": 5,
            "agents": 4,
            "votes": 7,
            "autogen_client": "openai",
            "autogen_style": "solver-reviewer",
            "mad_judge": "last-round",
        },
    )
    mad = system_for("mad", cfg)
    assert (mad.rounds, mad.mad_judge) == (5, "last-round")
    debate = system_for("debate", cfg)
    assert (debate.agents, debate.rounds) == (4, 5)
    assert system_for("vote", cfg).votes == 7
    autogen = system_for("autogen", cfg)
    assert (autogen.rounds, autogen.style, autogen.client) == (5, "solver-reviewer", "openai")


def test_unset_options_leave_the_declared_defaults() -> None:
    mad = system_for("mad", EvalConfig(task="arith"))
    defaults = {s.name: s.default for s in option_specs(type(mad).Options)}
    assert (mad.rounds, mad.mad_judge, mad.mad_stop) == (
        defaults["rounds"],
        defaults["mad_judge"],
        defaults["mad_stop"],
    )


@pytest.mark.parametrize(
    ("system", "values", "message"),
    [
        ("mad", {"rounds": 0}, "--rounds must be at least 1"),
        ("mad", {"mad_judge": "everything"}, "unknown --mad-judge 'everything'"),
        ("mad", {"rounds": "two"}, "--rounds must be int"),
        ("macnet", {"agents": MAX_COUNT + 1}, f"--agents must be at most {MAX_COUNT}"),
        ("dylan", {"agents": 2}, "--agents must be at least 3"),
        ("single", {"rounds": 2}, "single has no option 'rounds'"),
    ],
)
def test_bad_option_values_are_one_line_config_errors(system, values, message) -> None:
    with pytest.raises(ConfigError, match=message):
        make_system(system, **values)


def test_text_values_from_dash_s_are_converted_by_the_declared_type() -> None:
    assert make_system("mad", rounds="2").rounds == 2
    assert make_system("macnet", agents=" 6 ", topology="chain").graph is not None


def test_the_runner_rebuilds_a_matched_system_once_its_value_is_known(tmp_path, monkeypatch) -> None:
    """vote without --votes: built, matched to a finished run, built again with the votes."""
    import mars_eval.run.runner as runner
    from mars_eval.models.base import SamplingParams
    from tests.test_runner import Oracle

    seen: list[tuple[str, int | None]] = []

    def spy(name, cfg):
        seen.append((name, cfg.system_options.get("votes")))
        return system_for(name, cfg)

    monkeypatch.setattr(runner, "system_for", spy)
    matched = tmp_path / "a-finished-mad-run"
    matched.mkdir()
    (matched / "config.json").write_text(json.dumps({"system": "mad"}))
    (matched / "summary.json").write_text(json.dumps({"llm_calls_per_sample": 4.5, "llm_calls": 9}))
    from mars_eval.tasks import make_task

    rows = [
        {"key": f"{p.id}#0", "problem_id": p.id, "sample": 0, "gold": p.gold, "calls": calls}
        for p, calls in zip(make_task("arith").load()[:2], (4, 5), strict=True)
    ]
    (matched / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
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


def test_a_system_from_a_file_is_registered_under_its_own_name(tmp_path, forget_file_systems) -> None:
    path = tmp_path / "mine.py"
    path.write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass
            from mars_eval.mas import System, option
            from mars_eval.mas.base import SystemResult

            class Echo(System):
                name = "echo-file-test"

                @dataclass(frozen=True)
                class Options:
                    times: int = option(2, "how many times", minimum=1)

                async def solve(self, problem, task, ctx):
                    return SystemResult(answer=None)
            """
        )
    )
    cls = system_class(f"{path}:Echo")
    assert cls.name == "echo-file-test" and system_class("echo-file-test") is cls
    assert make_system("echo-file-test", times="3").times == 3
    with pytest.raises(ConfigError, match="no System subclass named 'Nope'"):
        system_class(f"{path}:Nope")
    with pytest.raises(ConfigError, match="no such file"):
        system_class(f"{tmp_path / 'absent.py'}:Echo")
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match="importing .* failed: RuntimeError: boom"):
        system_class(f"{bad}:Echo")


def test_agents_and_rounds_help_names_every_system_that_declares_them() -> None:
    import os
    import re

    from mars_eval.mas.registry import all_option_specs
    from tests.support.cli import run_cli

    declared = all_option_specs()
    assert {s for s, _ in declared["agents"]} == {"debate", "dylan", "agentverse", "macnet"}
    assert {s for s, _ in declared["rounds"]} >= {"mad", "autogen", "debate", "agentverse"}
    out = run_cli(["mas", "--help"], env={**os.environ, "COLUMNS": "400"})
    flat = re.sub(r"[\s│]+", " ", out.stdout)
    for flag in ("agents", "rounds"):
        for system, spec in declared[flag]:
            assert f"{system}: {spec.help}" in flat, (flag, system)
