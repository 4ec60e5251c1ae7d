"""Rollout generation with transformers `generate` (CPU or GPU), batched across episodes.

Prompts of different lengths are left-padded into one batch per chunk of `batch_size`. The
sampled tokens come from `generate` (temperature, top-p, top-k); each row is cut after its
first end-of-turn token, or after the first stop string (`GenSettings.stop`, e.g. "</answer>":
`generate` stops the row there, and the string's tokens end the reply, no end-of-turn token).

Behaviour log-probs, log_softmax(logits / T) of each sampled token (untruncated, as the
trainer's loss takes them), come from one of two places (`logprobs_from`):

  "score"     a scoring pass over the right-padded `prompt + response` rows, the same layout
              and formula the trainer uses, so the first PPO epoch starts at ratio 1 exactly up
              to floating-point noise (the default);
  "generate"  the raw logits `generate` computed while sampling (`output_logits`): no second
              pass (on SmolLM2 on the CPU that pass was 6.9 of a 51.5 s step), equal to the
              scoring pass up to the rounding of a cached, left-padded forward (about 1e-5 in
              fp32, tested). It holds one [batch, vocab] tensor per generated token until the
              chunk ends: meant for short replies (the CPU presets).

Requests one at a time (`submit` / `advance` / `abort`, rollout_schedule=async) go through
mars_eval's continuous-batching decode loop instead (training/engines/hf_stream.py): each
request samples with its own seeded generator, at most `batch_size` rows at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from training.batch import build_rows, gather_response
from training.engines import Generation, GenSettings, Request
from training.loss import token_logprobs


class TransformersEngine:
    def __init__(
        self,
        model: torch.nn.Module,
        *,
        pad_id: int,
        eos_ids: list[int],
        batch_size: int = 64,
        score_batch_size: int = 64,
        logprobs_from: str = "score",
        tokenizer: Any = None,
    ):
        if logprobs_from not in ("score", "generate"):
            raise ValueError(f"logprobs_from must be score or generate, got {logprobs_from!r}")
        self.model = model
        self.pad_id = pad_id
        self.eos_ids = list(eos_ids)
        self.batch_size = batch_size
        self.score_batch_size = score_batch_size
        self.logprobs_from = logprobs_from
        self.tokenizer = tokenizer  # needed for stop strings only
        self._stream: Any = None  # hf_stream.DecodeStream while requests stream (async schedule)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def _sample(
        self, prompts: list[list[int]], s: GenSettings, caps: list[int]
    ) -> tuple[list[tuple[list[int], bool]], list[list[float]] | None]:
        """Sampled replies and whether each stopped; row b is cut at caps[b] tokens (tokens are
        drawn one after another, so cutting after the fact is sampling with that limit). With
        `logprobs_from="generate"`, each reply token's log-prob from the sampling logits too."""
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for b, p in enumerate(prompts):
            ids[b, width - len(p) :] = torch.tensor(p)
            attn[b, width - len(p) :] = 1
        extra: dict[str, Any] = {}
        if s.stop:
            if self.tokenizer is None:
                raise ValueError("stop strings need the engine's tokenizer")
            extra.update(stop_strings=list(s.stop), tokenizer=self.tokenizer)
        scored = self.logprobs_from == "generate"
        out = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=attn.to(self.device),
            do_sample=True,
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            max_new_tokens=max(caps),
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_ids,
            return_dict_in_generate=True,
            output_logits=scored,
            **extra,
        )
        rows = []
        for b in range(len(prompts)):
            gen = out.sequences[b, width:].tolist()[: caps[b]]
            rows.append(self._cut(gen, s.stop))
        if not scored:
            return rows, None
        logps = []
        for b, (reply, _) in enumerate(rows):
            # out.logits[t]: the raw logits [batch, vocab] that drew token t of every row
            logps.append(
                [
                    float(torch.log_softmax(out.logits[t][b].float() / s.temperature, -1)[tok])
                    for t, tok in enumerate(reply)
                ]
            )
        return rows, logps

    def _cut(self, gen: list[int], stop: tuple[str, ...]) -> tuple[list[int], bool]:
        """The reply within a row of generated tokens, and whether it stopped: through its first
        end-of-turn token, or through the token that completes a stop string (`generate` pads
        a row that stopped on a string; that padding is not part of the reply)."""
        end = next((i for i, t in enumerate(gen) if t in self.eos_ids), None)
        if stop:
            upto = gen if end is None else gen[:end]
            text = self.tokenizer.decode(upto, skip_special_tokens=True)
            if any(s in text for s in stop):
                j = len(upto)  # the shortest prefix holding a stop string: near the end, where it stopped
                while j > 1 and any(
                    s in self.tokenizer.decode(upto[: j - 1], skip_special_tokens=True) for s in stop
                ):
                    j -= 1
                return upto[:j], True
        return (gen[: end + 1], True) if end is not None else (gen, False)

    @torch.no_grad()
    def score(
        self, prompts: list[list[int]], responses: list[list[int]], temperature: float
    ) -> list[list[float]]:
        """log pi(response token | prefix) at `temperature`, row by row."""
        out: list[list[float]] = []
        for i in range(0, len(prompts), self.score_batch_size):
            ids, attn, mask = build_rows(
                prompts[i : i + self.score_batch_size], responses[i : i + self.score_batch_size], self.pad_id
            )
            # the response positions only, as the trainer scores them (training/loss.py)
            logp, _ = token_logprobs(
                self.model, ids.to(self.device), attn.to(self.device), temperature, mask=mask.to(self.device)
            )
            out.extend(gather_response(logp.cpu(), mask))
        return out

    def generate(
        self, prompts: list[list[int]], settings: GenSettings, seed: int, max_tokens: list[int] | None = None
    ) -> list[Generation]:
        caps = max_tokens or [settings.max_new_tokens] * len(prompts)
        was_training = self.model.training
        self.model.eval()
        try:
            results: list[Generation] = []
            for c, i in enumerate(range(0, len(prompts), self.batch_size)):
                chunk = prompts[i : i + self.batch_size]
                torch.manual_seed(seed * 1000 + c)  # deterministic per (step seed, chunk)
                sampled, sampled_logps = self._sample(chunk, settings, caps[i : i + self.batch_size])
                # an empty response cannot be scored or trained on; keep one pad token (invalid anyway)
                responses = [toks if toks else [self.pad_id] for toks, _ in sampled]
                if sampled_logps is not None and all(toks for toks, _ in sampled):
                    logps = sampled_logps
                else:
                    logps = self.score(chunk, responses, settings.temperature)
                results.extend(
                    Generation(r, lp, stopped)
                    for r, lp, (_, stopped) in zip(responses, logps, sampled, strict=True)
                )
            return results
        finally:
            self.model.train(was_training)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy weights in (only needed when this engine holds its own copy of the policy)."""
        params = dict(self.model.named_parameters())
        params.update(dict(self.model.named_buffers()))
        with torch.no_grad():
            for name, tensor in named_tensors:
                if name in params:
                    params[name].copy_(tensor.to(params[name].device, params[name].dtype))

    def shares_weights_with(self, model: torch.nn.Module) -> bool:
        return self.model is model

    # --- one request at a time (training/engines/hf_stream.py) --------------------------------
    def submit(self, requests: list[Request], settings: GenSettings) -> None:
        if self._stream is None:
            from training.engines.hf_stream import DecodeStream

            self._stream = DecodeStream(self)
        self._stream.submit(requests, settings)

    def advance(self) -> list[tuple[Any, Generation]]:
        if self._stream is None:
            return []
        was_training = self.model.training
        self.model.eval()
        try:
            return self._stream.advance()
        finally:
            self.model.train(was_training)

    def abort(self) -> None:
        """Drop every queued request, and the loop with its prefix cache (KV of these weights)."""
        self._stream = None

    def sleep(self) -> None:
        """No KV cache between calls; the streaming loop (and its prefix cache, computed with
        these weights) is dropped: the weights change before the next rollout."""
        self._stream = None

    def wake_up(self) -> None:
        pass
