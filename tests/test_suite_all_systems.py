"""`mars-eval suite --system all`: every system runs for a base model and a checkpoint served by
two scripted endpoints, and the report's cross-system table gives each system's paired delta
(known exactly: the checkpoint fixes problems the base gets wrong, in every system), with the
delta plot, as a user sees it in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mars_eval.mas import SYSTEM_NAMES
from mars_eval.report.build import build_report
from mars_eval.report.html import Report
from tests.support.browser import chromium_path, load_page
from tests.support.cli import run_cli
from tests.support.datasets import tag, write_aime_set
from tests.support.mas_policy import RolePolicy

N = 4
BASE_WRONG = {tag(0), tag(1), tag(2)}  # the base gets 1/4, the checkpoint 3/4: +50 pp everywhere
CKPT_WRONG = {tag(0)}


@pytest.fixture(scope="module")
def suite_runs(tmp_path_factory) -> Path:
    from tests.support.scripted_server import ScriptedServer

    root = tmp_path_factory.mktemp("suite_all")
    aime = write_aime_set(root / "aime.jsonl", n=N)
    out = root / "runs"
    kw = {"p_right": 1.0, "p_agree": 1.0, "p_accept": 1.0}
    with (
        ScriptedServer(RolePolicy(aime.golds, wrong=BASE_WRONG, **kw), model="base-model") as base,
        ScriptedServer(RolePolicy(aime.golds, wrong=CKPT_WRONG, **kw), model="ckpt-model") as ckpt,
    ):
        args = ["suite", "--system", "all", "--task", "aime24", "--data-files", str(aime.path)]
        args += ["--model", "base-model", "--model", "ckpt-model", "--output", str(out), "--json"]
        args += ["--base-url", base.base_url, "--base-url", ckpt.base_url]
        res = run_cli(args, timeout=600)
        assert res.returncode == 0, res.describe()
    return out


def test_suite_all_runs_every_system(suite_runs):
    summaries = [json.loads((d / "summary.json").read_text()) for d in suite_runs.iterdir() if d.is_dir()]
    got = {(s["system"], s["model"]): s["accuracy"] for s in summaries}
    assert {s for s, _ in got} == set(SYSTEM_NAMES)
    for system in SYSTEM_NAMES:
        assert got[(system, "base-model")] == pytest.approx(0.25), system
        assert got[(system, "ckpt-model")] == pytest.approx(0.75), system


def test_report_transfer_table_has_every_system(suite_runs):
    report = Report([str(suite_runs)], models=["base-model", "ckpt-model"])
    [block] = report.transfer()
    assert (block["model"], block["task"], block["base"]) == ("ckpt-model", "aime24", "base-model")
    assert {c.system for c in block["rows"]} == set(SYSTEM_NAMES)
    for c in block["rows"]:
        assert c.result.delta == pytest.approx(0.5) and c.result.n_paired == N
    assert block["svg"].startswith("<svg")


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (.ci/run installs it)")
def test_transfer_section_in_chromium(suite_runs, tmp_path):
    page = build_report([str(suite_runs)], str(tmp_path / "report.html"), models=["base-model", "ckpt-model"])
    checks = {
        "rows": "document.querySelectorAll('#transfer ~ table.transfer-table tbody tr').length",
        "text": "Array.from(document.querySelectorAll('table.transfer-table'))"
        ".map(t => t.innerText).join(' ')",
        "bars": "document.querySelectorAll('.transfer-plot svg').length",
    }
    res = load_page(page.as_uri(), checks)
    assert res.console_errors == []
    assert res.values["rows"] == len(SYSTEM_NAMES) and res.values["bars"] == 1
    assert all(name in res.values["text"] for name in SYSTEM_NAMES) and "+50.0" in res.values["text"]
