"""The Python API checks what the CLI checks, by the same declarations: a bad keyword argument
to `mars_eval.evaluate` or `mars_eval.play` raises ConfigError with the CLI's one-line message
before any run folder is made (no TypeError from deep inside, no value converted silently)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import mars_eval
from mars_eval.models.base import ConfigError

NAN, INF = math.nan, math.inf

EVALUATE_BAD: list[tuple[dict[str, Any], str]] = [
    ({"temperature": -1}, "--temperature must be at least 0"),
    ({"temperature": NAN}, "--temperature must be a finite number"),
    ({"top_p": 2}, "--top-p must be in (0, 1]"),
    ({"top_p": INF}, "--top-p must be a finite number"),
    ({"presence_penalty": -INF}, "--presence-penalty must be a finite number"),
    ({"min_p": NAN}, "--min-p must be a finite number"),
    ({"top_k": 1.5}, "--top-k must be an integer"),
    ({"max_tokens": 0}, "--max-tokens must be at least 1"),
    ({"thinking": "no"}, "--thinking must be true or false"),
    ({"seed": "x"}, "--seed must be an integer"),
    ({"seed": 1.5}, "--seed must be an integer"),
    ({"limit": 0}, "--limit must be at least 1"),
    ({"limit": "3"}, "--limit must be an integer"),
    ({"samples": True}, "--samples must be an integer"),
    ({"concurrency": -1}, "--concurrency must be at least 1"),
    ({"request_timeout": NAN}, "--request-timeout must be a finite number"),
    ({"max_attempts": 0}, "--max-attempts must be at least 1"),
    ({"fresh": "yes"}, "--fresh must be true or false"),
    ({"output": 3}, "--output must be text"),
    ({"engine": "gpu"}, "unknown --engine 'gpu'"),
    ({"http_client": "x"}, "unknown --http-client 'x'"),
    ({"sampling": "x"}, "unknown --sampling 'x'"),
    ({"task_prompt": "x"}, "unknown --task-prompt 'x'"),
    ({"prompts": "no-such-pack"}, "no prompt pack 'no-such-pack'"),
    ({"match_system": "nope"}, "unknown --match-system 'nope'"),
    ({"base_url": 5}, "base_url must be text or a list of text"),
    ({"base_url": ["http://127.0.0.1:9/v1", 3]}, "base_url must be text or a list of text"),
    ({"model": 7}, "model must be text"),
    ({"system": 3}, "system must be text"),
    ({"task": 5}, "task must be text"),
    ({"task": "nope"}, "unknown task 'nope'"),
    ({"system": "nope"}, "unknown system 'nope'"),
    ({"problem_ids": 5}, "problem_ids must be text or a list of text"),
    ({"data_files": 3}, "data_files must be text"),
    ({"system": "mad", "rounds": "x"}, "--rounds must be int"),
    ({"system": "mad", "rounds": 0}, "--rounds must be at least 1"),
    ({"system": "mad", "mad_stop": "bogus"}, "unknown --mad-stop 'bogus'"),
    ({"system": "vote", "votes": 0}, "--votes must be at least 1"),
    ({"no_such_option": 1}, "no chosen system has an option 'no_such_option'"),
]


@pytest.mark.parametrize(("bad", "message"), EVALUATE_BAD, ids=lambda x: str(x)[:40])
def test_evaluate_refuses_bad_arguments_before_any_folder(bad, message, tmp_path: Path) -> None:
    output = tmp_path / "runs"
    kwargs = {"model": "m", "base_url": "http://127.0.0.1:9/v1", "output": str(output), **bad}
    with pytest.raises(ConfigError) as caught:
        mars_eval.evaluate(**kwargs)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert not output.exists()


PLAY_BAD: list[tuple[dict[str, Any], str]] = [
    ({"episodes": 0}, "--episodes must be at least 1"),
    ({"episodes": "3"}, "--episodes must be an integer"),
    ({"seed": "x"}, "--seed must be an integer"),
    ({"temperature": NAN, "agent": None, "model": "m"}, "--temperature must be a finite number"),
    ({"thinking": "no", "agent": None, "model": "m"}, "--thinking must be true or false"),
    ({"output": 3}, "--output must be text"),
    ({"games": 3}, "--games must be text"),
    ({"games": "nope"}, "unknown game 'nope'"),
    ({"agent": "nope"}, "unknown agent 'nope'"),
    ({"base_url": 3}, "base_url must be text or a list of text"),
    ({"held_out": "yes"}, "--held-out must be true or false"),
    ({"no_such_option": 1}, "play() has no option 'no_such_option'"),
]


@pytest.mark.parametrize(("bad", "message"), PLAY_BAD, ids=lambda x: str(x)[:40])
def test_play_refuses_bad_arguments_before_any_folder(bad, message, tmp_path: Path) -> None:
    output = tmp_path / "runs"
    kwargs = {"agent": "random", "output": str(output), **bad}
    with pytest.raises(ConfigError) as caught:
        mars_eval.play(**kwargs)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert not output.exists()


def test_system_option_refuses_nan_for_a_float_option() -> None:
    from dataclasses import dataclass

    from mars_eval.mas.system import option, option_specs

    @dataclass
    class Options:
        weight: float = option(0.5, "a weight")

    (spec,) = option_specs(Options)
    for bad in ("nan", "inf", NAN, -INF):
        with pytest.raises(ConfigError, match="must be a finite number"):
            spec.convert(bad)
    assert spec.convert("0.25") == 0.25 and spec.convert(1) == 1.0
