"""Issue 32: the transfer curve. mars-train (tiny preset, shrunk) evaluates its checkpoints as
ordinary `games` and `mas` run folders under evals/step-N/, `mars-eval curve` resumes them
without sending a finished call again, and `mars-eval report` draws each curve with its paired
intervals (checked in headless Chromium)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from mars_eval.cli.application import app
from mars_eval.models.base import ConfigError
from mars_eval.models.transformers_engine import TransformersEngine
from mars_eval.run.curve import checkpoint_steps, eval_dir, parse_mas, spec_of
from mars_eval.run.rundirs import classify
from tests.support.browser import chromium_path, load_page
from training.cli import main as train_main
from training.config import build_config
from training.trainer import Trainer

SHRUNK = {  # the tiny preset, seconds instead of minutes
    "warmstart_examples": 200,
    "warmstart_epochs": 1,
    "rollout_batch": 8,
    "minibatches": 2,
    "micro_batch_size": 16,
    "steps": 1,
    "eval_every": 1,
    "eval_episodes": 2,
    "save_every": 0,
    "live": False,
    "tracker": "none",
    "curve_games": "tic_tac_toe",
    "curve_opponents": "random",
    "curve_episodes": 4,
    "mas_eval": "single:arith",
    "mas_eval_limit": 3,
}


@pytest.fixture
def engine_calls(monkeypatch):
    """Every chat call the in-process engine answers (what a resumed run must not repeat)."""
    calls: list[int] = []
    original = TransformersEngine.chat

    async def counted(self, messages, params):
        calls.append(1)
        return await original(self, messages, params)

    monkeypatch.setattr(TransformersEngine, "chat", counted)
    return calls


def _runs(folder):
    return {p.name.split("-")[0]: classify(p) for p in folder.iterdir() if p.is_dir()}


@pytest.mark.slow
def test_training_curve_resume_and_report(tmp_path, engine_calls):
    out = tmp_path / "train"
    cfg = build_config("tiny", overrides=dict(SHRUNK))
    assert Trainer(cfg, out, log=lambda *_: None).run() == 0
    assert [s for s, _ in checkpoint_steps(out)] == [0, 1]
    sent_in_training = len(engine_calls)
    assert sent_in_training > 0
    for step in (0, 1):
        runs = _runs(eval_dir(out, step))
        assert runs["arith"].kind == "mas" and len(runs["arith"].records) == 3
        assert runs["games"].kind == "games" and len(runs["games"].records) == 8  # 4 episodes x 2 seats
        want = "initial" if step == 0 else "final"
        assert runs["arith"].config["model"].endswith(f"/checkpoints/{want}")

    runner = CliRunner()
    engine_calls.clear()
    res = runner.invoke(app, ["curve", str(out)])
    assert res.exit_code == 0, res.output
    assert engine_calls == []  # everything finished: not one call sent again
    assert "0 call(s) sent" in res.output

    # one more problem per checkpoint: exactly those two calls (single: one call per sample),
    # through an engine with the KV budget given (the same runs: replies do not depend on it)
    res = runner.invoke(app, ["curve", str(out), "--limit", "4", "--kv-cache-mib", "66"])
    assert res.exit_code == 0, res.output
    assert len(engine_calls) == 2
    for step in (0, 1):
        arith = _runs(eval_dir(out, step))["arith"]
        assert len(arith.records) == 4
        summary = json.loads((arith.path / "summary.json").read_text())
        assert summary["engine_stats"]["kv_budget_mib"] == 66.0
    res = runner.invoke(app, ["curve", str(out), "--kv-cache-mib", "0"])
    assert isinstance(res.exception, ConfigError) and "--kv-cache-mib" in str(res.exception)

    page = tmp_path / "report.html"
    res = runner.invoke(app, ["report", str(out), "--out", str(page)])
    assert res.exit_code == 0, res.output
    html = page.read_text(encoding="utf-8")
    assert "Transfer curve of train" in html and "Base vs final" in html
    # every curve's table has its step-1 point paired with step 0: an interval, not a dash
    tables = re.findall(r'<table class="curve-table">(.*?)</table>', html, re.S)
    assert len(tables) == 3  # single · arith, tic_tac_toe · random · first / second
    for t in tables:
        row = re.findall(r"<tr><td>1</td>(.*?)</tr>", t, re.S)[0]
        assert re.search(r"\[[-+]\d+\.\d+, [-+]\d+\.\d+\]", row), row

    if chromium_path() is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    checks = {
        "curves": "document.querySelectorAll('.curve-plot svg').length",
        "deltas": "document.querySelectorAll('.curve-delta-plot svg').length",
        "bands": "document.querySelectorAll('.curve-delta-plot svg g[id^=\"FillBetween\"]').length",
        "final_rows": "document.querySelectorAll('.curve-final-table tbody tr').length",
        "titles": "[...document.querySelectorAll('.curve-title')].map(e => e.textContent).join('|')",
        "beside": "document.querySelectorAll('.curve-beside-plot svg').length",
        "width": "document.querySelector('.curve-plot svg').getBoundingClientRect().width",
    }
    shown = load_page(page.as_uri(), checks)
    assert shown.console_errors == []
    v = shown.values
    assert v["curves"] == 3 and v["deltas"] == 3 and v["bands"] == 3 and v["final_rows"] == 3
    assert "single · arith" in v["titles"] and "tic_tac_toe · random · first" in v["titles"]
    assert v["beside"] == 1 and v["width"] > 200


def test_mas_eval_entries_and_bad_input(tmp_path):
    entries = parse_mas(
        ["single:arith", {"system": "mad", "task": "math500", "limit": 5, "options": {"rounds": 2}}], 7
    )
    assert [(e.label, e.limit) for e in entries] == [("single:arith", 7), ("mad:math500", 5)]
    assert entries[1].options == {"rounds": 2}
    for bad in (["single"], [{"system": "single"}], [{"system": "single", "task": "arith", "x": 1}]):
        with pytest.raises(ConfigError):
            parse_mas(bad)
    spec = spec_of({"games": ["tic_tac_toe"], "curve_games": ["train", "held_out"]})
    assert spec.games == ("tic_tac_toe", "connect_four", "leduc_poker", "simple_hanabi")
    # a TOML list of tables reaches the trainer's settings as tables
    toml = tmp_path / "c.toml"
    toml.write_text('[[mas_eval]]\nsystem = "single"\ntask = "arith"\nlimit = 2\n')
    cfg = build_config("micro", config_file=toml)
    assert spec_of(cfg.to_dict()).mas[0].limit == 2
    # bad input to mars-train: one line, exit 2, before any work
    assert train_main(["--preset", "micro", "--output", str(tmp_path / "r"), "mas_eval=single"]) == 2
    assert train_main(["--preset", "micro", "--output", str(tmp_path / "r"), "curve_games=chess"]) == 2
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_mas_eval_task_options_reach_the_task(tmp_path):
    """`task_options = { arith_steps = 1 }` in a [[mas_eval]] table is `mars-eval mas
    --arith-steps 1`: the run's task takes one operation per problem; a setting the task does not
    declare, or out of its range, is one line before any work."""
    from mars_eval.run.curve import CurveSpec, check_spec, mas_config

    [entry] = parse_mas([{"system": "single", "task": "arith", "task_options": {"arith_steps": 1}}])
    cfg = mas_config(entry, tmp_path, tmp_path / "out")
    assert cfg.task_options == {"arith_steps": 1} and cfg.make_task().steps == 1
    plain = mas_config(parse_mas(["single:arith"])[0], tmp_path, tmp_path / "out")
    assert plain.task_options is None and plain.make_task().steps == 0
    for bad, needle in (({"arith_steps": 7}, "arith-steps"), ({"nope": 1}, "nope")):
        spec = CurveSpec(mas=parse_mas([{"system": "single", "task": "arith", "task_options": bad}]))
        with pytest.raises(ConfigError, match=needle):
            check_spec(spec, [tmp_path])


def test_curve_checkpoints_survive_pruning(tmp_path):
    from training.checkpoint import prune_step_checkpoints

    for n in (1, 2, 3, 4):
        state = tmp_path / f"step-{n}" / "train_state"
        state.mkdir(parents=True)
        (state / "state.pt").write_bytes(b"x")
        (state.parent / "COMPLETE").write_text("ok\n")
    removed = prune_step_checkpoints(tmp_path, 1, keep=lambda n: n % 2 == 0)
    assert sorted(p.name for p in removed) == ["step-1", "step-3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-2", "step-4"]


def test_curve_command_bad_input(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["curve", str(tmp_path)])
    assert res.exit_code != 0 and isinstance(res.exception, ConfigError)
    (tmp_path / "run_config.json").write_text(json.dumps({"games": ["tic_tac_toe"]}))
    res = runner.invoke(app, ["curve", str(tmp_path), "--mas", "single:arith"])
    assert isinstance(res.exception, ConfigError) and "no complete checkpoint" in str(res.exception)
