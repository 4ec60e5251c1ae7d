"""Options shared by `mas` and `suite`: one declaration, one help text, one shown default.

Typer shows "[default: ...]" only for a literal default; these options default to None, which
means "the mode's or the system's own value", so each says in `show_default` what None stands
for (Qwen3's sampling settings, the HTTP client's retry limits, ...). Checked against the
code's own defaults by tests/test_cli_info.py.
"""

from __future__ import annotations

from typing import Annotated

import typer

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
RequestTimeout = Annotated[
    float | None, typer.Option(help="Seconds before a call is retried", show_default="3600")
]
MaxAttempts = Annotated[
    int | None, typer.Option(help="Attempts per call before it is an error", show_default="6")
]
JsonSummary = Annotated[
    bool, typer.Option("--json", help="Print a JSON summary as the last stdout line", show_default="off")
]
