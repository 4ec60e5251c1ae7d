"""Turn records and how they become padded tensors for scoring and training.

One `Turn` is one learner action: the prompt tokens it saw (the chat rendered by the chat
template: system text, observations, opponent moves, earlier turns) and the response tokens
it produced (ending with the end-of-turn token when it stopped). Training rows are
`prompt + response`, right-padded; the loss mask marks only the response tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Turn:
    game: str
    seat: int
    episode: int  # index of the episode within the step (unique per rank)
    index: int  # this player's t-th turn in the episode
    prompt_ids: list[int]
    response_ids: list[int]
    behaviour_logprobs: list[float]  # one per response token
    valid: bool = True
    truncated: bool = False  # hit max_new_tokens without an end-of-turn token
    reward: float = 0.0
    advantage: float = 0.0  # the turn's advantage (the mean over its tokens when they differ)
    token_advantages: Any = None  # one value per response token when they differ (reference mode)
    text: str = ""
    extra: dict = field(default_factory=dict)


def by_trajectory(turns: list[Turn]) -> dict[tuple[int, int], list[Turn]]:
    """(episode, seat) -> that trajectory's turns in order (first-seen order of trajectories)."""
    out: dict[tuple[int, int], list[Turn]] = {}
    for t in turns:
        out.setdefault((t.episode, t.seat), []).append(t)
    return {key: sorted(ts, key=lambda t: t.index) for key, ts in out.items()}


def build_rows(
    prompts: list[list[int]], responses: list[list[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded rows. Returns (input_ids [B, L], attention_mask [B, L], loss_mask [B, L-1]).

    loss_mask is aligned with the targets input_ids[:, 1:]: 1 exactly where the target is a
    response token.
    """
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses, strict=True)]
    width = max(lengths)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(prompts), width), dtype=torch.long)
    loss_mask = torch.zeros((len(prompts), width - 1), dtype=torch.float32)
    for b, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        row = p + r
        ids[b, : len(row)] = torch.tensor(row, dtype=torch.long)
        attn[b, : len(row)] = 1
        # target index j predicts token j+1; response tokens sit at len(p) .. len(row)-1
        loss_mask[b, len(p) - 1 : len(row) - 1] = 1.0
    return ids, attn, loss_mask


def per_token(values: list[list[float]], loss_mask: torch.Tensor) -> torch.Tensor:
    """Place each row's per-response-token values at its masked-in positions (0 elsewhere)."""
    out = torch.zeros_like(loss_mask)
    for b, vals in enumerate(values):
        idx = loss_mask[b].nonzero().squeeze(-1)
        if len(vals) != len(idx):
            raise ValueError(f"row {b}: {len(vals)} values for {len(idx)} response tokens")
        if len(vals):
            out[b, idx] = torch.tensor(vals, dtype=out.dtype)
    return out


def turn_token_advantages(turn: Turn) -> list[float]:
    """The advantage of each response token of a turn."""
    if turn.token_advantages is not None:
        return [float(v) for v in turn.token_advantages]
    return [turn.advantage] * len(turn.response_ids)


def gather_response(values: torch.Tensor, loss_mask: torch.Tensor) -> list[list[float]]:
    """Inverse of `per_token`: each row's values at its response positions."""
    return [values[b][loss_mask[b] > 0].tolist() for b in range(values.shape[0])]


def pack_rows(lengths: list[int], max_rows: int, max_tokens: int = 0) -> list[list[int]]:
    """Row indices grouped into micro-batches.

    Without a budget (`max_tokens` <= 0): `max_rows` consecutive rows at a time, in order. With
    one: longest rows first, at most `max_rows` rows and `max_tokens` padded tokens (row count x
    longest row) a micro-batch; a row longer than the budget goes alone. Sorting by length keeps
    rows of similar length together, so padding stays small; the order of rows inside an
    optimizer step does not change its summed gradient (up to rounding).
    """
    if max_tokens <= 0:
        return [list(range(i, min(i + max_rows, len(lengths)))) for i in range(0, len(lengths), max_rows)]
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    out: list[list[int]] = []
    for i in order:
        if out:
            batch = out[-1]
            width = lengths[batch[0]]  # the longest: rows arrive longest first
            fits_tokens = max_tokens <= 0 or (len(batch) + 1) * width <= max_tokens
            if len(batch) < max_rows and fits_tokens:
                batch.append(i)
                continue
        out.append([i])
    return out
