"""What a new user reads first (issue 10, items 12 and 13): `--version`, `mars-eval list`, every
option's default in --help, mars-train's help in mars-eval's style, and a README whose quick
start says what the embedded model does and shows a command where it does it."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest
import typer

from mars_eval.cli import app
from mars_eval.cli.info_cmds import catalogue
from tests.support.cli import cli_env, run_cli

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def test_version_flag() -> None:
    res = run_cli(["--version"], timeout=60)
    assert res.returncode == 0, res.describe()
    assert res.stdout.strip() == f"mars-eval {version('mars-eval')}"


def test_list_json_matches_the_registries() -> None:
    from mars_eval.games import ALL_GAMES
    from mars_eval.mas import SYSTEM_NAMES
    from mars_eval.tasks import TASK_NAMES, make_task
    from training.config import PRESETS

    data = catalogue()
    tasks = {t["task"]: t for t in data["tasks"]}
    assert list(tasks) == list(TASK_NAMES)
    sizes = {name: t["problems"] for name, t in tasks.items()}
    known = {"aime24": 30, "aime25": 30, "math500": 500, "gpqa-diamond": 198, "arith": 30}
    assert {k: sizes[k] for k in known} == known
    assert sizes.pop("custom") is None  # the user's own file: no size to list
    assert all(isinstance(n, int) and n > 0 for n in sizes.values()), sizes  # variants too
    for name in ("aime24", "aime25", "math500", "gpqa-diamond"):
        assert tasks[name]["source"].startswith(make_task(name).source.repo)
    assert "aime" in tasks["aime24"]["aliases"] and "gpqa" in tasks["gpqa-diamond"]["aliases"]
    assert [s["system"] for s in data["systems"]] == list(SYSTEM_NAMES)
    assert [g["game"] for g in data["games"]] == list(ALL_GAMES)
    assert [p["preset"] for p in data["presets"]] == list(PRESETS)
    assert {"mcts<N>", "cfr", "equilibrium", "random", "self"} == set(data["opponents"])


def test_listed_task_sizes_match_the_offline_copies(shared_data: Path) -> None:
    sizes = {t["task"]: t["problems"] for t in catalogue()["tasks"]}
    for task, name in (("aime24", "aime24.jsonl"), ("aime25", "aime25.jsonl"), ("math500", "math500.jsonl")):
        rows = [ln for ln in (shared_data / name).read_text().splitlines() if ln.strip()]
        assert sizes[task] == len(rows), task


def test_listed_system_defaults_are_the_systems_own() -> None:
    """`list` shows each system's options with the defaults the built system has."""
    from mars_eval.mas import make_system

    listed = {s["system"]: s["options"] for s in catalogue()["systems"]}
    assert listed["mad"] == {
        "--rounds": "3",
        "--mad-judge": "first-round",
        "--mad-stop": "reference",
        "--mad-verdict": "reference",
    }
    mad = make_system("mad")
    defaults = (mad.rounds, mad.mad_judge, mad.mad_stop, mad.mad_verdict)
    assert defaults == (3, "first-round", "reference", "reference")
    assert listed["autogen"]["--rounds"] == str(make_system("autogen").rounds)
    assert listed["autogen"]["--autogen-style"] == make_system("autogen").style
    assert listed["vote"] == {"--votes": "the matched run's calls per sample"}
    assert listed["self-consistency"] == {"--samples-per-answer": str(make_system("self-consistency").votes)}
    dylan = make_system("dylan")
    assert listed["dylan"] == {
        "--agents": str(dylan.agents),
        "--dylan-variant": dylan.dylan_variant,
        "--dylan-shuffle": dylan.dylan_shuffle,
        "--dylan-agreement": dylan.dylan_agreement,
    }
    av = make_system("agentverse")
    assert listed["agentverse"] == {
        "--rounds": str(av.rounds),
        "--agents": str(av.agents),
        "--turns": str(av.turns),
    }
    net = make_system("macnet")
    assert listed["macnet"] == {
        "--agents": str(net.agents),
        "--topology": net.topology,
        "--macnet-handoff": net.handoff,
    }


def test_list_prints_every_section_with_options_literal() -> None:
    res = run_cli(["list"], timeout=60)
    assert res.returncode == 0, res.describe()
    for needle in ("tasks", "systems", "games", "opponents", "training presets", "HuggingFaceH4/aime_2024"):
        assert needle in res.stdout
    assert "--mad-judge [first-round]" in res.stdout  # "[first-round]" is not eaten as markup
    for preset in ("qwen3-4b", "tiny", "micro"):
        assert re.search(rf"^ {re.escape(preset)}\s", res.stdout, re.M), preset
    assert json.loads(run_cli(["list", "--json"], timeout=60).stdout)["version"] == version("mars-eval")


def test_help_shows_every_options_default() -> None:
    """Every option of every command (those added later too) says its default in --help."""
    group = typer.main.get_command(app)
    assert {"mas", "games", "serve", "list", "suite", "plan", "compare"} <= set(group.commands)
    missing = []
    for name, sub in group.commands.items():
        ctx = type(group).context_class(sub, info_name=name)
        for param in sub.params:
            if param.param_type_name != "option" or param.name == "help":
                continue
            record = param.get_help_record(ctx)
            if record is None or not ("default:" in record[1] or "required" in record[1]):
                missing.append(f"{name} {param.opts[0]}")
            # Rich reads "[word...]" in a help text as a markup tag and drops it from --help
            # (report --out's "[default: DIR/report.html]" vanished): defaults go in show_default.
            if re.search(r"\[[A-Za-z/@#]", getattr(param, "help", None) or ""):
                missing.append(f"{name} {param.opts[0]} (markup in the help text)")
    assert not missing, f"--help shows no default for: {', '.join(missing)}"


def test_mas_and_suite_share_the_sampling_options() -> None:
    """One declaration (mars_eval.cli.options): the two commands' help cannot drift apart."""
    group = typer.main.get_command(app)
    shared = ("--temperature", "--top-p", "--top-k", "--min-p", "--max-tokens", "--rounds", "--votes")

    def records(command: str) -> dict[str, tuple[str, str]]:
        sub = group.commands[command]
        ctx = type(group).context_class(sub, info_name=command)
        return {p.opts[0]: p.get_help_record(ctx) for p in sub.params if p.opts[0] in shared}

    assert records("mas") == records("suite")
    assert "[default: (0.6; 0.7 with --no-thinking)]" in records("mas")["--temperature"][1]


def test_mars_train_help_in_mars_eval_style() -> None:
    import subprocess
    import sys

    from training.cli import make_parser

    parser = make_parser()
    for action in parser._actions:
        if action.dest in ("help", "version"):  # no default to show
            continue
        assert parser.default_text(action) is not None or "default:" in (action.help or ""), action.dest
    script = Path(sys.executable).with_name("mars-train")
    env = cli_env(COLUMNS="200")
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Usage: mars-train [OPTIONS] [KEY=VALUE]..."
    assert any(ln.startswith("╭─ Options") for ln in lines)
    assert "--preset" in out.stdout and "[default: the preset's]" in out.stdout
    bad = subprocess.run([str(script), "--steps", "x"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_readme_mentions_every_preset_and_what_the_tiny_model_is() -> None:
    from training.config import PRESETS

    training_doc = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    for name in PRESETS:  # the presets' page (issue 31 moved them out of the README)
        assert f"--preset {name}" in training_doc, name
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "tic-tac-toe" in quick and "not a\nmath model" in quick
    assert "mars-eval games --games tic_tac_toe --opponents random --model results/tiny" in quick
    assert "mars-eval list" in quick and "--version" in quick
    # issues 25 and 39: the first block pulls a real model, runs one agent and a multi-agent
    # system on the same one-step problems (side by side, one model in memory), compares the two
    first = re.search(r"```bash\n(.*?)\n```", quick, re.S).group(1).splitlines()
    assert "mars-eval models pull smollm2-135m-instruct" in first[0]
    both = "suite --system single --system debate --task arith --arith-steps 1 --model smollm2-135m-instruct"
    assert both in first[1]
    assert "mars-eval compare runs/quick/arith-single-* runs/quick/arith-debate-*" in first[2]


@pytest.mark.slow
def test_quick_start_games_command_beats_random(tmp_path: Path) -> None:
    """The README's quick-start game (fewer episodes): the tiny model's mean return over both
    seats is clearly above a random player's (about -0.05; the model measured +0.28)."""
    quick = README.split("## Quick start", 1)[1]
    command = re.search(r"mars-eval (games [^\n]*--model results/tiny[^\n]*)", quick).group(1).split()
    assert command[command.index("--episodes") + 1] == "200"
    command[command.index("--episodes") + 1] = "60"
    res = run_cli([*command, "--output", str(tmp_path), "--json"], timeout=600)
    assert res.returncode == 0, res.describe()
    rows = res.summary["results"]
    assert {r["seat"] for r in rows} == {"first", "second"}
    mean = sum(r["mean_return"] for r in rows) / len(rows)
    assert mean > 0.1, rows
    assert all(r["invalid_rate"] < 0.05 for r in rows), rows


def test_shown_defaults_are_the_codes_own() -> None:
    """What --help says a None default stands for is what the code then uses."""
    import inspect

    from mars_eval.models.base import SamplingParams
    from mars_eval.models.http import DEFAULT_CONCURRENCY, HTTPClient

    group = typer.main.get_command(app)
    sub = group.commands["mas"]
    ctx = type(group).context_class(sub, info_name="mas")
    shown = {p.opts[0]: p.get_help_record(ctx)[1] for p in sub.params if p.param_type_name == "option"}

    def default_of(flag: str) -> str:
        return re.search(r"\[default: \((.*)\)\]", shown[flag]).group(1)

    think, plain = SamplingParams.for_mode(True), SamplingParams.for_mode(False)
    assert default_of("--temperature") == f"{think.temperature}; {plain.temperature} with --no-thinking"
    assert default_of("--top-p") == f"{think.top_p}; {plain.top_p} with --no-thinking"
    assert default_of("--top-k") == str(think.top_k) == str(plain.top_k)
    assert float(default_of("--min-p")) == think.min_p == plain.min_p
    assert float(default_of("--presence-penalty")) == think.presence_penalty
    assert default_of("--max-tokens") == str(think.max_tokens) == str(plain.max_tokens)
    init = inspect.signature(HTTPClient.__init__).parameters
    assert float(default_of("--request-timeout")) == init["timeout"].default
    assert int(default_of("--max-attempts")) == init["max_attempts"].default
    assert default_of("--concurrency").startswith(f"{DEFAULT_CONCURRENCY} over HTTP")


def test_help_lists_every_task_alias_and_system_from_the_registries():
    """The --task and --system help of `mas` and `suite` is built from the registries, so a task,
    an alias or a system added there is never missing from --help."""
    import typer

    from mars_eval.cli.application import app
    from mars_eval.mas import SYSTEM_NAMES
    from mars_eval.tasks import TASK_ALIASES, TASK_NAMES

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in ("mas", "suite"):
        helps = {p.name: p.help or "" for p in commands[name].params}
        assert all(t in helps["task"] for t in (*TASK_NAMES, *TASK_ALIASES)), (name, helps["task"])
        assert all(s in helps["system"] for s in SYSTEM_NAMES), (name, helps["system"])
