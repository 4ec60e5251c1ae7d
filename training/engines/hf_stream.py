"""Streaming generation for the transformers engine: mars_eval's continuous-batching decode loop.

`TransformersEngine.submit / advance / abort` (rollout_schedule=async) run here. The loop
(mars_eval/models/decode_loop.py) keeps one KV slab of the live rows: a request joins between
decode steps (prefilled with the others that joined at that step, its prompt's cached prefix
reused), each step computes one token for every live row, and a row leaves the step its reply
ends. `advance` steps until at least one reply has ended and returns the ended ones; the
rollout then queues the next turns of those environments, which join at the next step.

Sampling is per row: the request's temperature / top-p / top-k as transformers' own logits
warpers, and a `torch.Generator` seeded with the request's seed, so a reply does not depend on
which rows share its steps (up to the rounding of a batched forward). A reply ends after its
end-of-turn token (kept in the reply, as `generate`'s replies), at its token limit, or after a
stop string (`GenSettings.stop`; the engine's own `_cut` finds where).

Behaviour log-probs as the engine's `logprobs_from` says: "generate" records
log_softmax(logits / T) of each sampled token from the loop's own logits; "score" scores the
replies that ended in one scoring pass (the trainer's layout).

The prefix cache holds KV computed with the weights of the moment: the whole stream is dropped
by `abort` (the end of every async rollout) and whenever the engine sleeps.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import torch

from training.engines import Generation, GenSettings, Request

PREFIX_CACHE_TOKENS = 8192  # tokens of prompt KV kept for reuse within one rollout
STREAM_STEPS = 16  # most decode steps one `advance` runs when no reply ends


def _warp_kwargs(s: GenSettings) -> dict[str, Any]:
    """`generate`-style sampling keywords of the settings (what `decode_loop.warpers` takes)."""
    out: dict[str, Any] = {"do_sample": True, "temperature": s.temperature}
    if s.top_k > 0:
        out["top_k"] = s.top_k
    if s.top_p < 1.0:
        out["top_p"] = s.top_p
    return out


def _loop_class() -> type:
    from mars_eval.models.decode_loop import DecodeLoop

    class ScoringLoop(DecodeLoop):
        """The decode loop, also recording each sampled token's log-prob at temperature T
        (the row's `temperature` attribute; None: not recorded)."""

        def _pick(self, rows: list[Any], logits: Any) -> list[int]:
            picked = super()._pick(rows, logits)
            for seq, tok, row_logits in zip(rows, picked, logits, strict=True):
                temp = getattr(seq, "temperature", None)
                if temp is not None:
                    seq.logps.append(float(torch.log_softmax(row_logits.float() / temp, -1)[tok]))
            return picked

    return ScoringLoop


class DecodeStream:
    """The streaming state of one `TransformersEngine` (made lazily, dropped on sleep)."""

    def __init__(self, engine: Any, prefix_tokens: int = PREFIX_CACHE_TOKENS):
        from mars_eval.models.decode_loop import supported

        why = supported(engine.model)
        if why is not None:
            raise ValueError(f"rollout_schedule=async: the decode loop cannot run this model ({why})")
        self.engine = engine
        self.loop = _loop_class()(
            engine.model,
            set(engine.eos_ids),
            max_rows=engine.batch_size,
            limit=None,  # as `generate`: the rollout's own limits (sequence_length) apply
            prefix_tokens=prefix_tokens,
        )
        self.ended: list[tuple[Any, Any, GenSettings]] = []  # (sequence, key, settings)
        self.joining: list[Any] = []

    def submit(self, requests: list[Request], settings: GenSettings) -> None:
        from mars_eval.models.decode_loop import Sequence, warpers

        kwargs = _warp_kwargs(settings)
        chain = warpers(kwargs)
        by_generate = self.engine.logprobs_from == "generate"
        for req in requests:
            seq = Sequence(
                prompt=list(req.prompt),
                room=max(1, req.max_tokens),
                key=tuple(sorted(kwargs.items())),
                processors=chain,
                seed=req.seed,
                done=lambda _tokens, _finish: None,
            )
            seq.logps = []
            seq.temperature = settings.temperature if by_generate else None
            seq.done = self._on_done(seq, req.key, settings)
            if settings.stop:
                seq.cancelled = self._stop_check(seq, settings.stop)
            self.joining.append(seq)

    def _on_done(self, seq: Any, key: Hashable, settings: GenSettings) -> Any:
        def done(_tokens: list[int], _finish: str) -> None:
            self.ended.append((seq, key, settings))

        return done

    def _stop_check(self, seq: Any, stop: tuple[str, ...]) -> Any:
        """True once the reply's tail holds a stop string (the tail only: each token is at
        least one byte, a character at most four)."""
        tail = 4 * max(len(s) for s in stop) + 4
        tok = self.engine.tokenizer

        def check() -> bool:
            if not seq.generated:
                return False
            text = tok.decode(seq.generated[-tail:], skip_special_tokens=True)
            return any(s in text for s in stop)

        return check

    def advance(self) -> list[tuple[Hashable, Generation]]:
        """Admit the queued requests, then decode steps until a reply has ended (or STREAM_STEPS
        steps passed: the rollout's collective tick, as the vLLM engine's)."""
        loop = self.loop
        steps = 0
        with torch.inference_mode():
            loop.admit_many(self.joining)
            self.joining = []
            while not self.ended and (loop.live or loop.waiting) and steps < STREAM_STEPS:
                loop.step()
                loop.admit_many([])  # rows that left make room for the waiting
                steps += 1
        ended, self.ended = self.ended, []
        return self._generations(ended)

    def _generations(self, ended: list[tuple[Any, Any, GenSettings]]) -> list[tuple[Hashable, Generation]]:
        """Each ended row's reply (through its end token or stop string) and log-probs."""
        replies = []
        for seq, key, settings in ended:
            reply, stopped = self.engine._cut(list(seq.generated), settings.stop)
            replies.append((key, reply or [self.engine.pad_id], stopped, seq, settings))
        out: list[tuple[Hashable, Generation]] = []
        to_score = [r for r in replies if r[3].temperature is None or len(r[3].logps) < len(r[1])]
        scored: dict[int, list[float]] = {}
        for temp in {r[4].temperature for r in to_score}:
            group = [r for r in to_score if r[4].temperature == temp]
            values = self.engine.score([r[3].prompt for r in group], [r[1] for r in group], temp)
            scored.update({id(r[3]): v for r, v in zip(group, values, strict=True)})
        for key, reply, stopped, seq, _ in replies:
            logps = scored.get(id(seq), seq.logps[: len(reply)])
            out.append((key, Generation(reply, logps, stopped)))
        return out
