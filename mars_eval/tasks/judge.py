"""The LLM judge (`--scorer judge`): a model reads the problem, the system's final reply and the
gold, and says Correct or Incorrect, after xVerify and MASLab's evaluation.

The prompt is the template `scoring.judge` of a prompt pack (`{question}`: the problem as its
first user message sent it; `{response}`: the system's final reply; `{gold}`): ours by default,
or a pack's (`--judge-prompts maslab`, after `mars-eval prompts import maslab PATH`, is MASLab's
own wording). One call per sample, a user message alone, at the judge's own sampling settings
(temperature 0, thinking off, at most 256 new tokens unless set); no seed is sent, so samples
whose final replies are the same share one call.

Reading the verdict (`--judge-verdict`):
- `ours`: the reply's first word, brackets, asterisks, quotes and punctuation around it dropped,
  is "correct" or "incorrect"; else the last `[Correct]` / `[Incorrect]` in it.
- `maslab`: the reply stripped and lower-cased is exactly "correct" or "incorrect" (MASLab's
  `eval_func_xverify`); `[Correct]`, or a word more, does not read.
A reply that does not read is scored wrong and stored as verdict `unreadable`; MASLab's
evaluation records it as an error with no score ("Eval Error"), and so does `--errors maslab`
(`maslab_error: judge_unreadable`; see docs/scoring.md). A sample without a final reply is
scored wrong without a call (verdict `no reply`). The verdict, the judge's raw reply and its
finish reason are stored per sample in the record's `score`.

Where the judge runs: `--judge-model` and `--judge-base-url` (an endpoint; without it an
in-process model); neither: the run's own model and endpoints. The judge's calls go through the
run's call store, like the system's, so a rerun sends no finished judge call again.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from mars_eval.models.base import ContextOverflowError, SamplingParams
from mars_eval.models.settings import Setting
from mars_eval.tasks.base import ScorerError
from mars_eval.tasks.scorers import ScoreInput, Scorer, Verdict, register_scorer

if TYPE_CHECKING:
    from mars_eval.models.base import ModelClient
    from mars_eval.prompts import PromptPack
    from mars_eval.tasks.base import Task

TEMPLATE = "scoring.judge"
VERDICT_READERS = ("ours", "maslab")
MASLAB_UNREADABLE = "judge_unreadable"  # the `maslab_error` of an unreadable verdict (--errors maslab)
_WORD = re.compile(r"[\s\[\]\(\)*_`'\"“”.,:;!]+")
_BRACKETED = re.compile(r"\[\s*(correct|incorrect)\s*\]", re.IGNORECASE)


def read_verdict(reply: str, reader: str = "ours") -> bool | None:
    """The judge's verdict in `reply`: True (correct), False (incorrect), None (unreadable)."""
    text = (reply or "").strip()
    if reader == "maslab":
        label = text.lower()
        return {"correct": True, "incorrect": False}.get(label)
    words = [w for w in _WORD.split(text.lower()) if w]
    if words and words[0] in ("correct", "incorrect"):
        return words[0] == "correct"
    bracketed = _BRACKETED.findall(text)
    if bracketed:
        return bracketed[-1].lower() == "correct"
    return None


def public_url(url: str | None) -> str | None:
    """An endpoint as a run's identity records it: no user, password, query or fragment."""
    if not url:
        return None
    parts = urlsplit(url.strip() if "://" in url else "http://" + url.strip())
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


@register_scorer
class JudgeScorer(Scorer):
    """An LLM judge on any endpoint or in-process (see the module docstring)."""

    name = "judge"
    summary = "an LLM judge (xVerify-style prompt: Correct or Incorrect) on any endpoint or in-process"
    uses_model = True
    settings = (
        Setting(
            "judge_model", str, None, "the judge: a served model name, hub id, pulled name or folder",
            shown="the run's model",
        ),
        Setting(
            "judge_base_url", str, None, "the judge's OpenAI-compatible endpoint",
            shown="in-process with --judge-model, else the run's endpoints",
        ),
        Setting(
            "judge_prompts", str, None, "the prompt pack whose scoring.judge template the judge reads",
            shown="the run's --prompts",
        ),
        Setting("judge_max_tokens", int, 256, "the judge's most new tokens per verdict", low=1),
        Setting("judge_temperature", float, 0.0, "the judge's sampling temperature", low=0),
        Setting("judge_thinking", bool, False, "the judge's thinking mode (Qwen3 enable_thinking)"),
        Setting(
            "judge_verdict", str, "ours", "how the verdict is read: ours (its first word, else the "
            "last bracketed one) or maslab (the whole reply is the word)", choices=VERDICT_READERS,
        ),
    )  # fmt: skip

    def __init__(self, options: Any = None, prompts: PromptPack | None = None) -> None:
        super().__init__(options, prompts)
        from mars_eval.prompts import load_pack

        self.pack = load_pack(self.options["judge_prompts"]) if self.options["judge_prompts"] else prompts
        if self.pack is None:
            self.pack = load_pack(None)
        self.model_identity: dict[str, Any] | None = None  # set by the run (`bind`)

    @property
    def params(self) -> SamplingParams:
        o = self.options
        return SamplingParams.for_mode(
            o["judge_thinking"], temperature=o["judge_temperature"], max_tokens=o["judge_max_tokens"]
        )

    def bind(self, model_identity: dict[str, Any]) -> None:
        """The judge model as the run resolved it (`run.identity.model_identity`)."""
        self.model_identity = model_identity

    def identity(self) -> dict[str, Any]:
        template = self.pack.text(TEMPLATE)
        return {
            "name": self.name,
            "protocol": self.protocol,
            "judge": self.model_identity or {"model": self.options["judge_model"]},
            "base_url": public_url(self.options["judge_base_url"]),
            "prompt": {"pack": self.pack.name, "hash": hashlib.sha256(template.encode()).hexdigest()[:12]},
            "params": self.params.to_dict(),
            "verdict": self.options["judge_verdict"],
        }

    def messages(self, item: ScoreInput) -> list[dict[str, str]]:
        text = self.pack.render(
            TEMPLATE, question=item.prompt, response=item.final_text or "", gold=item.gold
        )
        return [{"role": "user", "content": text}]

    async def score(self, task: Task, item: ScoreInput, client: ModelClient | None) -> Verdict:
        if client is None:
            raise ScorerError("the judge has no model client")
        if not (item.final_text or "").strip():
            return Verdict(False, {"scorer": self.name, "verdict": "no reply", "reply": None, "calls": 0})
        try:
            resp = await client.chat(self.messages(item), self.params)
        except ContextOverflowError as exc:
            raise ScorerError(f"the judge's prompt does not fit its context: {exc}") from None
        verdict = read_verdict(resp.content, self.options["judge_verdict"])
        detail = {
            "scorer": self.name,
            "verdict": "unreadable" if verdict is None else ("correct" if verdict else "incorrect"),
            "reply": resp.content,
            "finish_reason": resp.finish_reason,
            "calls": 1,
        }
        return Verdict(bool(verdict), detail)

    def maslab_error(self, verdict: Verdict) -> str | None:
        """An unreadable verdict, an empty reply included: MASLab's `eval_func_xverify` returns
        "Eval Error" with no score there, and its evaluate.py leaves the sample out."""
        detail = verdict.detail or {}
        return MASLAB_UNREADABLE if detail.get("verdict") == "unreadable" else None
