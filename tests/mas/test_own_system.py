"""Your own system from a file (docs/examples/critique.py, the example docs/systems.md shows),
through the CLI as a user runs it: mas, -S, resume, suite and report; and the Python API."""

from __future__ import annotations

import json
from pathlib import Path

from mars_eval.tasks import make_task
from tests.support.cli import run_cli
from tests.support.scripted_policy import Reply, ScriptedRequest

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "critique.py"
SPEC = f"{EXAMPLE}:Critique"
N = 3


class CritiquePolicy:
    """The solver answers each arith problem right; the critic finds nothing wrong."""

    def __init__(self) -> None:
        self.golds = {p.question: p.gold for p in make_task("arith").load()[:N]}

    def __call__(self, req: ScriptedRequest) -> Reply:
        prompt = req.prompt
        if "Point out any error" in prompt:
            return Reply(content="I see no error.")
        gold = next(g for q, g in self.golds.items() if q in prompt)
        return Reply(content=f"The answer is \\boxed{{{gold}}}.")


def _mas(url: str, out: Path, *extra: str) -> list[str]:
    base = ["mas", "--system", SPEC, "--task", "arith", "--limit", str(N), "--model", "scripted-model"]
    return [*base, "--base-url", url, "--output", str(out), "--no-thinking", "--json", *extra]


def test_a_system_from_a_file_runs_resumes_and_reports(scripted_server, tmp_path):
    srv = scripted_server(CritiquePolicy())
    out = tmp_path / "runs"
    first = run_cli(_mas(srv.base_url, out))
    assert first.returncode == 0, first.describe()
    summary = first.summary
    assert summary["system"] == "critique" and summary["accuracy"] == 1.0
    assert summary["llm_calls"] == N * 3 and len(srv.entries()) == N * 3  # answer, critique, revision
    run_dir = Path(summary["run_dir"])
    assert run_dir.name.startswith("arith-critique-")
    config = json.loads((run_dir / "config.json").read_text())
    assert config["rounds"] == 1 and config["protocol"] == 1  # the declaration is the identity

    again = run_cli(_mas(srv.base_url, out))  # resume: nothing is sent again
    assert again.returncode == 0, again.describe()
    assert again.summary["run_dir"] == summary["run_dir"] and len(srv.entries()) == N * 3

    more = run_cli(_mas(srv.base_url, out, "-S", "rounds=2"))  # another option value: a new run
    assert more.returncode == 0, more.describe()
    assert more.summary["run_dir"] != summary["run_dir"] and more.summary["llm_calls"] == N * 5

    bad = run_cli(_mas(srv.base_url, out, "-S", "rounds=-1"))
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --rounds must be at least 0, got -1"
    unused = run_cli(_mas(srv.base_url, out, "--votes", "3"))
    assert unused.returncode == 2 and "--votes is used by vote only" in unused.stderr

    suite = run_cli(
        ["suite", "--system", SPEC, "--system", "single", "--task", "arith", "--limit", str(N)]
        + ["--model", "scripted-model", "--base-url", srv.base_url, "--output", str(out), "--no-thinking"]
    )
    assert suite.returncode == 0, suite.describe()
    assert "critique" in suite.stdout and len(srv.entries()) == N * 3 + N * 5 + N  # critique resumed

    page = tmp_path / "report.html"
    report = run_cli(["report", str(out), "--out", str(page)])
    assert report.returncode == 0, report.describe()
    assert "critique" in page.read_text(encoding="utf-8")


def test_the_python_api_runs_the_same_run_folder(scripted_server, tmp_path, forget_file_systems):
    import mars_eval

    srv = scripted_server(CritiquePolicy())
    out = tmp_path / "runs"
    result = mars_eval.evaluate(
        system=SPEC,
        task="arith",
        model="scripted-model",
        base_url=srv.base_url,
        limit=N,
        output=str(out),
        thinking=False,
        rounds=1,
    )
    assert result.schema_version == 1 and result.accuracy == 1.0
    assert [s.correct for s in result.samples] == [True] * N and not result.failures
    assert all(len([e for e in s.transcript if "agent" in e]) == 3 for s in result.samples)
    cli = run_cli(_mas(srv.base_url, out))  # the CLI resumes what the API ran
    assert cli.returncode == 0 and cli.summary["run_dir"] == str(result.run_dir)
    assert len(srv.entries()) == N * 3
    assert json.loads(mars_eval.api.to_json(result))["summary"]["accuracy"] == 1.0
