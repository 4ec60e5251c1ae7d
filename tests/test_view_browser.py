"""`mars-eval view` in real headless Chromium: the list follows a run folder as a test writes
its samples (no reload), a sample's transcript shows every agent's messages, an injected
`<script>` / `<img onerror>` in a reply does not run, and no page logs a console error."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.browser import chromium_path, load_page
from tests.support.run_fixtures import INJECTION, make_runs
from tests.support.viewer import running_viewer

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (.ci/run installs it)"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return make_runs(tmp_path_factory.mktemp("viewb") / "runs")


def test_the_list_follows_a_folder_as_it_fills(runs, tmp_path):
    src = next((runs / "mas").glob("arith-mad-base-model-*"))
    out = tmp_path / "out"
    folder = out / src.name
    shutil.copytree(src, folder)
    lines = (folder / "samples.jsonl").read_bytes().splitlines(keepends=True)
    (folder / "samples.jsonl").write_bytes(lines[0])
    (folder / "summary.json").unlink()
    done = "document.querySelector('#runs tr[data-run] td.done').textContent"

    def write(n: int):
        def step() -> None:
            with open(folder / "samples.jsonl", "ab") as f:
                f.write(b"".join(lines[n : n + 2]))

        return step

    def damage() -> None:
        with open(folder / "samples.jsonl", "ab") as f:
            f.write(b"{torn by hand}\n")

    with running_viewer([out]) as url:
        page = load_page(
            url,
            {
                "done": done,
                "draws": "window.viewDraws",
                "skipped": "document.querySelector('#runs tr[data-run] td:last-child').textContent",
            },
            steps=[
                f"{done} === '1 / {len(lines)}'",  # planned: the run's plan.json
                write(1),
                f"{done} === '3 / {len(lines)}'",
                write(3),
                damage,
                f"{done} === '5 / {len(lines)}'",
            ],
        )
    assert page.console_errors == []
    assert page.values["done"] == f"5 / {len(lines)}" and page.values["skipped"] == "1"
    assert page.values["draws"] >= 3  # drawn again on each change, never reloaded


def test_a_sample_shows_every_agent_and_runs_no_injected_markup(runs, tmp_path):
    with running_viewer([runs]) as url:
        listing = json.loads(_get(url + "api/runs"))
        mad = next(r["id"] for r in listing["runs"] if r["system"] == "mad" and r["model"] == "base-model")
        samples = json.loads(_get(url + f"api/samples?run={quote(mad)}"))
        key = samples["rows"][0]["key"]  # problem 0: its replies carry INJECTION
        sample_url = url + f"sample?run={quote(mad)}&key={quote(key)}"
        page = load_page(
            sample_url,
            {
                "agents": "[...document.querySelectorAll('#transcript .turn')].map(t => t.dataset.agent)",
                "replies": "[...document.querySelectorAll('pre.reply')].map(p => p.textContent)",
                "scripts": "document.querySelectorAll('#app script, #app img').length",
                "matrix": "document.querySelectorAll('#matrix tbody tr').length",
                "verdict": "document.getElementById('verdict').textContent",
                "thinking_folded": "[...document.querySelectorAll('details.thinking')].every(d => !d.open)",
            },
            steps=["window.viewDraws >= 1"],
        )
        listed = load_page(
            url,
            {"rows": "document.querySelectorAll('#runs tr[data-run]').length"},
            steps=["window.viewDraws >= 1"],
        )
        run_page = load_page(
            url + f"run?run={quote(mad)}&filter=wrong",
            {
                "rows": "document.querySelectorAll('#samples tr.sample').length",
                "filter": "document.querySelector('select[name=filter]').value",
            },
            steps=["window.viewDraws >= 1"],
        )
        a = mad
        b = next(r["id"] for r in listing["runs"] if r["system"] == "mad" and r["model"] == "trained-model")
        compared = load_page(
            url + f"compare?a={quote(a)}&b={quote(b)}",
            {
                "pairs": "document.querySelectorAll('#pairs tr.pair').length",
                "paired": "document.getElementById('paired').textContent",
            },
            steps=["window.viewDraws >= 1"],
        )
    assert page.console_errors == []  # the reply's <script> and onerror did not run
    assert page.values["agents"] == ["affirmative", "negative", "moderator"]
    assert INJECTION in page.values["replies"][0] and page.values["scripts"] == 0
    assert page.values["matrix"] == 1 and page.values["verdict"] == "right" and page.values["thinking_folded"]
    assert listed.console_errors == [] and listed.values["rows"] == 9
    assert run_page.console_errors == [] and (run_page.values["rows"], run_page.values["filter"]) == (
        1,
        "wrong",
    )
    assert compared.console_errors == [] and compared.values["pairs"] == 2
    assert "B − A -33.3 points" in compared.values["paired"]


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - the local test server
        return r.read().decode()


def test_a_running_mas_run_is_followed_until_it_ends(tmp_path):
    """A real run (the run store, its lock and its summary) writes while the page is open."""
    import asyncio
    import threading

    from mars_eval.models.base import SamplingParams
    from mars_eval.run.runner import EvalConfig, run_eval
    from tests.support.run_fixtures import FakeModel, N

    gate = threading.Semaphore(0)

    class Gated(FakeModel):
        async def chat(self, messages, params):
            await asyncio.to_thread(gate.acquire)
            return await super().chat(messages, params)

    out = tmp_path / "runs"
    out.mkdir()
    cfg = EvalConfig(
        task="arith", system="single", model="m", limit=N, output=str(out), params=SamplingParams()
    )
    worker = threading.Thread(
        target=lambda: asyncio.run(run_eval(cfg, client=Gated("m", {1}), progress=False)), daemon=True
    )
    row = "document.querySelector('#runs tr[data-run]')"
    done = f"{row} && {row}.querySelector('td.done').textContent"
    running = f"!!({row} && {row}.querySelector('.running'))"

    def release(n: int):
        return lambda: [gate.release() for _ in range(n)]

    with running_viewer([out]) as url:
        worker.start()
        page = load_page(
            url,
            {"done": done, "running": running, "acc": f"{row}.querySelector('td.acc').textContent"},
            steps=[
                f"{running} && {done} === '0 / {N}'",  # planned as it started (plan.json)
                release(2),
                f"{done} === '2 / {N}'",
                release(N),
                f"{done} === '6 / 6' && !{running}",
            ],
        )
        worker.join(30)
    assert page.console_errors == []
    assert (page.values["done"], page.values["running"]) == ("6 / 6", False)
    assert page.values["acc"].startswith("83.3 [")  # 5 of 6, with the summary's interval


@pytest.mark.cli  # two CLI subprocesses: `view` and `mas` (imported inside, so said here)
def test_mas_in_the_background_is_followed_by_the_view_command(tmp_path, scripted_server):
    """Issue 44's "done when", as a user types it: `mars-eval view DIR` (the command, in its
    own process) and `mars-eval mas ... --output DIR &` started after the page is open; the
    page shows the run appear, fill while it is marked running, and end, without a reload."""
    import concurrent.futures
    import re
    import signal

    from tests.support.cli import mas_args, start_cli
    from tests.support.datasets import write_aime_set

    n = 12
    aime = write_aime_set(tmp_path / "aime.jsonl", n=n, wrong=[3])
    srv = scripted_server(aime.policy, latency=0.4)  # at least 0.4 s a sample: a window to see it fill
    out = tmp_path / "runs"
    out.mkdir()
    view = start_cli(["view", str(out), "--port", "0"])
    mas: list = []
    row = "document.querySelector('#runs tr[data-run]')"
    done = f"({row} ? {row}.querySelector('td.done').textContent : '')"
    running = f"!!({row} && {row}.querySelector('.running'))"

    def start_mas() -> None:
        args = mas_args(model="scripted-model", base_urls=[srv.base_url], output=out, data_files=aime.path)
        mas.append(start_cli([*args, "--concurrency", "1"], stdout=subprocess.DEVNULL))

    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            line = pool.submit(view.stdout.readline).result(timeout=60)
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line
        page = load_page(
            url.group(0),
            {
                "done": done,
                "running": running,
                "acc": f"{row}.querySelector('td.acc').textContent",
                "same_document": "window.sameDocument === true",
            },
            steps=[
                "window.viewDraws >= 1 && (window.sameDocument = true)",  # gone if the page reloads
                f"!{row}",  # nothing under DIR yet
                start_mas,
                f"{running} && /^([1-9]|1[01]) \\/ {n}$/.test({done})",  # part done, still running
                f"parseInt({done}) >= {n // 2}",
                f"{done} === '{n} / {n}' && !{running}",
            ],
            timeout=90,
        )
        assert mas[0].wait(60) == 0, mas[0].stderr.read()
        summary = json.loads(next(out.glob("*/summary.json")).read_text())
        view_ok = view.poll() is None
    finally:
        for proc in [*mas, view]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
    assert view_ok  # the viewer served the whole run
    assert page.console_errors == []  # every wait above was met (a timed-out wait is listed here)
    assert (page.values["done"], page.values["running"]) == (f"{n} / {n}", False)
    assert page.values["same_document"]  # followed live: never reloaded
    accuracy = summary["accuracy"]
    assert accuracy == pytest.approx((n - 1) / n)
    assert page.values["acc"].startswith(f"{100 * accuracy:.1f} [")


def test_markup_in_ids_names_and_errors_shows_as_text(runs, tmp_path):
    """The report's XSS checks on the viewer's other texts: a model name (the list), a problem id,
    an answer, a gold and an error (a run's rows and a sample's page) holding `<script>` and
    `<img onerror>` are shown as written and run nothing."""
    src = next((runs / "mas").glob("arith-mad-base-model-*"))
    folder = tmp_path / "out" / src.name
    shutil.copytree(src, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model": INJECTION}))
    rec = json.loads((folder / "samples.jsonl").read_bytes().splitlines()[1])
    odd = {**rec, "key": "odd#0", "problem_id": INJECTION, "answer": INJECTION, "gold": INJECTION}
    odd.update(correct=False, error=f"HTTP 500: {INJECTION}", traceback=INJECTION)
    with open(folder / "samples.jsonl", "ab") as f:
        f.write((json.dumps(odd) + "\n").encode())
    seen = {
        "text": "document.getElementById('app').textContent",
        "markup": "document.querySelectorAll('#app script, #app img').length",
    }
    with running_viewer([tmp_path / "out"]) as url:
        (run,) = json.loads(_get(url + "api/runs"))["runs"]
        assert run["model"] == INJECTION and run["skipped_lines"] == 0  # the line is a record
        pages = [
            load_page(url + path, seen, steps=["window.viewDraws >= 1"])
            for path in (
                "",
                f"run?run={quote(run['id'])}&filter=errored",
                f"sample?run={quote(run['id'])}&key=odd%230",
            )
        ]
    for page, least in zip(pages, (1, 2, 4), strict=True):
        assert page.console_errors == []  # neither the <script> nor the onerror ran
        assert page.values["markup"] == 0
        assert page.values["text"].count(INJECTION) >= least, page.values["text"]
