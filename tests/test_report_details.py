"""Report details a reader relies on (issue 16, item 10): the figures' sources ship with the
package and the report cites them there; a vote's transcript lists its voters in order."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_aime_set

MODEL = "scripted-model"


def test_the_cited_reference_ships_and_voters_are_listed_in_order(tmp_path, scripted_server):
    doc = resources.files("mars_eval.analysis").joinpath("reference_sources.md")
    assert doc.is_file() and "arXiv:2510.15414" in doc.read_text(encoding="utf-8")
    aime = write_aime_set(tmp_path / "aime.jsonl", n=2)
    # The first call to arrive is the slowest and the last the fastest, so the voters are stored
    # in the reverse of their arrival order (which is voter order unless the loop reordered them).
    srv = scripted_server(aime.policy, latency=lambda req: {0: 0.8, 1: 0.4}.get(req.index, 0.0))
    out = tmp_path / "runs"
    extra = ["--votes", "3", "--limit", "1"]
    res = run_cli(
        mas_args(
            model=MODEL,
            base_urls=[srv.base_url],
            output=out,
            data_files=aime.path,
            system="vote",
            extra=extra,
        )
    )
    assert res.returncode == 0, res.describe()
    stored = Path(res.summary["run_dir"], "samples.jsonl").read_text()
    stored_order = sorted(range(3), key=lambda i: stored.index(f'"voter{i}"'))
    assert stored_order != [0, 1, 2]  # stored as they finished, not in voter order

    report = run_cli(["report", str(out), "--out", str(tmp_path / "r.md")])
    assert report.returncode == 0, report.describe()
    text = (tmp_path / "r.md").read_text()
    assert "mars_eval/analysis/reference_sources.md" in text and "shared/docs" not in text
    single = mas_args(model=MODEL, base_urls=[srv.base_url], output=out, data_files=aime.path)
    assert run_cli(single).returncode == 0  # both problems: the vote column lacks the second
    page = run_cli(["report", str(out), "--out", str(tmp_path / "r.html")])
    assert page.returncode == 0, page.describe()
    assert 'class="missing"' in (tmp_path / "r.html").read_text()  # the grid's gap has its legend
    assert "no sample: that run did not include the problem" in (tmp_path / "r.html").read_text()
    [transcript] = [p for p in (tmp_path / "r_files").rglob("*.html") if "vote" in str(p)]
    html = transcript.read_text()
    assert html.index("voter0") < html.index("voter1") < html.index("voter2")
