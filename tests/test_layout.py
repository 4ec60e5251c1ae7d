"""The package layout is the architecture: imports point down the layers, no circles, a lean start.

Layers, lowest first (docs/contributing.md, "Layout"): textsafe, models, prompts, tasks, mas / games, run,
analysis, report, cli. Imports inside functions count, as do TYPE_CHECKING imports.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import cli_env, mars_eval_command
from tests.support.scripted_policy import Reply, ScriptedRequest

ROOT = Path(__file__).resolve().parents[1]
LAYER = {
    "textsafe": 0,
    "gc_pause": 0,
    "paths": 1,  # check_path: raises models.base.ConfigError
    "models": 1,
    "prompts": 1.5,
    "tasks": 2,
    "mas": 3,
    "games": 3,
    "run": 4,
}
LAYER.update(analysis=5, report=6)
LAYER["cli"] = 7
# A run's summary needs neither scipy nor numpy (run/intervals.py): 0.3-0.4 s of CPU (issue 33)
HEAVY = ("matplotlib", "jinja2", "autogen_agentchat", "autogen_core", "scipy", "numpy", "openai", "httpx")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in ("mars_eval", "training"):
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (any import statement anywhere in the file)."""
    mods = _modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for a in node.names:
                    t = known(f"{base}.{a.name}") if f"{base}.{a.name}" in mods else known(base)
                    if t:
                        targets.add(t)
        targets.discard(name)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    assert cycles(import_graph()) == []


def test_imports_point_down_the_layers():
    upward = []
    for src, targets in import_graph().items():
        if not src.startswith("mars_eval."):
            continue
        for dst in targets:
            s, d = src.split(".")[1], dst.split(".")[1] if dst.startswith("mars_eval.") else None
            if d is None or s not in LAYER or d not in LAYER:
                continue
            if LAYER[d] > LAYER[s] or (s == "mas" and d == "games"):
                upward.append(f"{src} -> {dst}")
            if s == "games" and d == "mas" and dst != "mars_eval.mas.base":
                upward.append(f"{src} -> {dst} (games may use only mas.base's SampleContext)")
    assert upward == []


def test_few_modules_at_the_top():
    top = sorted(p.name for p in (ROOT / "mars_eval").glob("*.py"))
    assert len(top) <= 5, top


def test_nothing_empty_is_tracked():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    empty = [f for f in files if (ROOT / f).is_file() and (ROOT / f).stat().st_size == 0]
    assert empty == []


def _policy(req: ScriptedRequest) -> Reply:
    return Reply(content="The answer is \\boxed{7}.")


def test_a_single_run_imports_no_report_or_statistics_library(scripted_server, tmp_path):
    srv = scripted_server(_policy)
    probe = tmp_path / "modules.json"
    # Run the real console entry point in a child that records sys.modules when it exits.
    code = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: open({str(probe)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
        "from mars_eval.cli import main\n"
        "sys.argv = ['mars-eval'] + sys.argv[1:]\n"
        "main()\n"
    )
    args = ["mas", "--system", "single", "--task", "arith", "--limit", "3", "--model", "scripted-model"]
    args += ["--base-url", srv.base_url, "--output", str(tmp_path / "runs"), "--json"]
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=cli_env())
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.strip().splitlines()[-1])["n"] == 3
    loaded = set(json.loads(probe.read_text()))
    assert "mars_eval.run.runner" in loaded  # the probe saw the run
    assert sorted(m for m in HEAVY if m in loaded) == []
    assert mars_eval_command()  # the console script exists for the other CLI tests
