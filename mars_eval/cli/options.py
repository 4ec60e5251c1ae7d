"""Options shared by `mas` and `suite`: one declaration, one help text, one shown default.

Typer shows "[default: ...]" only for a literal default; these options default to None, which
means "the mode's or the system's own value", so each says in `show_default` what None stands
for (Qwen3's sampling settings, the HTTP client's retry limits, ...). Checked against the
code's own defaults by tests/test_cli_info.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mars_eval.mas import SYSTEM_NAMES
from mars_eval.tasks.custom import FIELDS as CUSTOM_TASK_FIELDS  # the custom task's flags, by name

if TYPE_CHECKING:
    from mars_eval.run.runner import EvalConfig


def _task_list() -> str:
    """The tasks with their aliases, from the task registry (never a copy that can drift)."""
    from mars_eval.tasks.registry import task_help

    return task_help() + ", or a task file FILE.yaml (docs/tasks.md)"


TASKS_HELP = _task_list()
SYSTEMS_HELP = ", ".join(SYSTEM_NAMES)

Temperature = Annotated[
    float | None,
    typer.Option(help="Sampling temperature (>= 0)", show_default="0.6; 0.7 with --no-thinking"),
]
TopP = Annotated[
    float | None,
    typer.Option(help="Nucleus sampling, in (0, 1]", show_default="0.95; 0.8 with --no-thinking"),
]
TopK = Annotated[int | None, typer.Option(help="Top-k sampling (-1 or 0: off)", show_default="20")]
MinP = Annotated[float | None, typer.Option(help="Min-p sampling, in [0, 1]", show_default="0")]
PresencePenalty = Annotated[float | None, typer.Option(help="Presence penalty (vLLM)", show_default="0")]
MaxTokens = Annotated[int | None, typer.Option(help="Most new tokens per call", show_default="32768")]
Thinking = Annotated[
    bool,
    typer.Option(
        "--thinking/--no-thinking", help="Qwen3 thinking mode (chat_template_kwargs.enable_thinking)"
    ),
]
Seed = Annotated[int, typer.Option(help="Seed from which every call's sampling seed is derived")]
Limit = Annotated[int | None, typer.Option(help="First N problems only", show_default="all")]
Rounds = Annotated[
    int | None,
    typer.Option(
        help="mad: most debate rounds; autogen: most assistant turns (solver-reviewer: model "
        "messages); debate: answer rounds, the first included",
        show_default="per system: mad 3, autogen 3, debate 2",
    ),
]
Agents = Annotated[int | None, typer.Option(help="Agents in a Du-style debate", show_default="3")]
Votes = Annotated[
    int | None,
    typer.Option(
        help="Answers in a majority vote",
        show_default="the newest mad run's calls per sample (same task, model, --output), else 5",
    ),
]
SamplesPerAnswer = Annotated[
    int | None, typer.Option(help="self-consistency: independent answers per sample", show_default="5")
]
Turns = Annotated[
    int | None, typer.Option(help="agentverse: most turns (recruit, discuss, evaluate)", show_default="3")
]
Topology = Annotated[
    str | None,
    typer.Option(help="macnet graph: random, chain, star, tree, net, mlp", show_default="random"),
]
MacnetHandoff = Annotated[
    str | None,
    typer.Option(
        help="macnet: what an edge hands over: maslab (MASLab's code: nothing) or answer (the "
        "sender's answer, reviewed and revised)",
        show_default="maslab",
    ),
]
RequestTimeout = Annotated[
    float | None,
    typer.Option(
        help="Deadline of one attempt at a call, connect to last byte (then it is retried)",
        show_default="3600",
    ),
]
MaxAttempts = Annotated[
    int | None, typer.Option(help="Attempts per call before it is an error", show_default="6")
]
Samples = Annotated[int, typer.Option(help="Samples per problem (K)")]
Output = Annotated[str, typer.Option(help="Folder that holds run folders")]
Engine = Annotated[str, typer.Option(help="In-process engine: auto, transformers, vllm")]
AutogenClient = Annotated[
    str,
    typer.Option(
        help="autogen's model client: openai (autogen-ext's, over HTTP), adapter (our model layer), "
        "auto (openai with --base-url, else adapter)"
    ),
]
AutogenStyle = Annotated[
    str, typer.Option(help="autogen conversation: maslab (MASLab's AutoGen) or solver-reviewer")
]
MadJudge = Annotated[
    str, typer.Option(help="Which round MAD's judge is shown: first-round (the references) or last-round")
]
GpqaOrder = Annotated[
    str,
    typer.Option(
        help="GPQA option order: shuffled (per question and seed) or maslab (unshuffled, correct "
        "option always A, as MASLab's dataset builder; GPQA tasks only)"
    ),
]
MadStop = Annotated[
    str,
    typer.Option(
        help="MAD's stop rule: reference (stop at the first non-empty debate_answer, taken as written; "
        "no judge fallback) or lenient (a side's name stands for its answer, placeholders go on, "
        "judge fallbacks)"
    ),
]
DebateStyle = Annotated[
    str,
    typer.Option(
        help="debate: du (majority of the agents' last answers) or maslab (+ MASLab's aggregator call)"
    ),
]
Prompts = Annotated[
    str | None,
    typer.Option(
        help="Prompt pack: a name (see `mars-eval prompts list`) or a YAML file", show_default="ours"
    ),
]
TaskPrompt = Annotated[
    str,
    typer.Option(
        help="Task prompt: ours (the question and our answer format) or bare (the question as the "
        "references send it, GPQA options as '(A) ...' lines)"
    ),
]
Sampling = Annotated[
    str,
    typer.Option(
        help="Sampling preset: qwen3 (Qwen3's recommended settings) or maslab (temperature 0.5, "
        "max_tokens 2048, nothing else sent); explicit sampling options override it"
    ),
]
MatchSystem = Annotated[
    str, typer.Option(help="vote without --votes: the system whose finished run sets the number of votes")
]
MatchRun = Annotated[
    str | None,
    typer.Option(
        help="vote without --votes: the finished run folder whose calls per sample set the votes",
        show_default="the run of --match-system with this configuration",
    ),
]
JsonSummary = Annotated[
    bool, typer.Option("--json", help="Print a JSON summary as the last stdout line", show_default="off")
]


# The parameter names of the options above that `mas` and `suite` share: checked and turned into
# an EvalConfig here, once, so the two commands cannot check or pass them differently.
SAMPLING = ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "max_tokens")
COUNTS = (
    "limit",
    "samples",
    "votes",
    "rounds",
    "agents",
    "concurrency",
    "request_timeout",
    "max_attempts",
    "samples_per_answer",
    "turns",
)
SETTINGS = (
    "seed",
    "output",
    "fresh",
    "engine",
    "autogen_client",
    "autogen_style",
    "mad_judge",
    "topology",
    "macnet_handoff",
    "mad_stop",
    "debate_style",
    "prompts",
    "task_prompt",
    "sampling",
    "match_system",
    "match_run",
)


def check_shared(opts: Mapping[str, Any]) -> None:
    """Bad counts or sampling values among a command's shared options (`opts`: its parameters by
    name): one ConfigError before any work."""
    from mars_eval.cli import validate
    from mars_eval.mas import SYSTEM_NAMES, check_options
    from mars_eval.models.base import SAMPLING_PRESETS
    from mars_eval.prompts import load_pack
    from mars_eval.tasks.prompting import check_task_prompt

    validate.check_run_options(**{k: opts[k] for k in COUNTS})
    validate.check_sampling(**{k: opts[k] for k in SAMPLING if k != "presence_penalty"})
    validate.check_choice("--sampling", opts["sampling"], SAMPLING_PRESETS)
    validate.check_choice(
        "--match-system", opts["match_system"], tuple(n for n in SYSTEM_NAMES if n != "vote")
    )
    check_options(opts["autogen_style"], opts["mad_judge"], opts["mad_stop"], opts["debate_style"])
    check_task_prompt(opts["task_prompt"])
    load_pack(opts["prompts"])  # a bad pack is refused here, before any work


def eval_config(opts: Mapping[str, Any], **fields: Any) -> EvalConfig:
    """The run configuration of a command's shared options (sampling settings resolved from the
    --sampling preset for --thinking/--no-thinking); `fields` are the command's own (task, system,
    model, ...)."""
    from mars_eval.models.base import SamplingParams
    from mars_eval.run.runner import EvalConfig

    params = SamplingParams.for_mode(opts["thinking"], opts["sampling"], **{k: opts[k] for k in SAMPLING})
    return EvalConfig(
        base_urls=list(opts["base_url"] or []),
        params=params,
        **{k: opts[k] for k in COUNTS + SETTINGS},
        **fields,
    )


# --task custom (`tasks.custom`) and problem selection, for `mas`.
QuestionField = Annotated[
    str | None,
    typer.Option(help="--task custom: the question column", show_default="question, else problem"),
]
AnswerField = Annotated[
    str | None, typer.Option(help="--task custom: the gold answer column", show_default="answer")
]
IdField = Annotated[
    str | None, typer.Option(help="--task custom: the problem id column", show_default="id, else a hash")
]
ChoicesField = Annotated[
    str | None,
    typer.Option(help="--task custom: the options column (with --answer-type choice)", show_default="none"),
]
AnswerType = Annotated[
    str | None,
    typer.Option(
        help="--task custom: math (boxed, math-verify), choice (letters, as GPQA) or exact (text)",
        show_default="math",
    ),
]
ProblemIds = Annotated[
    str | None,
    typer.Option(help="Only these problems: comma-separated ids (before --limit)", show_default="all"),
]


def task_options(opts: Mapping[str, Any]) -> dict[str, Any] | None:
    """The custom task's options as given (None when none is); make_task refuses them for
    another task."""
    given = {k: opts[k] for k in CUSTOM_TASK_FIELDS if opts.get(k) is not None}
    return given or None


def problem_ids(value: str | None) -> list[str] | None:
    """--problem-ids a,b,c -> ["a", "b", "c"] (ConfigError when it names none)."""
    if value is None:
        return None
    ids = [v.strip() for v in value.split(",") if v.strip()]
    if not ids:
        from mars_eval.models.base import ConfigError

        raise ConfigError("--problem-ids names no id; give comma-separated problem ids")
    return ids
