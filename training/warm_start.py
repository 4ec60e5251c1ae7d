"""Format before reward: a supervised warm start on legal moves, in the rollout's own prompts.

A pretrained instruct model asked for `<answer>MOVE</answer>` at first rarely writes it (SmolLM2
at step 0: no well-formed reply, every move invalid, every advantage 0), so RL has nothing to
learn from. This phase teaches the answer format and legality only, before the first RL step:

  positions  random play from a new episode (`training.tiny.random_position`'s rule), each
             seat's earlier turns answered with well-formed legal moves, so the chat of every
             prompt style is the one the rollout would build (`rollout.seat_messages`);
  prompt     rendered exactly as the rollout renders it (`rollout.render_prompt`, the forced
             reply start of the reference style included);
  target     the reply the rollout parses: `<answer>MOVE</answer>` and the end-of-turn token,
             less what the prompt already forces;
  loss       soft-target cross-entropy on the reply tokens only, against q_t = the next-token
             distribution of a uniformly random legal reply agreeing with the sampled one so far
             (`training.tiny.soft_targets`):

                 L = sum_{t in reply} sum_v -q_t(v) log p_theta(v | prompt, reply_<t) / |reply|

             logits are computed at the reply positions only (the LM head over 49k tokens at
             every prompt position would be most of the step's time and memory);
  reported   per step the excess loss over the floor, KL(q || p) per reply token (0: the model
             spreads its mass over legal moves exactly as q), and every `eval_every` steps the
             invalid-move and malformed-reply rates of greedy replies on held-out positions.

By default (`format_warmstart_policy="uniform"`) the moves are uniform over the legal ones: the
warm start teaches what a move looks like, never which move is good; everything about playing
well is left to RL. "tactical" spreads q over a simple policy's choices instead (the issue's
"the game engine provides the legal actions and a simple policy's choice"): the moves that win
at once, else those after which the opponent has no move that wins at once (a block), else all
legal moves; in games with chance or hidden information it is "uniform". Whatever a checkpoint
warm-started this way plays well then owes something to imitation, so a run reports its
checkpoint after the warm start (checkpoints/initial) beside the RL steps'. Off (0 steps) for the reference
presets: the reference trains Qwen3-4B from its instruct checkpoint with no such phase, and an
unparsable or illegal move there is a lost game (-1 - 10, its environments' `lose_for_wrong_format`),
which our `forfeit="reference"` reproduces.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspiel
import torch

from mars_eval.games import make_game, reference_env
from mars_eval.models.base import split_thinking
from mars_eval.prompts import PromptPack
from training.batch import build_rows
from training.rollout import render_prompt, reply_prefill, seat_messages
from training.tiny import soft_targets

_WELL_FORMED = re.compile(r"<answer>.*?</answer>", re.S)


@dataclass
class Position:
    """One prompt of the warm start: the episode at that point (to parse a reply against), the
    seat to move, its prompt tokens, each legal reply's tokens (as the model must write it) and
    the replies the targets spread over (all of them, or the tactical policy's choices)."""

    episode: Any
    seat: int
    prompt_ids: list[int]
    replies: list[list[int]]
    targets: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.targets:
            self.targets = self.replies


def answer_text(move: str) -> str:
    return f"<answer>{move}</answer>"


def written_moves(ep: Any, style: str) -> dict[str, str]:
    """Each legal move (our name, what `ep.apply` takes) as a reply must write it: the reference
    environments' action string in reference style (`<x(0,0)>`), our name otherwise."""
    if style != "reference":
        return {name: name for name in ep.legal_actions()}
    player = ep.current_player
    return {ep.name_of(a): reference_env.action_string(ep, player, a) for a in ep.state.legal_actions(player)}


def tactical_moves(ep: Any, names: list[str]) -> list[str]:
    """The moves of `names` (legal move names, as `ep.apply` takes them) a one-ply tactician
    plays: those that win at once; else those after which the opponent has no reply that wins
    at once; else all of them. Games with chance or hidden information: all of them."""
    state = ep.state
    kind = state.get_game().get_type()
    perfect = kind.information == pyspiel.GameType.Information.PERFECT_INFORMATION
    if not perfect or kind.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC:
        return names
    me = state.current_player()
    action_of = {ep.name_of(a): a for a in state.legal_actions(me)}

    def after(st: Any, action: int) -> Any:
        child = st.clone()
        child.apply_action(action)
        return child

    children = {n: after(state, action_of[n]) for n in names if n in action_of}
    wins = [n for n, c in children.items() if c.is_terminal() and c.returns()[me] > 0]
    if wins:
        return wins

    def opponent_wins(child: Any) -> bool:
        if child.is_terminal():
            return False
        them = child.current_player()
        return any(
            (g := after(child, a)).is_terminal() and g.returns()[them] > 0 for a in child.legal_actions(them)
        )

    safe = [n for n, c in children.items() if not opponent_wins(c)]
    return safe or names


def positions(
    games: tuple[str, ...],
    n: int,
    seed: int,
    tok: Any,
    *,
    style: str,
    thinking: bool,
    pack: PromptPack | None,
    policy: str = "uniform",
) -> list[Position]:
    """`n` positions spread over `games`, reached by random legal play (0-11 moves); each with
    its target replies by `policy` ("uniform": every legal reply; "tactical": `tactical_moves`)."""
    rng = random.Random(seed)
    prefill = reply_prefill(style, thinking)
    eos = tok.eos_token_id
    out: list[Position] = []
    while len(out) < n:
        game = make_game(games[len(out) % len(games)])
        ep = game.new_episode(rng.randrange(1 << 30))
        replies: dict[int, list[str]] = defaultdict(list)
        chats: dict[int, list[dict]] = {}
        stop_after = rng.randrange(0, 12)
        for _move in range(stop_after):
            if ep.is_terminal:
                break
            seat = ep.current_player
            written = written_moves(ep, style)
            move = rng.choice(sorted(written))
            if style == "full":  # the chat grows as the rollout grows it
                seat_messages(style, ep, seat, replies[seat], chats, pack)
                chats[seat].append({"role": "assistant", "content": answer_text(written[move])})
            replies[seat].append(answer_text(written[move]))
            ep.apply(move)
        if ep.is_terminal or ep.current_player < 0:
            continue
        seat = ep.current_player
        messages = seat_messages(style, ep, seat, replies[seat], chats, pack)
        prompt = render_prompt(tok, messages, style, thinking)
        written = written_moves(ep, style)

        def reply_ids(names: list[str], written: dict[str, str] = written) -> list[list[int]]:
            texts = [answer_text(written[m])[len(prefill) :] for m in names]
            return [tok(text, add_special_tokens=False)["input_ids"] + [eos] for text in texts]

        chosen = tactical_moves(ep, list(written)) if policy == "tactical" else list(written)
        out.append(Position(ep, seat, prompt, reply_ids(list(written)), reply_ids(chosen)))
    return out


def reply_logits(
    model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Logits [N, V] at the N positions that predict a reply token (`mask`, aligned with
    ids[:, 1:]): the body runs on every token, the LM head only where the loss needs it."""
    hidden = model.base_model(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state
    picked = hidden[:, :-1][mask.bool()]
    return model.get_output_embeddings()(picked).float()


def invalid_rates(
    model: torch.nn.Module,
    tok: Any,
    held_out: list[Position],
    *,
    style: str,
    thinking: bool,
    max_new_tokens: int,
) -> dict[str, float]:
    """Greedy replies on the held-out positions, parsed as the rollout parses them: the share
    of invalid moves (no legal move read) and of malformed replies (no `<answer>...</answer>`)."""
    prefill = reply_prefill(style, thinking)
    invalid = malformed = 0
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.inference_mode():
        for start in range(0, len(held_out), 16):
            chunk = held_out[start : start + 16]
            width = max(len(p.prompt_ids) for p in chunk)
            ids = torch.tensor([[pad] * (width - len(p.prompt_ids)) + p.prompt_ids for p in chunk])
            attn = torch.tensor([[0] * (width - len(p.prompt_ids)) + [1] * len(p.prompt_ids) for p in chunk])
            out = model.generate(
                input_ids=ids,
                attention_mask=attn,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=pad,
            )
            for p, row in zip(chunk, out[:, width:].tolist(), strict=True):
                text = prefill + tok.decode(row, skip_special_tokens=True)
                content, _ = split_thinking(text)
                if style == "reference":
                    action = p.episode.parse_reply(text, thinking)
                else:
                    action = p.episode.parse(content, "full")
                invalid += action is None
                malformed += _WELL_FORMED.search(text) is None
    n = max(1, len(held_out))
    return {"invalid_rate": invalid / n, "malformed_rate": malformed / n}


def format_warmstart(
    model: torch.nn.Module,
    tok: Any,
    cfg: Any,
    *,
    pack: PromptPack | None,
    log: Callable[[str], None] = print,
    metrics_path: Path | None = None,
) -> dict[str, float]:
    """`cfg.format_warmstart_steps` AdamW steps of the loss above (module docstring) on batches
    of `cfg.format_warmstart_batch_size` fresh positions, lr `cfg.format_warmstart_lr` with a
    short warm-up; held-out rates at step 0, every `cfg.format_warmstart_eval_every` steps and at
    the end. One JSON line per step in `metrics_path` when given. Returns the summary."""
    style, thinking = cfg.prompt_style, cfg.enable_thinking
    steps, batch = cfg.format_warmstart_steps, cfg.format_warmstart_batch_size
    train = positions(
        cfg.games,
        steps * batch,
        cfg.seed + 101,
        tok,
        style=style,
        thinking=thinking,
        pack=pack,
        policy=cfg.format_warmstart_policy,
    )
    held_out = positions(
        cfg.games,
        cfg.format_warmstart_eval_positions,
        cfg.seed + 202,
        tok,
        style=style,
        thinking=thinking,
        pack=pack,
    )

    def rates() -> dict[str, float]:
        model.eval()
        got = invalid_rates(
            model, tok, held_out, style=style, thinking=thinking, max_new_tokens=cfg.max_new_tokens
        )
        model.train()
        return got

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.format_warmstart_lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 5))
    rng = random.Random(cfg.seed + 303)
    sink = metrics_path.open("a", encoding="utf-8") if metrics_path is not None else None
    first = rates()
    summary: dict[str, float] = {
        "format_warmstart_steps": steps,
        **{f"{k}_first": v for k, v in first.items()},
    }
    shown = f"invalid {first['invalid_rate']:.0%}, malformed {first['malformed_rate']:.0%}"
    log(f"format warm start: step 0 {shown}")
    started = time.perf_counter()
    model.train()
    last: dict[str, float] = dict(first)
    try:
        for step in range(1, steps + 1):
            step_started = time.perf_counter()
            chunk = train[(step - 1) * batch : step * batch]
            sampled = [rng.choice(p.targets) for p in chunk]
            ids, attn, mask = build_rows([p.prompt_ids for p in chunk], sampled, pad)
            logits = reply_logits(model, ids, attn, mask)
            q = torch.zeros_like(logits)
            row = 0
            for p, reply in zip(chunk, sampled, strict=True):
                for dist in soft_targets(reply, p.targets):
                    for token, prob in dist.items():
                        q[row, token] = prob
                    row += 1
            logp = torch.log_softmax(logits, dim=-1)
            ce = -(q * logp).sum(-1)
            loss = ce.mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            with torch.no_grad():
                floor = -(q * torch.log(q.clamp_min(1e-12))).sum(-1)
                record: dict[str, float] = {
                    "step": step,
                    "loss": float(loss),
                    "kl": float((ce - floor).mean()),
                    "step_s": time.perf_counter() - step_started,  # the supervised step alone
                }
            if step % max(1, cfg.format_warmstart_eval_every) == 0 or step == steps:
                last = rates()
                record.update(last)
                log(
                    f"format warm start step {step}/{steps}: KL {record['kl']:.3f}, "
                    f"invalid {last['invalid_rate']:.0%}, malformed {last['malformed_rate']:.0%}"
                )
            if sink is not None:
                sink.write(json.dumps(record) + "\n")
                sink.flush()
    finally:
        if sink is not None:
            sink.close()
    model.eval()
    summary.update({f"{k}_last": v for k, v in last.items()})
    summary["format_warmstart_s"] = time.perf_counter() - started
    return summary
