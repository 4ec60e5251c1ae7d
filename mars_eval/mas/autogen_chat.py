"""`autogen`: two-agent AutoGen conversations on the real autogen-agentchat (0.7.x) library.

Styles (`autogen_style`, --autogen-style):

`maslab` (default) reproduces MASLab's AutoGen (methods/autogen, the setting behind the MARS
paper's AutoGen numbers; its config: max_turn 3, TERMINATE, no code execution):
  * "assistant": an `AssistantAgent` whose system prompt asks it to solve the task step by step
    without code, verify its answer, end every reply with its current final answer in the
    task's answer format, and reply TERMINATE when everything is done.
  * "user_proxy": an `AssistantAgent` with no system prompt (MASLab's is the empty string,
    which its message builder leaves out). The proxy sent the task, so in its own context the
    task is its earlier (assistant) message and the assistant's replies are user messages.
  * Turns: assistant, proxy, assistant, proxy, assistant: at most `rounds` (default 3, MASLab's
    max_turn) assistant turns, so at most 2 * rounds - 1 calls. The chat stops as soon as
    either agent's reply text (never its thinking) contains TERMINATE.
  * Answer: what the task extracts from the assistant's last reply (TERMINATE removed), also
    when the proxy ended the chat; no answer there means no answer (the sample is wrong).
  * No code is ever run (MASLab's code_execute is False).
  * A chat that TERMINATE ends (either agent, the first reply included) is read like any other:
    the assistant's last reply. (MASLab's loop returns the bare reply there, where its
    inference.py expects a mapping with "response", so MASLab records every TERMINATE-ended
    chat as an error and answers only a chat that runs out of turns; we keep the answer by
    default, and `--errors maslab` records those samples as MASLab does: `maslab_error`.)

`solver-reviewer` (ours, kept as an option): "assistant" solves, "reviewer" checks and replies;
only the assistant's TERMINATE ends the chat; `rounds` (default 3) is the most model messages
(solve, review, revise); the answer is the newest assistant message with an answer, else the
newest reviewer message with one.

Model client. With the adapter (`client="adapter"`, in-process engines) each agent talks to
the model through `autogen_models.AgentModelClient` (our model layer: retries, cache, resume,
seeds, thinking split, counting). Over HTTP (`client="openai"`, what "auto" becomes there)
autogen-ext's own `OpenAIChatCompletionClient` sends the requests through our endpoint pool
(`autogen_openai`), with the run's API key.

Traps handled:
  * Thinking is `CreateResult.thought`; autogen publishes it as a `ThoughtEvent`, which the
    stock `TextMentionTermination` also scans, so TERMINATE inside thinking would end the chat:
    `ChatTextMention` reads chat messages only. Thoughts never go back to a model
    (`to_chat_messages`, `_NoThoughtContext`).
  * A team runs one task at a time: a fresh team is built for every sample.
  * `MaxMessageTermination` counts the task message too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.registry import register
from mars_eval.mas.system import System, option
from mars_eval.models.base import ConfigError
from mars_eval.tasks.base import Problem, Task

DEFAULT_ROUNDS = 3  # MASLab's max_turn

# Prompt text: the prompt pack's mas.autogen.* templates (mars_eval.prompts); in `ours`,
# maslab_assistant_system is the intent of MASLab's no-code assistant message in our words, the
# task's answer format standing where MASLab names "the final answer in the box".


@register
class AutoGenChat(System):
    """A two-agent AutoGen conversation; see the module docstring for the options."""

    name = "autogen"
    table_order = 2
    summary = "AutoGen (MASLab): assistant and user proxy, until TERMINATE or the most assistant turns"
    protocol = 2  # the MASLab conversation by default

    @dataclass(frozen=True)
    class Options:
        # None stands for DEFAULT_ROUNDS (kept as None in the run identity, as runs before had it)
        rounds: int | None = option(
            None,
            "most assistant turns (solver-reviewer: model messages)",
            minimum=1,
            shown=str(DEFAULT_ROUNDS),
        )
        autogen_client: str = option(
            "auto",
            "model client: openai (autogen-ext's, over HTTP), adapter (our model layer), auto "
            "(openai with --base-url, else adapter)",
            choices=("auto", "openai", "adapter"),
        )
        autogen_style: str = option(
            "maslab",
            "conversation: maslab (MASLab's AutoGen) or solver-reviewer",
            choices=("maslab", "solver-reviewer"),
        )

    def __init__(
        self,
        options: Any = None,
        *,
        base_url: str | None = None,
        model: str | None = None,
        http_client: Any = None,
        api_key: str | None = None,
        **values: Any,
    ):
        super().__init__(options, **values)
        self.rounds = DEFAULT_ROUNDS if self.options.rounds is None else self.options.rounds
        self.style = self.options.autogen_style
        self.client = self.options.autogen_client
        self.base_url = base_url
        self.model = model
        self.http_client = http_client  # an httpx.AsyncClient to share; else one per model client
        self.api_key = api_key
        self.endpoint: Any = None  # the runner's HTTP client, once bound

    @property
    def max_calls(self) -> int:
        """The most model calls one conversation makes."""
        return 2 * self.rounds - 1 if self.style == "maslab" else self.rounds

    def maslab_error(self, result: Any, transcript: list[dict[str, Any]]) -> str | None:
        """Every chat that TERMINATE ended (either agent's reply, the first included): MASLab's
        loop returns the bare reply there, and its inference.py, wanting a mapping with
        "response", records an error; only a chat that ran out of turns is answered."""
        if self.style != "maslab":
            return None
        replies = [e for e in transcript if "new_messages" in e]
        said = replies[-1].get("content") if replies else None
        return "autogen_terminate" if isinstance(said, str) and "TERMINATE" in said else None

    @classmethod
    def check(cls, options: Any, *, served: bool) -> None:
        if options.autogen_client == "openai" and not served:
            raise ConfigError("--autogen-client openai needs --base-url")

    def bind(self, client: Any, model: str) -> None:
        """Over HTTP with client auto or openai: autogen's OpenAI client goes through the runner's
        endpoint pool (retries, limits, balancing), its API key and error wording."""
        from mars_eval.models.http import HTTPClient

        if self.client not in ("auto", "openai"):
            return
        if not isinstance(client, HTTPClient):
            if self.client == "openai":
                raise ConfigError("--autogen-client openai needs --base-url")
            return
        self.bind_endpoint(client, model)

    def bind_endpoint(self, endpoint: Any, model: str) -> None:
        """Point autogen's OpenAI client at `endpoint` (an HTTPClient)."""
        from mars_eval.mas.autogen_team import pooled_http_client

        self.base_url, self.model = endpoint.pool.base_url, model
        self.api_key = endpoint.api_key
        self.endpoint = endpoint
        self.http_client = pooled_http_client(endpoint.pool, endpoint.http.timeout)
        self.client = "openai"

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        from mars_eval.mas import autogen_team

        team, clients = autogen_team.build_team(self, task, ctx)
        started = time.perf_counter()
        try:
            result = await team.run(task=problem.prompt)
        except BaseException:
            autogen_team.raise_client_error(clients)
            raise
        finally:
            if self.http_client is None:
                for c in clients:
                    await c.close()
        autogen_team.raise_client_error(clients)  # an agent may have swallowed a failed call
        said = autogen_team.model_messages(result)
        ctx.note(
            "autogen_stop",
            style=self.style,
            reason=result.stop_reason,
            model_messages=len(said),
            seconds=round(time.perf_counter() - started, 3),
        )
        if self.style == "maslab":
            return autogen_team.assistant_last_reply(said, task, result.stop_reason or "")
        return autogen_team.pick_final_answer(said, task, result.stop_reason or "")


_TEAM_NAMES = (
    "AgentModelClient",
    "ChatTextMention",
    "assistant_last_reply",
    "pick_final_answer",
    "to_chat_messages",
)


def __getattr__(name: str) -> Any:
    # The autogen side, read from here as before, imported only when asked for.
    if name in _TEAM_NAMES:
        from mars_eval.mas import autogen_team

        return getattr(autogen_team, name)
    raise AttributeError(name)
