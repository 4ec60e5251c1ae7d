"""A run folder is one configuration (issue 16): what makes two runs the same run, through the CLI.

Same run: the same data under another path; one checkpoint named three ways. Another run: the
data edited in place (said in one line; old and new records never mix); the same model name
in-process and over HTTP. Refused before any work: duplicate problem ids, flags the system does
not use. Folders of earlier versions resume when their identity can be recomputed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mars_eval.run.runner import EvalConfig
from mars_eval.run.store import config_hash, slug
from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_aime_set
from tests.support.scripted_policy import AnswerPolicy

REPO = Path(__file__).resolve().parents[1]
MODEL = "scripted-model"


def _rewrite_gold(path: Path, index: int, gold: str) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[index]["answer"] = gold
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_edited_data_is_a_new_run_and_the_same_data_elsewhere_resumes(tmp_path, scripted_server):
    aime = write_aime_set(tmp_path / "aime.jsonl", n=4)
    original = tmp_path / "copy" / "aime-copy.jsonl"
    original.parent.mkdir()
    shutil.copy(aime.path, original)
    srv = scripted_server(aime.policy)
    args = mas_args(model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", data_files=aime.path)
    first = run_cli(args)
    assert first.returncode == 0, first.describe()
    assert first.summary["accuracy"] == 1.0
    old_dir = first.summary["run_dir"]

    _rewrite_gold(aime.path, 0, "999")  # edited in place: the model's answer to problem 0 is now wrong
    second = run_cli(args)
    assert second.returncode == 0, second.describe()
    assert second.summary["run_dir"] != old_dir
    assert second.summary["accuracy"] == 0.75  # the new gold, not the old record
    said = [ln for ln in second.stderr.splitlines() if "the data changed" in ln]
    assert len(said) == 1 and Path(old_dir).name in said[0], second.stderr
    assert Path(old_dir, "samples.jsonl").is_file()  # the old run is kept as it was

    moved = mas_args(model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", data_files=original)
    third = run_cli(moved)  # the original rows under another path: the first run, resumed
    assert third.returncode == 0, third.describe()
    assert third.summary["run_dir"] == old_dir and third.summary["calls_sent"] == 0
    assert "resuming: 4 of 4 samples done" in third.stderr


def test_duplicate_problem_ids_are_refused_with_both_lines(tmp_path):
    rows = [{"id": "p1", "problem": "1+1?", "answer": "2"}, {"id": "p2", "problem": "2+2?", "answer": "4"}]
    rows.append({"id": "p1", "problem": "3+3?", "answer": "6"})
    data = tmp_path / "dup.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = mas_args(
        model=MODEL, base_urls=["http://127.0.0.1:9/v1"], output=tmp_path / "runs", data_files=data
    )
    res = run_cli(args)
    assert res.returncode == 2, res.describe()
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "'p1'" in lines[0] and "lines 1 and 3" in lines[0], res.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_flags_the_system_does_not_use_are_refused(tmp_path):
    base = ["--task", "arith", "--base-url", "http://127.0.0.1:9/v1", "--output", str(tmp_path / "r")]
    cases = [
        (["--system", "single", "--votes", "3"], "--votes is used by vote only"),
        (
            ["--system", "vote", "--rounds", "2"],
            "--rounds is used by mad, autogen, debate and agentverse only",
        ),
        (["--system", "single", "--mad-judge", "last-round"], "--mad-judge is used by mad only"),
    ]
    for flags, line in cases:
        res = run_cli(["mas", *flags, *base])
        assert res.returncode == 2, res.describe()
        assert res.stderr.strip() == f"error: {line}", res.stderr
    systems = ["--system", "single", "--system", "debate"]
    suite = run_cli(["suite", *systems, "--agents", "2", "--votes", "3", *base])
    assert suite.returncode == 2 and "--votes is used by vote only" in suite.stderr, suite.describe()


def test_one_checkpoint_named_three_ways_is_one_run_and_http_is_another(tmp_path, scripted_server):
    tiny = (REPO / "results" / "tiny").resolve()
    out = tmp_path / "runs"
    common = ["mas", "--task", "arith", "--limit", "1", "--max-tokens", "4", "--no-thinking"]
    common += ["--output", str(out), "--json"]
    dirs = []
    for named in ([], ["--model", "results/tiny"], ["--model", str(tiny)]):
        res = run_cli([*common, *named], timeout=600)
        assert res.returncode == 0, res.describe()
        dirs.append(res.summary["run_dir"])
    assert len(set(dirs)) == 1, dirs
    config = json.loads(Path(dirs[0], "config.json").read_text())
    assert config["model"] == str(tiny) and config["engine"] != "http" and config["fingerprint"]

    srv = scripted_server(AnswerPolicy(), model=str(tiny))  # an endpoint serving the same name
    http = run_cli([*common, "--model", str(tiny), "--base-url", srv.base_url])
    assert http.returncode == 0, http.describe()
    assert http.summary["run_dir"] != dirs[0]
    assert http.summary["calls_sent"] == 1 and srv.stats()["calls"] == 1  # nothing shared


def test_a_folder_of_an_earlier_version_resumes_or_is_named(tmp_path, scripted_server):
    aime = write_aime_set(tmp_path / "aime.jsonl", n=3)
    srv = scripted_server(aime.policy)
    out = tmp_path / "runs"
    args = mas_args(model=MODEL, base_urls=[srv.base_url], output=out, data_files=aime.path)
    first = run_cli(args)
    assert first.returncode == 0, first.describe()
    # Turn it into the folder an earlier version made for the same command (the old name and
    # config: the options as given, the data path instead of the data).
    new_dir = Path(first.summary["run_dir"])
    cfg = EvalConfig(task="aime24", system="single", model=MODEL, data_files=str(aime.path))
    cfg.params = type(cfg.params).for_mode(True)
    legacy = cfg.legacy_identity(MODEL)
    legacy_dir = out / f"aime24-single-{slug(MODEL)}-{config_hash(legacy)}"
    new_dir.rename(legacy_dir)
    (legacy_dir / "config.json").write_text(json.dumps(legacy))
    stranger = out / f"aime24-single-{slug(MODEL)}-0123456789"  # an old folder of other settings
    stranger.mkdir()
    (stranger / "config.json").write_text(json.dumps({**legacy, "seed": 7}))

    again = run_cli(args)
    assert again.returncode == 0, again.describe()
    assert again.summary["run_dir"] == str(new_dir) and again.summary["calls_sent"] == 0
    assert f"resuming {legacy_dir.name} (made by an earlier version) as {new_dir.name}" in again.stderr
    assert "cannot be recomputed" in again.stderr and stranger.name in again.stderr
    assert not legacy_dir.exists()
