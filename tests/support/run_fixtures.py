"""Run folders for report and export tests, made in-process in about a second.

`make_runs(root)` writes, under root: mas runs of two models x (single, mad) on arith with known
accuracies, a checkpoint series (.../checkpoints/step-N) of `single`, one errored sample, a
reply carrying HTML/script (it must show as text), a games run of a built-in agent, and a
mars-train folder with metrics.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from mars_eval.models.base import ChatResponse, Message, ModelAccessError, SamplingParams
from mars_eval.run.games_runner import run_games
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task
from tests.support.games_config import games_config

N = 6
REPO = Path(__file__).resolve().parents[2]
INJECTION = "<script>console.error('injected')</script><img src=x onerror=\"console.error('img')\">"


class FakeModel:
    """Answers arith: wrong on the problem indices in `wrong`, a model error on `broken`."""

    def __init__(self, model: str, wrong: set[int], broken: set[int] = frozenset()):
        self.model = model
        self.wrong, self.broken = wrong, broken
        problems = make_task("arith").load()[:N]
        self.index = {p.question: (i, p.gold) for i, p in enumerate(problems)}

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        text = "\n".join(m["content"] for m in messages)
        i, gold = next(v for q, v in self.index.items() if q in text)
        if i in self.broken:
            raise ModelAccessError("HTTP 500 after 6 attempts")
        answer = str(int(gold) + 1) if i in self.wrong else gold
        if messages[0]["content"].startswith("You are a moderator"):
            verdict = {
                "Whether there is a preference": "Yes",
                "Supported Side": "Affirmative",
                "debate_answer": answer,
            }
            return ChatResponse(
                content=json.dumps(verdict), thinking="weighing", prompt_tokens=50, completion_tokens=9
            )
        extra = f" {INJECTION}" if i == 0 else ""
        return ChatResponse(
            content=f"So the answer is \\boxed{{{answer}}}.{extra}",
            thinking=f"SECRET thinking about {i}",
            prompt_tokens=40,
            completion_tokens=12,
        )

    async def check(self) -> None: ...

    async def aclose(self) -> None: ...


# model -> (wrong problem indices): accuracies 5/6, 3/6; checkpoints 2/6, 4/6, 6/6.
MODELS = {"base-model": {1}, "trained-model": {1, 2, 3}}
STEPS = {0: {0, 1, 2, 3}, 10: {0, 1}, 20: set()}


def _cfg(root: Path, system: str, model: str) -> EvalConfig:
    return EvalConfig(
        task="arith",
        system=system,
        model=model,
        limit=N,
        output=str(root),
        params=SamplingParams(max_tokens=64),
    )


async def _make_mas(root: Path) -> None:
    for model, wrong in MODELS.items():
        for system in ("single", "mad"):
            broken = {5} if (model, system) == ("trained-model", "single") else set()
            await run_eval(_cfg(root, system, model), client=FakeModel(model, wrong, broken), progress=False)
    for step, wrong in STEPS.items():
        model = f"runs/train/checkpoints/step-{step}"
        await run_eval(_cfg(root / "series", "single", model), client=FakeModel(model, wrong), progress=False)


def make_runs(root: Path) -> Path:
    """Write every kind of run folder under `root` and return it."""
    root.mkdir(parents=True, exist_ok=True)
    asyncio.run(_make_mas(root / "mas"))
    games = games_config(root / "games", games="kuhn_poker", agent="random", episodes=4)
    asyncio.run(run_games(games, progress=False))
    train = root / "train"
    train.mkdir()
    shutil.copy(REPO / "results" / "tiny-train-metrics.jsonl", train / "metrics.jsonl")
    return root
