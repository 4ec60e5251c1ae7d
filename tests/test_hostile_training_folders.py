"""Hostile input, round five (issue 45): damaged and hostile training run folders. `mars-eval
curve` on a run whose run_config.json, final step.json, a checkpoint's mars_eval.json or a
`--mas` TOML file is damaged, and `mars-eval report TRAIN_DIR` on a damaged metrics.jsonl: one
line and exit 2 before any work (curve), or the line skipped and named (report), never a
traceback, and every read bounded."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mars_eval.cli import application
from mars_eval.run import json_files
from mars_eval.run.curve import spec_of

DEEP = "[" * 100_000 + "]" * 100_000
GOOD = {
    "games": ["tic_tac_toe"],
    "mas_eval": ["single:arith"],
    "curve_games": "tic_tac_toe",
    "curve_episodes": 2,
}


def _checkpoint(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "COMPLETE").write_text("ok\n")
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"x")


def train_dir(
    root: Path, settings: dict[str, Any] | None = None, *, raw: str | None = None, step: str | None = None
) -> Path:
    """A training run folder: run_config.json (GOOD updated by `settings`, or `raw`), an initial
    checkpoint, and a final one whose step.json is `step`."""
    run = root / "train"
    _checkpoint(run / "checkpoints" / "initial")
    (run / "run_config.json").write_text(raw if raw is not None else json.dumps({**GOOD, **(settings or {})}))
    (run / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n')
    if step is not None:
        final = run / "checkpoints" / "final"
        _checkpoint(final)
        (final / "train_state").mkdir()
        (final / "train_state" / "step.json").write_text(step)
    return run


def _no_work(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("work started before the bad input was refused")


def run_main(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> tuple:
    """(exit code, stderr) of `mars-eval ARGV` in this process; no checkpoint may be evaluated."""
    import mars_eval.run.curve

    monkeypatch.setattr(mars_eval.run.curve, "evaluate_checkpoint", _no_work)
    monkeypatch.setattr(sys, "argv", ["mars-eval", *argv])
    with pytest.raises(SystemExit) as info:
        application.main()
    return info.value.code, capsys.readouterr().err


def one_line(code: object, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


CURVE_CASES = {  # name: (train_dir keywords, what the one line says)
    "step.json not JSON": ({"step": "nope"}, "step.json is not JSON"),
    "step.json a string": ({"step": '"x"'}, "step.json is not a JSON object (it holds a string)"),
    "step.json 1e400": ({"step": '{"step": 1e400}'}, "step.json: step must be an integer, got inf"),
    "step.json {}": ({"step": "{}"}, "step.json names no step"),
    "step.json []": ({"step": "[]"}, "(it holds a list)"),
    "step.json deep": ({"step": DEEP}, "nested more than 64 deep"),
    "step.json negative": ({"step": '{"step": -3}'}, "step must be at least 0"),
    "curve_episodes a string": ({"settings": {"curve_episodes": "abc"}}, "curve_episodes must be an integer"),
    "curve_episodes 1e400": (
        {"settings": {"curve_episodes": 1e400}},
        "curve_episodes must be an integer, got inf",
    ),
    "seed a string": ({"settings": {"seed": "abc"}}, "seed must be an integer, got 'abc'"),
    "games a number": ({"settings": {"games": 5, "curve_games": "train"}}, "games must be names"),
    "curve_games a number": ({"settings": {"curve_games": 5}}, "curve_games must be names"),
    "mas_eval a number": ({"settings": {"mas_eval": 5}}, "mas_eval: expected a list, got int"),
    "samples a string": (
        {"settings": {"mas_eval": [{"system": "single", "task": "arith", "samples": "x"}]}},
        "mas_eval[0].samples must be an integer",
    ),
    "options a number": (
        {"settings": {"mas_eval": [{"system": "single", "task": "arith", "options": 5}]}},
        "mas_eval[0].options must be a table",
    ),
    "limit a string": (
        {"settings": {"mas_eval": [{"system": "single", "task": "arith", "limit": "x"}]}},
        "mas_eval[0].limit must be an integer",
    ),
    "limit -5": (
        {"settings": {"mas_eval": [{"system": "single", "task": "arith", "limit": -5}]}},
        "mas_eval[0].limit must be at least 1 (got -5)",
    ),
    "mas_eval_limit -5": ({"settings": {"mas_eval_limit": -5}}, "mas_eval_limit must be at least 0 (got -5)"),
    "max_tokens big": (
        {"settings": {"mas_eval": [{"system": "single", "task": "arith", "max_tokens": "big"}]}},
        "mas_eval[0].max_tokens must be an integer, got 'big'",
    ),
    "run_config deep": ({"raw": '{"a": ' + DEEP + "}"}, "run_config.json is not JSON we read"),
    "run_config a list": ({"raw": "[1, 2]"}, "run_config.json is not a JSON object"),
    "run_config binary": ({"raw": "\udcff"}, "run_config.json"),
}


@pytest.mark.parametrize("case", list(CURVE_CASES))
def test_curve_on_a_damaged_training_folder_is_one_line(case, tmp_path, monkeypatch, capsys) -> None:
    kwargs, needle = CURVE_CASES[case]
    if case == "run_config binary":
        run = train_dir(tmp_path)
        (run / "run_config.json").write_bytes(b"\xff\xfe{\x00")
    else:
        run = train_dir(tmp_path, **kwargs)
    line = one_line(*run_main(["curve", str(run)], monkeypatch, capsys))
    assert needle in line


@pytest.mark.parametrize(
    ("meta", "needle"),
    [
        ({"thinking": "no"}, "mars_eval.json: thinking must be true or false, got 'no'"),
        ({"temperature": "hot"}, "mars_eval.json: temperature must be a number"),
        ({"max_tokens": -1}, "mars_eval.json: max_tokens must be at least 1 (got -1)"),
        ({"prompts": 5}, "mars_eval.json: prompts must be text"),
    ],
)
def test_a_checkpoints_mars_eval_json_is_checked_as_the_flags(
    meta, needle, tmp_path, monkeypatch, capsys
) -> None:
    run = train_dir(tmp_path, step='{"step": 4}')
    (run / "checkpoints" / "final" / "mars_eval.json").write_text(json.dumps(meta))  # not the first one
    line = one_line(*run_main(["curve", str(run)], monkeypatch, capsys))
    assert needle in line and "final" in line


def test_a_deep_or_huge_mars_eval_json_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    run = train_dir(tmp_path)
    meta = run / "checkpoints" / "initial" / "mars_eval.json"
    meta.write_text(DEEP)
    assert "nested more than 64 deep" in one_line(*run_main(["curve", str(run)], monkeypatch, capsys))
    with open(meta, "wb") as f:  # sparse: 17 MiB of nothing, refused without being parsed
        f.truncate(json_files.MAX_FILE_BYTES + 1024 * 1024)
    assert "larger than 16 MiB" in one_line(*run_main(["curve", str(run)], monkeypatch, capsys))


TABLE = b'[[mas_eval]]\nsystem = "single"\ntask = "arith"\n'


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        (b"\xff\xfe\x00[[mas_eval]]", "is not UTF-8 text"),
        (
            b'[[mas_eval]]\nsystem = "single"\ntask = "arith"\nlimit = inf\n',
            "limit must be an integer, got inf",
        ),
        (b'[[mas_eval]]\nsystem = "single"\ntask = "arith"\nsamples = 1e400\n', "samples must be an integer"),
        (
            b'[[mas_eval]]\nsystem = "single"\ntask = "arith"\nmax_tokens = "big"\n',
            "max_tokens must be an integer",
        ),
        (b"a = " + DEEP.encode() + b"\n", "does not parse"),
    ],
)
def test_a_mas_toml_file_is_checked_before_any_work(toml, needle, tmp_path, monkeypatch, capsys) -> None:
    run = train_dir(tmp_path)
    path = tmp_path / "mas.toml"
    path.write_bytes(toml)
    line = one_line(*run_main(["curve", str(run), "--mas", str(path)], monkeypatch, capsys))
    assert needle in line and "--mas" in line


def test_curve_flags_are_checked_as_the_other_commands(tmp_path, monkeypatch, capsys) -> None:
    run = train_dir(tmp_path)
    assert "--limit must be at least 1 (got -5)" in one_line(
        *run_main(["curve", str(run), "--limit", "-5"], monkeypatch, capsys)
    )
    assert "--episodes must be at least 1 (got 0)" in one_line(
        *run_main(["curve", str(run), "--episodes", "0"], monkeypatch, capsys)
    )


def test_mas_eval_as_text_is_entries_not_characters() -> None:
    spec = spec_of({"mas_eval": "single:arith,mad:math500", "mas_eval_limit": 3})
    assert [(m.label, m.limit) for m in spec.mas] == [("single:arith", 3), ("mad:math500", 3)]
    assert spec_of({"mas_eval": ["single:arith"], "mas_eval_limit": 0}).mas[0].limit is None


# --- report TRAIN_DIR on a damaged metrics.jsonl --------------------------------------------------


def _report(run: Path, tmp_path: Path, monkeypatch, capsys) -> tuple[object, str]:
    monkeypatch.setattr(sys, "argv", ["mars-eval", "report", str(run), "--out", str(tmp_path / "r.html")])
    with pytest.raises(SystemExit) as info:
        application.main()
    return info.value.code, capsys.readouterr().err


def test_report_skips_and_names_damaged_metrics_lines(tmp_path, monkeypatch, capsys) -> None:
    run = tmp_path / "train"
    (run / "checkpoints").mkdir(parents=True)
    lines = [
        '{"step": 1, "reward": 0.5}',
        "[1, 2]",
        '{"a": ' + DEEP + "}",
        '{"step": 2, "reward": -1e308}',
        '{"step": 3, "reward": 1e308, "x": "' + "y" * (json_files.MAX_LINE_BYTES + 10) + '"}',
        '{"step": 4, "reward": 0.7}',
    ]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    code, err = _report(run, tmp_path, monkeypatch, capsys)
    assert "Traceback" not in err, err
    assert code == 3, err  # written, without what could not be read (named)
    skipped = [ln for ln in err.splitlines() if ln.startswith("skipped:")]
    assert len(skipped) == 3, err
    assert "line 2: is a list, not an object" in skipped[0]
    assert "line 3: is not JSON we read" in skipped[1]
    assert "line 5: longer than 1 MiB" in skipped[2]
    page = (tmp_path / "r.html").read_text()
    assert "1e+308" not in page and "1e308" not in page


def test_metrics_lines_are_read_in_bounded_pieces(tmp_path, monkeypatch) -> None:
    path = tmp_path / "metrics.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"step": 1}\n{"x": "' + b"z" * (8 * json_files.MAX_LINE_BYTES) + b'"}\n{"step": 2}\n')
    sizes: list[int] = []
    original = json_files._parse

    def parse(raw: bytes) -> Any:
        sizes.append(len(raw))
        return original(raw)

    monkeypatch.setattr(json_files, "_parse", parse)
    skipped: list[str] = []
    assert list(json_files.read_lines(path, skipped)) == [{"step": 1}, {"step": 2}]
    assert skipped == ["line 2: longer than 1 MiB"] and max(sizes) < 100  # the long line never parsed


def test_metric_values_past_the_bound_are_not_drawn() -> None:
    assert json_files.metric_value(-1e308) is None and json_files.metric_value(float("nan")) is None
    assert json_files.metric_value(True) is None and json_files.metric_value(10**400) is None
    assert json_files.metric_value(3) == 3.0 and json_files.metric_value(-2.5e14) == -2.5e14


# --- run folders' own JSON: config.json and summary.json nested past the parser ---------------


def test_a_run_folders_deep_config_json_is_no_earlier_run(tmp_path) -> None:
    """read_config (every mas/games start looks at its siblings' config.json, rescore at its
    source's): a config.json nested 100k deep was a RecursionError traceback."""
    from mars_eval.run.identity import read_config

    (tmp_path / "config.json").write_text('{"identity": ' + DEEP + "}")
    assert read_config(tmp_path) == {}
    (tmp_path / "config.json").write_text('{"task": "arith"}')
    assert read_config(tmp_path) == {"task": "arith"}


def test_a_games_folders_damaged_summary_is_no_earlier_results(tmp_path) -> None:
    """A resumed `games` merges the folder's earlier summary.json: 100k deep was a traceback, and
    a row whose game is a list a TypeError when merged (unhashable)."""
    from mars_eval.run.games_results import merge_results, previous_results

    (tmp_path / "summary.json").write_text('{"results": ' + DEEP + "}")
    assert previous_results(tmp_path) == []
    good = {"game": "tic_tac_toe", "opponent": "random", "seat": 0}
    rows = [{"game": ["x"], "opponent": "random", "seat": 0}, good, {"game": "g", "opponent": {}, "seat": 1}]
    (tmp_path / "summary.json").write_text(json.dumps({"results": rows}))
    assert previous_results(tmp_path) == [good]
    assert merge_results(previous_results(tmp_path), [good]) == [good]


def test_rescore_of_a_run_whose_summary_is_too_deep_is_one_line(tmp_path) -> None:
    from mars_eval.models.base import ConfigError
    from mars_eval.run.rescore import read_source

    (tmp_path / "config.json").write_text(json.dumps({"identity": {"task": "arith"}, "task": "arith"}))
    with pytest.raises(ConfigError, match="no summary.json, so the run has not finished"):
        read_source(str(tmp_path))
    (tmp_path / "summary.json").write_text('{"n": ' + DEEP + "}")
    with pytest.raises(
        ConfigError, match=r"summary.json is not JSON we read \(JSON nested more than 64 deep\)"
    ):
        read_source(str(tmp_path))
    (tmp_path / "summary.json").write_text("[1]")
    with pytest.raises(ConfigError, match="summary.json is not a JSON object"):
        read_source(str(tmp_path))


def test_compare_and_report_read_a_deep_config_or_suite_file_within_bounds(tmp_path: Path) -> None:
    """`compare` on a run folder whose config.json or summary.json is 100k levels deep: one
    ConfigError line, not a RecursionError; the report's suite.json lookup skips such a file."""
    from mars_eval.analysis.compare import load_run
    from mars_eval.models.base import ConfigError
    from mars_eval.report.html import named_order
    from mars_eval.run.suite import SUITE_FILE

    run = tmp_path / "run"
    run.mkdir()
    (run / "samples.jsonl").write_text("")
    for name in ("config.json", "summary.json"):
        (run / "config.json").write_text("{}")
        (run / name).write_text(DEEP)
        with pytest.raises(ConfigError, match="cannot read run folder") as caught:
            load_run(run)
        assert len(str(caught.value).splitlines()) == 1
    (tmp_path / SUITE_FILE).write_text(DEEP)
    assert named_order([str(tmp_path)]) == []
    (tmp_path / SUITE_FILE).write_text(json.dumps({"models": ["a", "b"]}))
    assert named_order([str(tmp_path)]) == ["a", "b"]
