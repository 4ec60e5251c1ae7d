"""`mars-eval`: multi-agent systems on reasoning benchmarks, strategic games, and a vLLM launcher.

Every command turns bad input into one line on stderr and exit code 2, before any work starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Annotated

import typer
from rich.console import Console

from mars_eval.models.base import ConfigError, SamplingParams

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False)

BaseUrl = Annotated[
    list[str] | None,
    typer.Option(
        "--base-url", help="OpenAI-compatible endpoint (repeatable). Omit for the in-process engine."
    ),
]


def _sampling(thinking, temperature, top_p, top_k, min_p, presence_penalty, max_tokens) -> SamplingParams:
    return SamplingParams.for_mode(
        thinking,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        min_p=min_p,
        presence_penalty=presence_penalty,
        max_tokens=max_tokens,
    )


@app.command()
def mas(
    task: Annotated[str, typer.Option(help="aime24 (aime), aime25, gpqa-diamond (gpqa), math500, arith")],
    system: Annotated[str, typer.Option(help="single, mad, autogen, debate, vote")] = "single",
    model: Annotated[str | None, typer.Option(help="Served model name, hub id or local folder")] = None,
    base_url: BaseUrl = None,
    data_files: Annotated[
        str | None, typer.Option(help="Local JSON/JSONL/CSV/Parquet copy of the dataset")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="First N problems only")] = None,
    samples: Annotated[int, typer.Option(help="Samples per problem (K)")] = 1,
    concurrency: Annotated[
        int | None, typer.Option(help="Max calls in flight (default 512 over HTTP)")
    ] = None,
    seed: int = 0,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    presence_penalty: float | None = None,
    max_tokens: int | None = None,
    thinking: Annotated[bool, typer.Option("--thinking/--no-thinking")] = True,
    rounds: Annotated[int | None, typer.Option(help="Debate rounds / conversation turns")] = None,
    agents: Annotated[int | None, typer.Option(help="Agents in a Du-style debate")] = None,
    votes: Annotated[int | None, typer.Option(help="Answers in a majority vote")] = None,
    output: Annotated[str, typer.Option(help="Folder that holds run folders")] = "results/runs",
    fresh: Annotated[bool, typer.Option(help="Start the run over instead of resuming")] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print a JSON summary as the last stdout line")
    ] = False,
    request_timeout: Annotated[float | None, typer.Option(help="Seconds before a call is retried")] = None,
    max_attempts: Annotated[int | None, typer.Option(help="Attempts per call before it is an error")] = None,
    engine: Annotated[str, typer.Option(help="In-process engine: auto, transformers, vllm")] = "auto",
    serve: Annotated[bool, typer.Option("--serve", help="Start `vllm serve --model` around the run")] = False,
    autogen_client: Annotated[
        str,
        typer.Option(
            help="autogen's model client: openai (autogen-ext's, over HTTP), adapter (our model layer), "
            "auto (openai with --base-url, else adapter)"
        ),
    ] = "auto",
) -> None:
    """Run a multi-agent system on a benchmark and report accuracy."""
    from mars_eval.report import print_summary_table
    from mars_eval.runner import EvalConfig, run_eval

    params = _sampling(thinking, temperature, top_p, top_k, min_p, presence_penalty, max_tokens)
    cfg = EvalConfig(
        task=task,
        system=system,
        model=model,
        base_urls=list(base_url or []),
        data_files=data_files,
        limit=limit,
        samples=samples,
        concurrency=concurrency,
        seed=seed,
        params=params,
        output=output,
        fresh=fresh,
        rounds=rounds,
        agents=agents,
        votes=votes,
        request_timeout=request_timeout,
        max_attempts=max_attempts,
        engine=engine,
        autogen_client=autogen_client,
    )
    with _maybe_serve(serve, model, cfg):
        summary = asyncio.run(run_eval(cfg))
    print_summary_table(summary, Console())
    if json_out:
        print(json.dumps(summary, default=str), flush=True)


@contextlib.contextmanager
def _maybe_serve(serve: bool, model: str | None, cfg):
    if not serve:
        yield
        return
    from mars_eval.serve import vllm_server

    if not model:
        raise ConfigError("--serve needs --model")
    with vllm_server(model) as url:
        cfg.base_urls = [url]
        yield


@app.command()
def games(
    games: Annotated[str | None, typer.Option(help="Comma-separated game names")] = None,
    train: Annotated[bool, typer.Option("--train", help="The three training games (default)")] = False,
    held_out: Annotated[bool, typer.Option("--held-out", help="The three held-out games")] = False,
    model: Annotated[str | None, typer.Option(help="Served model name, hub id or local folder")] = None,
    base_url: BaseUrl = None,
    agent: Annotated[str | None, typer.Option(help="Built-in agent instead of an LLM: random, mcts")] = None,
    opponents: Annotated[
        str | None, typer.Option(help="Comma-separated opponents (override defaults)")
    ] = None,
    episodes: Annotated[
        int | None, typer.Option(help="Episodes per game, opponent and seat [default: 1000]")
    ] = None,
    seed: int = 0,
    concurrency: Annotated[int | None, typer.Option(help="Episodes/calls in flight")] = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    thinking: Annotated[bool | None, typer.Option("--thinking/--no-thinking")] = None,
    prompt_style: Annotated[str | None, typer.Option(help="full or compact")] = None,
    output: Annotated[str, typer.Option(help="Folder that holds run folders")] = "results/runs",
    fresh: Annotated[bool, typer.Option(help="Start the run over instead of resuming")] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print a JSON summary as the last stdout line")
    ] = False,
) -> None:
    """Play OpenSpiel games against fixed strong opponents and report returns."""
    from mars_eval.games.runner import games_command

    code = games_command(
        games=games,
        train=train,
        held_out=held_out,
        model=model,
        base_url=list(base_url or []),
        agent=agent,
        opponents=opponents,
        episodes=episodes,
        seed=seed,
        output=output,
        json_out=json_out,
        concurrency=concurrency,
        max_tokens=max_tokens,
        temperature=temperature,
        thinking=thinking,
        prompt_style=prompt_style,
        fresh=fresh,
    )
    raise typer.Exit(code or 0)


@app.command()
def serve(
    model: Annotated[str, typer.Option(help="Hub id or local checkpoint folder")],
    port: Annotated[int | None, typer.Option(help="Port (default: a free one)")] = None,
    host: str = "127.0.0.1",
    max_model_len: int = 40960,
    tensor_parallel_size: int = 1,
    reasoning_parser: Annotated[str, typer.Option(help="vLLM reasoning parser ('' for none)")] = "qwen3",
    gpu_memory_utilization: float = 0.9,
    extra: Annotated[
        list[str] | None, typer.Option("--vllm-arg", help="Extra argument for vllm serve")
    ] = None,
) -> None:
    """Start `vllm serve` with suitable flags, wait until healthy, print the base URL, keep serving."""
    import signal
    import threading

    from mars_eval.serve import vllm_server

    with vllm_server(
        model,
        port=port,
        host=host,
        max_model_len=max_model_len,
        tensor_parallel_size=tensor_parallel_size,
        reasoning_parser=reasoning_parser or None,
        gpu_memory_utilization=gpu_memory_utilization,
        extra_args=extra,
    ) as url:
        print(url, flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()


from mars_eval.commands import register_all  # noqa: E402 (commands register on `app`)

register_all(app)


def main() -> None:
    """Console entry point: ConfigError becomes one line and exit code 2 (click handles usage errors)."""
    # Library progress bars would bury ours (and the one-line errors) under noise.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        app()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
