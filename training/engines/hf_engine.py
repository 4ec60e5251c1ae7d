"""Rollout generation with transformers `generate` (CPU or GPU), batched across episodes.

Prompts of different lengths are left-padded into one batch per chunk of `batch_size`. The
sampled tokens come from `generate` (temperature, top-p, top-k); each row is cut after its
first end-of-turn token. Behaviour log-probs are then computed by one scoring pass over the
right-padded `prompt + response` rows, the same layout and formula the trainer uses
(log_softmax(logits / T), untruncated), so the first PPO epoch starts at ratio 1 exactly up to
floating-point noise.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from training.batch import build_rows, gather_response
from training.engines import Generation, GenSettings
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
    ):
        self.model = model
        self.pad_id = pad_id
        self.eos_ids = list(eos_ids)
        self.batch_size = batch_size
        self.score_batch_size = score_batch_size

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def _sample(
        self, prompts: list[list[int]], s: GenSettings, caps: list[int]
    ) -> list[tuple[list[int], bool]]:
        """Sampled replies and whether each stopped; row b is cut at caps[b] tokens (tokens are
        drawn one after another, so cutting after the fact is sampling with that limit)."""
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for b, p in enumerate(prompts):
            ids[b, width - len(p) :] = torch.tensor(p)
            attn[b, width - len(p) :] = 1
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
        )
        rows = []
        for b in range(len(prompts)):
            gen = out[b, width:].tolist()[: caps[b]]
            cut = next((i for i, t in enumerate(gen) if t in self.eos_ids), None)
            rows.append((gen[: cut + 1], True) if cut is not None else (gen, False))
        return rows

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
                sampled = self._sample(chunk, settings, caps[i : i + self.batch_size])
                # an empty response cannot be scored or trained on; keep one pad token (invalid anyway)
                responses = [toks if toks else [self.pad_id] for toks, _ in sampled]
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

    def sleep(self) -> None:
        """Nothing to free: the transformers engine has no KV cache between calls."""

    def wake_up(self) -> None:
        pass
