"""The tiny preset's starting model: built from scratch, then a short supervised warm start.

There is no pretrained model on a 2-core CPU without a network, so the tiny preset stands in
for pretraining with a few hundred supervised steps that teach the answer format and the rules
of legality only: prompts are the games' compact views of random positions (reached by random
play), and each target is a *uniformly random legal move* in the answer format,
`<answer>ACTION</answer>` followed by the end-of-turn token. The warm-started model therefore
plays legal but random moves; everything it learns about playing well comes from RL.

The tokenizer is a byte-level BPE trained on the same compact prompts and answers
(mars_eval.models.tiny.build_tiny_model), with Qwen3's ChatML template; `<answer>` is plain
text, so answers survive decode(skip_special_tokens=True).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import torch

from mars_eval.games import make_game
from training.batch import build_rows
from training.loss import token_logprobs


def random_position(game_name: str, rng: random.Random) -> tuple[Any, int]:
    """A non-terminal episode after a random number of random moves, and the player to move."""
    game = make_game(game_name)
    while True:
        ep = game.new_episode(rng.randrange(1 << 30))
        for _ in range(rng.randrange(0, 12)):
            if ep.is_terminal:
                break
            ep.apply(rng.choice(ep.legal_actions()))
        if not ep.is_terminal:
            return ep, ep.current_player


def warmstart_examples(games: tuple[str, ...], n: int, seed: int) -> list[tuple[list[dict], str]]:
    """n (compact chat, target answer) pairs spread evenly over the games."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ep, player = random_position(games[i % len(games)], rng)
        out.append((ep.messages(player, "compact"), f"<answer>{rng.choice(ep.legal_actions())}</answer>"))
    return out


_BOARD_LINE = re.compile(r"^[.xo]+$")


def tokenizer_corpus(games: tuple[str, ...], n: int = 600, seed: int = 1) -> list[str]:
    """Compact prompts and answers, with board rows left out.

    Leaving rows like ".x." out of the BPE corpus means no token ever spans two board cells,
    so every cell is one token at a fixed offset in the prompt: far easier for a tiny model.
    """
    examples = warmstart_examples(games, n, seed)
    prompts = [
        "\n".join(line for line in m[-1]["content"].split("\n") if not _BOARD_LINE.match(line)) for m, _ in examples
    ]
    return prompts + [a for _, a in examples] + ["user", "assistant"] * 50


def build_initial_model(out_dir: Path, cfg: Any) -> Path:
    """Create the random-weight tiny model and its tokenizer in out_dir (HF format)."""
    from mars_eval.models.tiny import build_tiny_model

    return build_tiny_model(
        out_dir,
        tokenizer_corpus(cfg.games),
        vocab_size=cfg.tiny_vocab_size,
        hidden_size=cfg.tiny_hidden_size,
        num_layers=cfg.tiny_layers,
        num_heads=cfg.tiny_heads,
        num_kv_heads=max(1, cfg.tiny_heads // 2),
        max_position=cfg.tiny_max_position,
        seed=cfg.seed,
    )


def supervised_warmstart(model: torch.nn.Module, tokenizer: Any, cfg: Any, log=print) -> dict[str, float]:
    """Cross-entropy on the answer tokens (+ end-of-turn) of random legal moves. Returns stats."""
    examples = warmstart_examples(cfg.games, cfg.warmstart_examples, cfg.seed + 17)
    prompts, answers = [], []
    for messages, answer in examples:
        text = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, enable_thinking=False
        )
        prompts.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        answers.append(tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warmstart_lr, weight_decay=0.0)
    total = cfg.warmstart_epochs * (
        (len(examples) + cfg.warmstart_batch_size - 1) // cfg.warmstart_batch_size
    )
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * max(0.05, 1 - s / total)
    )
    gen = torch.Generator().manual_seed(cfg.seed)
    model.train()
    step, loss_first, loss_last = 0, None, None
    for _epoch in range(cfg.warmstart_epochs):
        order = torch.randperm(len(examples), generator=gen).tolist()
        for i in range(0, len(order), cfg.warmstart_batch_size):
            idx = order[i : i + cfg.warmstart_batch_size]
            ids, attn, mask = build_rows(
                [prompts[j] for j in idx], [answers[j] for j in idx], tokenizer.pad_token_id
            )
            logp, _ = token_logprobs(model, ids, attn)
            loss = -(logp * mask).sum() / mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            loss_last = float(loss.detach())
            loss_first = loss_first if loss_first is not None else loss_last
            if step % 50 == 0:
                log(f"warm start step {step}/{total}: loss {loss_last:.3f}")
    model.eval()
    return {
        "warmstart_steps": step,
        "warmstart_loss_first": loss_first or 0.0,
        "warmstart_loss_last": loss_last or 0.0,
    }
