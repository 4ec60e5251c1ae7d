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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mars_eval.games import make_game
from training.batch import build_rows


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


def warmstart_examples(games: tuple[str, ...], n: int, seed: int) -> list[tuple[list[dict], str, list[str]]]:
    """n (compact chat, sampled target answer, all legal answers) triples spread over the games."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ep, player = random_position(games[i % len(games)], rng)
        legal = [f"<answer>{a}</answer>" for a in ep.legal_actions()]
        out.append((ep.messages(player, "compact"), rng.choice(legal), legal))
    return out


_BOARD_LINE = re.compile(r"^[.xo]+$")


def tokenizer_corpus(games: tuple[str, ...], n: int = 600, seed: int = 1) -> list[str]:
    """Compact prompts and answers, with board rows left out.

    Leaving rows like ".x." out of the BPE corpus means no token ever spans two board cells,
    so every cell is one token at a fixed offset in the prompt: far easier for a tiny model.
    """
    examples = warmstart_examples(games, n, seed)
    prompts = [
        "\n".join(line for line in m[-1]["content"].split("\n") if not _BOARD_LINE.match(line))
        for m, _, _ in examples
    ]
    return prompts + [a for _, a, _ in examples] + ["user", "assistant"] * 50


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


def soft_targets(sampled: list[int], legal: list[list[int]]) -> list[dict[int, float]]:
    """Per answer position t, the next-token distribution of a uniformly random legal answer
    that agrees with the sampled answer's first t tokens (a trie over the legal answers).

    Cross-entropy against these is the expectation of the sampled-target loss over the random
    legal move, with far less noise: the model sees the whole set of legal moves at once.
    """
    out = []
    for t in range(len(sampled)):
        alive = [a for a in legal if a[:t] == sampled[:t] and len(a) > t]
        counts: dict[int, float] = {}
        for a in alive:
            counts[a[t]] = counts.get(a[t], 0.0) + 1.0
        total = sum(counts.values())
        out.append({tok: c / total for tok, c in counts.items()} if total else {sampled[t]: 1.0})
    return out


def supervised_warmstart(
    model: torch.nn.Module, tokenizer: Any, cfg: Any, log: Callable[[str], None] = print
) -> dict[str, float]:
    """Soft-target cross-entropy on the answer tokens (+ end-of-turn) of legal moves.

    Loss per example: sum_t CE(q_t, p_theta(. | prompt, answer_<t)) / len(answer), with q_t from
    `soft_targets`. Reports the excess over the floor, KL(q || p) per token (0 = perfect).
    """
    examples = warmstart_examples(cfg.games, cfg.warmstart_examples, cfg.seed + 17)
    eos = tokenizer.eos_token_id
    prompts, answers, targets = [], [], []
    for messages, answer, legal in examples:
        text = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, enable_thinking=False
        )
        prompts.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        ans = tokenizer(answer, add_special_tokens=False)["input_ids"] + [eos]
        legal_ids = [tokenizer(a, add_special_tokens=False)["input_ids"] + [eos] for a in legal]
        answers.append(ans)
        targets.append(soft_targets(ans, legal_ids))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warmstart_lr, weight_decay=0.0)
    bs = cfg.warmstart_batch_size
    total = cfg.warmstart_epochs * ((len(examples) + bs - 1) // bs)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * max(0.05, 1 - s / total)
    )
    gen = torch.Generator().manual_seed(cfg.seed)
    vocab = model.get_input_embeddings().weight.shape[0]
    model.train()
    step, first, last = 0, None, None
    for _epoch in range(cfg.warmstart_epochs):
        order = torch.randperm(len(examples), generator=gen).tolist()
        for i in range(0, len(order), bs):
            idx = order[i : i + bs]
            ids, attn, mask = build_rows(
                [prompts[j] for j in idx], [answers[j] for j in idx], tokenizer.pad_token_id
            )
            q = torch.zeros(mask.shape + (vocab,))
            for b, j in enumerate(idx):
                for t, pos in enumerate(mask[b].nonzero().squeeze(-1).tolist()):
                    for tok, prob in targets[j][t].items():
                        q[b, pos, tok] = prob
            logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, :-1].float()
            logp = torch.log_softmax(logits, dim=-1)
            ce = -(q * logp).sum(-1)  # [B, L-1]
            loss = (ce * mask).sum() / mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            with torch.no_grad():
                floor = -(q * torch.log(q.clamp_min(1e-12))).sum(-1)
                last = float(((ce - floor) * mask).sum() / mask.sum())
            first = first if first is not None else last
            if step % 50 == 0:
                log(f"warm start step {step}/{total}: excess loss (KL to legal-uniform) {last:.4f}")
    model.eval()
    return {"warmstart_steps": step, "warmstart_kl_first": first or 0.0, "warmstart_kl_last": last or 0.0}
