"""`mars-eval view`: the server's JSON endpoints (aiohttp's test client, no browser) over known
run folders and over a folder that fills, is damaged or is locked by a running process."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mars_eval.report.view_data import Catalog
from mars_eval.report.view_server import make_app
from tests.support.run_fixtures import INJECTION, N, make_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return make_runs(tmp_path_factory.mktemp("view") / "runs")


def call(roots: list[Path], *requests: tuple[str, dict], poll_s: float = 0.05) -> list[tuple[int, object]]:
    """GET each (path, query) in turn from a fresh app; (status, JSON or text) of each."""

    async def go() -> list[tuple[int, object]]:
        app = make_app([str(r) for r in roots], poll_s=poll_s, budget_s=60)
        async with TestClient(TestServer(app)) as client:
            out = []
            for path, query in requests:
                resp = await client.get(path, params=query)
                body = await resp.text()
                try:
                    out.append((resp.status, json.loads(body)))
                except ValueError:
                    out.append((resp.status, body))
            return out

    return asyncio.run(go())


def get(roots: list[Path], path: str, **query: str) -> object:
    ((status, body),) = call(roots, (path, query))
    assert status == 200, body
    return body


def run_id(listing: dict, system: str, model: str) -> str:
    return next(r["id"] for r in listing["runs"] if r["system"] == system and r["model"] == model)


def test_listing_matches_each_summary(runs):
    listing = get([runs], "/api/runs")
    kinds = sorted(r["kind"] for r in listing["runs"])
    assert kinds == ["games"] + ["mas"] * 7 + ["train"] and listing["bad"] == []
    for r in listing["runs"]:
        if r["kind"] != "mas":
            continue
        folder = runs / r["id"].split("/", 1)[1]
        summary = json.loads((folder / "summary.json").read_text())
        assert (r["done"], r["planned"], r["errors"]) == (N, N, summary["errors"])
        assert r["accuracy"] == pytest.approx(summary["accuracy"])  # the summary's own interval
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((summary["ci_low"], summary["ci_high"]))
        assert r["calls"] == summary["llm_calls"] and r["prompt_tokens"] == summary["prompt_tokens"]
        assert r["running"] is False and r["skipped_lines"] == 0
    games = next(r for r in listing["runs"] if r["kind"] == "games")
    assert games["metric"] == "win rate" and games["done"] == games["planned"] == 8
    train = next(r for r in listing["runs"] if r["kind"] == "train")
    assert train["steps"] > 0


def test_folders_not_read_yet_show_their_summary(runs):
    catalog = Catalog([runs], budget_s=0)  # a server just started over many folders
    catalog.refresh(force=True)
    listing = catalog.listing()
    assert listing["reading"] == len(listing["runs"])
    mas = next(r for r in listing["runs"] if r["kind"] == "mas")
    summary = json.loads((runs / mas["id"].split("/", 1)[1] / "summary.json").read_text())
    assert mas["reading"] and mas["skipped_lines"] is None
    assert (mas["accuracy"], mas["done"], mas["calls"]) == (summary["accuracy"], N, summary["llm_calls"])
    run = catalog.load(catalog.get(mas["id"]))  # a page asks for it: read now
    assert run.loaded and run.brief()["skipped_lines"] == 0 and "reading" not in run.brief()
    assert catalog.listing()["reading"] == len(listing["runs"]) - 1


def test_samples_filters_pages_and_search(runs):
    listing = get([runs], "/api/runs")
    broken = run_id(listing, "single", "trained-model")  # problem 5 errored
    base = run_id(listing, "single", "base-model")  # problem 1 wrong
    errored = get([runs], "/api/samples", run=broken, filter="errored")
    assert errored["total"] == 1 and "HTTP 500" in errored["rows"][0]["error"]
    assert errored["rows"][0]["correct"] is None
    wrong = get([runs], "/api/samples", run=base, filter="wrong")
    assert [r["problem_id"][:9] for r in wrong["rows"]] == ["arith-001"]
    assert get([runs], "/api/samples", run=base, filter="correct")["total"] == N - 1
    assert get([runs], "/api/samples", run=base, filter="truncated")["total"] == 0
    page2 = get([runs], "/api/samples", run=base, per="4", page="2")
    assert (page2["page"], page2["pages"], len(page2["rows"])) == (2, 2, N - 4)
    assert get([runs], "/api/samples", run=base, problem="arith-003")["total"] == 1
    found = get([runs], "/api/samples", run=base, q="secret THINKING about 3")  # thinking is searched
    assert [r["problem_id"][:9] for r in found["rows"]] == ["arith-003"]
    assert "offset" not in found["rows"][0]  # where the line lies stays on the server


def test_sample_shows_every_agent_and_the_text_as_written(runs):
    listing = get([runs], "/api/runs")
    mad = run_id(listing, "mad", "base-model")
    first = get([runs], "/api/samples", run=mad)["rows"][0]
    view = get([runs], "/api/sample", run=mad, key=first["key"])
    calls = [e for e in view["entries"] if "event" not in e]
    assert [e["agent"] for e in calls] == ["affirmative", "negative", "moderator"]
    assert {e["round"] for e in calls} == {1}
    assert INJECTION in calls[0]["content"]  # JSON carries the text; the page puts it in as text
    assert calls[1]["new_messages"][1]["content"].startswith("So the answer")  # references expanded
    assert calls[0]["thinking"] == "SECRET thinking about 0" and calls[0]["cut"] is False
    assert view["fields"]["gold"] == view["fields"]["answer"] == "19" and view["row"]["correct"] is True
    assert any(e.get("event") == "verdict" for e in view["entries"])


def test_side_by_side_pairs_as_compare_does(runs):
    listing = get([runs], "/api/runs")
    a, b = run_id(listing, "mad", "base-model"), run_id(listing, "mad", "trained-model")
    out = get([runs], "/api/compare", a=a, b=b)
    # trained is wrong on problems 2 and 3 where base is right (run_fixtures.MODELS)
    assert [p["problem_id"][:9] for p in out["pairs"]] == ["arith-002", "arith-003"]
    assert all(p["a"]["correct"] and not p["b"]["correct"] for p in out["pairs"])
    stats = out["stats"]
    assert stats["delta"] == pytest.approx(-2 / 6) and stats["n_paired"] == N
    assert (stats["right_only_in_a"], stats["right_only_in_b"]) == (2, 0)
    assert get([runs], "/api/compare", a=a, b=b, only="all")["total"] == N
    games = next(r["id"] for r in listing["runs"] if r["kind"] == "games")
    assert "two mas runs" in get([runs], "/api/compare", a=a, b=games)["note"]


def test_bad_requests_are_answered_not_crashed(runs):
    listing = get([runs], "/api/runs")
    base = run_id(listing, "single", "base-model")
    answers = call(
        [runs],
        ("/api/run", {"run": "../../etc/passwd"}),
        ("/api/run", {}),
        ("/api/samples", {"run": base, "filter": "nonsense"}),
        ("/api/samples", {"run": base, "page": "two"}),
        ("/api/sample", {"run": base, "key": "no such key"}),
        ("/api/compare", {"a": base, "b": base, "only": "x"}),
        ("/static/../config.json", {}),
        ("/static/report.html", {}),
    )
    assert [s for s, _ in answers] == [404, 404, 400, 400, 404, 400, 404, 404]


def test_pages_carry_a_strict_content_security_policy(runs):
    async def go() -> list:
        async with TestClient(TestServer(make_app([str(runs)]))) as client:
            out = []
            for path in ("/", "/sample?run=x&key=y", "/static/view.js", "/api/runs"):
                resp = await client.get(path)
                out.append((resp.status, resp.headers.get("Content-Security-Policy", ""), resp.content_type))
            return out

    answers = asyncio.run(go())
    assert [a[0] for a in answers] == [200] * 4
    assert all("script-src 'self'" in csp and "unsafe-inline" not in csp for _, csp, _ in answers)
    assert [a[2] for a in answers] == ["text/html", "text/html", "application/javascript", "application/json"]


def _copy_run(runs: Path, dest: Path, pattern: str = "arith-mad-base-model-*") -> tuple[Path, list[bytes]]:
    src = next((runs / "mas").glob(pattern))
    folder = dest / "out" / src.name
    shutil.copytree(src, folder)
    lines = (folder / "samples.jsonl").read_bytes().splitlines(keepends=True)
    (folder / "summary.json").unlink()  # a first run going: no summary yet
    return folder, lines


def test_a_filling_damaged_and_locked_folder(runs, tmp_path):
    folder, lines = _copy_run(runs, tmp_path)
    samples = folder / "samples.jsonl"
    samples.write_bytes(b"".join(lines[:2]))
    catalog = Catalog([tmp_path / "out"], min_interval_s=0)
    catalog.refresh(force=True)
    (run,) = catalog.runs.values()
    # a first run going: its plan.json (written as it started) says what is planned
    assert run.stats()["done"] == 2 and run.stats()["planned"] == len(lines)
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()}
    fd = os.open(folder / ".lock", os.O_RDWR)  # the running process's lock, held here
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with open(samples, "ab") as f:  # a damaged line, a good one, a write in progress
            f.write(b'{"key": "x", "problem_id": 3\n' + lines[2] + lines[3][:40])
        version = catalog.refresh()
        assert run.running is True
        stats = run.stats()
        assert stats["done"] == 3 and stats["skipped_lines"] == 1
        assert run.skipped() == ["line 3: not JSON"]
        with open(samples, "ab") as f:  # the write completes
            f.write(lines[3][40:])
        assert catalog.refresh() > version and run.stats()["done"] == 4
        assert run.select("all", query="SECRET thinking about 3")  # read from its offset
    finally:
        os.close(fd)
    catalog.refresh()
    assert run.running is False
    # read-only: nothing in the folder was written, the lock file included
    snapshot = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()}
    changed = {k for k in snapshot if k != "samples.jsonl" and snapshot[k] != before.get(k)}
    assert changed == set() and set(snapshot) == set(before)
    samples.write_bytes(lines[0])  # --fresh: the file starts again
    catalog.refresh()
    assert run.stats()["done"] == 1 and run.skipped() == []


def test_new_and_unreadable_folders_show_up(runs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    catalog = Catalog([out], min_interval_s=0, rescan_s=0)
    catalog.refresh(force=True)
    assert catalog.listing()["runs"] == []  # an empty output folder is fine: runs come later
    _copy_run(runs, tmp_path)
    bad = out / "broken"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    (bad / "samples.jsonl").write_text("")
    catalog.refresh()
    listing = catalog.listing()
    assert len(listing["runs"]) == 1
    assert listing["bad"][0]["id"].endswith("broken") and "not JSON" in listing["bad"][0]["why"]


def test_events_say_when_a_folder_changed(runs, tmp_path):
    folder, lines = _copy_run(runs, tmp_path)
    (folder / "samples.jsonl").write_bytes(lines[0])

    async def go() -> list[str]:
        app = make_app([str(tmp_path / "out")], poll_s=0.05)
        async with TestClient(TestServer(app)) as client:
            resp = await client.get("/api/events")
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            events = []
            first = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
            events.append(first.decode())
            with open(folder / "samples.jsonl", "ab") as f:
                f.write(lines[1])
            second = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
            events.append(second.decode())
            resp.close()
            return events

    first, second = asyncio.run(go())
    assert first.startswith("event: change") and second.startswith("event: change")
    assert (
        json.loads(second.split("data: ", 1)[1])["version"]
        > json.loads(first.split("data: ", 1)[1])["version"]
    )


def test_a_plain_mas_run_does_not_import_the_viewer():
    import subprocess
    import sys

    code = (
        "import sys, mars_eval.run.runner, mars_eval.cli.application; "
        "print(sorted(m for m in sys.modules if 'view' in m and m.startswith('mars_eval')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['mars_eval.cli.view_cmds']", out.stdout


def test_hostile_lines_are_served_not_crashed(runs, tmp_path):
    folder, lines = _copy_run(runs, tmp_path)
    rec = json.loads(lines[0])
    odd = {**rec, "key": "odd#0", "problem_id": "<script>alert(1)</script>", "latency_s": float("nan")}
    odd["details"] = {**rec["details"], "score": float("inf")}
    deep = {"key": "deep#0", "problem_id": "p", "correct": True, "details": {"x": [[[[1]]]]}}
    for _ in range(70):
        deep["details"] = {"x": deep["details"]}
    with open(folder / "samples.jsonl", "ab") as f:
        f.write((json.dumps(odd) + "\n").encode())  # NaN and Infinity: what json.dumps writes
        f.write((json.dumps(deep) + "\n").encode())
        f.write(b"[1, 2]\n\xff\xfe not text\n")
    root = tmp_path / "out"
    listing = get([root], "/api/runs")
    (run,) = listing["runs"]
    assert run["done"] == len(lines) + 1 and run["skipped_lines"] == 3
    view = get([root], "/api/sample", run=run["id"], key="odd#0")
    assert view["fields"]["latency_s"] is None and view["details"]["score"] is None
    assert view["row"]["problem_id"] == "<script>alert(1)</script>"  # text: the page shows it as such
    skipped = get([root], "/api/run", run=run["id"])["skipped"]
    assert [s.split(":")[0] for s in skipped] == [f"line {len(lines) + i}" for i in (2, 3, 4)]


def test_a_folder_without_plan_or_summary_has_no_planned_count(runs, tmp_path):
    folder, _ = _copy_run(runs, tmp_path)
    (folder / "plan.json").unlink()  # a folder of an earlier version, running
    catalog = Catalog([tmp_path / "out"], min_interval_s=0)
    catalog.refresh(force=True)
    (run,) = catalog.runs.values()
    assert run.stats()["planned"] is None


def test_a_training_runs_evaluations_are_listed_beside_it(runs, tmp_path):
    """Issue 44 item 1: a mars-train folder (its steps and the evaluation figures it logged)
    and its evaluation points, the run folders under TRAIN/evals/step-N/, each in the list;
    its checkpoints (a model's config.json) are not taken for run folders."""
    out = tmp_path / "out"
    train = out / "train"
    train.mkdir(parents=True)
    shutil.copy(runs / "train" / "metrics.jsonl", train / "metrics.jsonl")
    src = next((runs / "mas").glob("arith-single-base-model-*"))
    shutil.copytree(src, train / "evals" / "step-000010" / src.name)
    (train / "checkpoints" / "step-000010").mkdir(parents=True)
    (train / "checkpoints" / "step-000010" / "config.json").write_text('{"model_type": "llama"}')
    listing = get([out], "/api/runs")
    assert listing["bad"] == []
    by_id = {r["id"]: r for r in listing["runs"]}
    evaluation = f"out/train/evals/step-000010/{src.name}"
    assert {k: r["kind"] for k, r in by_id.items()} == {"out/train": "train", evaluation: "mas"}
    summary = json.loads((src / "summary.json").read_text())
    point = by_id[evaluation]
    assert point["group"] == "out/train/evals/step-000010" and point["done"] == N
    assert point["accuracy"] == pytest.approx(summary["accuracy"])
    metrics = [json.loads(line) for line in (train / "metrics.jsonl").read_text().splitlines()]
    logged = [m for m in metrics if any(k.startswith("eval/") for k in m)]
    assert by_id["out/train"]["steps"] == len(metrics) and logged
    shown = get([out], "/api/run", run="out/train")["eval_points"]
    assert [p["step"] for p in shown] == [m["step"] for m in logged][-20:]
    assert shown[0]["eval/mean_normalized"] == logged[0]["eval/mean_normalized"]
