"""Training rows: one per turn (`row_layout=turn`), or one per trajectory (`row_layout=trajectory`).

Per turn, a row is `prompt + response` of one turn. When the chat grows turn by turn ("full"
and "reference" prompt styles), turn k+1's prompt holds turn k's whole prompt and reply, so a
trajectory of n turns puts its first prompt through the model n times, its second reply n - 1
times, ... in each of the three passes (behaviour log-probs, reference log-probs, update):

    tokens per trajectory, per turn       sum_k (P_k + R_k)            P_k: prompt of turn k
    tokens per trajectory, one row        P_n + R_n                    R_k: its reply

The reference trains one row per trajectory (roll/agentic/rollout/env_manager.py
`_formulate_single_rollout`: the whole chat of one player, with a mask over the assistant
replies). Here a trajectory row is built from the sampled tokens themselves: the turns are
chained while each turn's prompt starts, token for token, with the previous turn's prompt and
reply,

    prompt_{k+1}[: |prompt_k| + |reply_k|] == prompt_k + reply_k,

and the row is the last chained turn's prompt + reply, with the loss mask on every chained
turn's reply tokens only (the observations, opponents' moves and the template's text between
replies are context). A causal model gives each reply token the same prefix in the row as in
its own turn's row, so every log-prob (and the loss) is the same up to floating-point rounding.

Where a chat template does not re-render an earlier turn as it was sampled, the chain breaks
and a new row starts at that turn: Qwen3's own template drops earlier turns' thinking ("full"
style with thinking on), a template that writes an empty think block into the generation prompt
but not into the history (enable_thinking=false) does too, and so does a reply whose tokens
are not what the tokenizer makes of its text, or one that did not end with the template's
end-of-turn token. Those turns fall back to per-turn rows; the one-message styles ("compact",
"compact-legal") never chain. The "reference" style renders the reference's own ChatML, which keeps
earlier replies whole, so its trajectories chain unless retokenization differs.

Turn boundaries stay: each row lists its turns and where each turn's reply sits. The update
runs the model on the rows and hands the loss a per-turn view (`TurnView`: one row of the
loss's tensors per turn, its reply tokens only), so turn-level losses (turn-ppo, st-ppo) and
every loss's per-unit token means see exactly what they see with one row per turn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from training.batch import Turn, by_trajectory

ROW_LAYOUTS = ("turn", "trajectory")


@dataclass
class Row:
    """One training row: its turns (one, or a trajectory's chained turns, in order), its tokens,
    and where each turn's reply starts in them."""

    turns: list[Turn]
    ids: list[int]
    starts: list[int]

    def __len__(self) -> int:
        return len(self.ids)


def chains(prev: Turn, nxt: Turn) -> bool:
    """Whether `nxt`'s prompt starts with `prev`'s prompt and reply, token for token."""
    p, r, q = prev.prompt_ids, prev.response_ids, nxt.prompt_ids
    n = len(p)
    return len(q) >= n + len(r) and q[:n] == p and q[n : n + len(r)] == r


def _row(turns: list[Turn]) -> Row:
    last = turns[-1]
    return Row(turns, last.prompt_ids + last.response_ids, [len(t.prompt_ids) for t in turns])


def make_rows(turns: list[Turn], layout: str) -> list[Row]:
    """The rows of `turns`: one per turn, in order ("turn"); or per trajectory, in first-seen
    order, each as few rows as its chain allows ("trajectory")."""
    if layout not in ROW_LAYOUTS:
        raise ValueError(f"row_layout={layout!r} is not one of {', '.join(ROW_LAYOUTS)}")
    if layout == "turn":
        return [_row([t]) for t in turns]
    rows: list[Row] = []
    for traj in by_trajectory(turns).values():
        run = [traj[0]]
        for t in traj[1:]:
            if chains(run[-1], t):
                run.append(t)
            else:
                rows.append(_row(run))
                run = [t]
        rows.append(_row(run))
    return rows


def row_tensors(rows: list[Row], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded rows: (input_ids [B, L], attention_mask [B, L], loss_mask [B, L-1]), the
    loss mask aligned with the targets input_ids[:, 1:] and set on every turn's reply tokens
    (target j predicts token j + 1: a reply at [s, s + n) is targets s - 1 .. s + n - 2)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width - 1), dtype=torch.float32)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(row.ids, dtype=torch.long)
        attn[b, : len(row)] = 1
        for t, s in zip(row.turns, row.starts, strict=True):
            mask[b, s - 1 : s - 1 + len(t.response_ids)] = 1.0
    return ids, attn, mask


def split_by_turn(row: Row, values: list[float]) -> list[list[float]]:
    """A row's values at its masked positions (in order) cut into its turns' shares."""
    out, i = [], 0
    for t in row.turns:
        out.append(values[i : i + len(t.response_ids)])
        i += len(t.response_ids)
    if i != len(values):
        raise ValueError(f"{len(values)} values for {i} reply tokens")
    return out


@dataclass
class TurnView:
    """Where each turn's reply tokens sit in a micro-batch's [B, L-1] row tensors: turn i's
    token j is at (rows[i, j], cols[i, j]) where mask[i, j] = 1. `take(x)` gives the [T, R]
    per-turn view of a row tensor (0 at the padding), as one row per turn would lay it out."""

    rows: torch.Tensor  # [T, R] long
    cols: torch.Tensor  # [T, R] long
    mask: torch.Tensor  # [T, R] float

    @classmethod
    def of(cls, rows: list[Row], device: torch.device) -> TurnView:
        spans = [
            (b, s, len(t.response_ids))
            for b, r in enumerate(rows)
            for t, s in zip(r.turns, r.starts, strict=True)
        ]
        width = max(1, max(n for _, _, n in spans))
        ix_rows = torch.zeros((len(spans), width), dtype=torch.long)
        ix_cols = torch.zeros((len(spans), width), dtype=torch.long)
        mask = torch.zeros((len(spans), width), dtype=torch.float32)
        for i, (b, s, n) in enumerate(spans):
            ix_rows[i] = b
            ix_cols[i, :n] = torch.arange(s - 1, s - 1 + n)
            ix_cols[i, n:] = s - 1  # a real position of the row: finite, and masked out
            mask[i, :n] = 1.0
        return cls(ix_rows.to(device), ix_cols.to(device), mask.to(device))

    def take(self, x: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        return torch.where(self.mask > 0, x[self.rows, self.cols], zero)


def padded(values: list[list[float]], width: int, device: torch.device) -> torch.Tensor:
    """[len(values), width] float tensor, each list left-aligned, 0 after it."""
    out = torch.zeros((len(values), width), dtype=torch.float32)
    for i, v in enumerate(values):
        if v:
            out[i, : len(v)] = torch.tensor(v, dtype=torch.float32)
    return out.to(device)


def row_token_count(rows: list[Row]) -> int:
    """Tokens the model runs over for `rows` (one pass, no padding)."""
    return sum(len(r) for r in rows)
