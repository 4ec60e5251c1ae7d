"""The format warm start (training/warm_start.py): its targets are replies the rollout accepts,
its prompts are the rollout's, it lowers the loss and logs held-out invalid-move rates per step,
and the config refuses settings it cannot honour. On the micro model (seconds); the real-model
check (SmolLM2 from all-invalid to mostly legal) is marked real_model and slow."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from mars_eval.models.base import ConfigError
from training.config import PRESETS, build_config, validate
from training.rollout import render_prompt, reply_prefill, seat_messages
from training.warm_start import format_warmstart, positions, tactical_moves


@pytest.fixture(scope="module")
def micro(micro_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(micro_model_dir), micro_model_dir


@pytest.mark.parametrize("style", ["compact", "compact-legal", "full", "reference"])
def test_every_target_is_a_reply_the_rollout_parses_as_a_legal_move(style, micro) -> None:
    tok, _ = micro
    found = positions(("tic_tac_toe", "kuhn_poker"), 12, 0, tok, style=style, thinking=False, pack=None)
    assert len(found) == 12
    prefill = reply_prefill(style, False)
    for p in found:
        legal = set(p.episode.legal_actions())
        assert len(p.replies) == len(legal)
        read = set()
        for reply in p.replies:
            assert reply[-1] == tok.eos_token_id
            text = prefill + tok.decode(reply, skip_special_tokens=True)
            move = (
                p.episode.parse_reply(text, False) if style == "reference" else p.episode.parse(text, "full")
            )
            assert move in legal
            read.add(move)
        assert read == legal  # one reply per legal move, none lost to tokenization


def test_prompts_are_the_rollouts(micro) -> None:
    """Compact: the position alone; reference: the chat rebuilt from the seat's earlier replies
    (well-formed answers of its moves); full: a first turn is the system prompt and observation."""
    tok, _ = micro
    for style in ("compact", "reference", "full"):
        checked = 0
        for p in positions(("tic_tac_toe", "kuhn_poker"), 30, 3, tok, style=style, thinking=False, pack=None):
            own = [f"<answer>{name}</answer>" for who, name in p.episode.history if who == p.seat]
            if style == "reference" and own:
                continue  # earlier replies are written as the reference writes moves (checked above)
            if style == "full" and p.episode.history:
                continue
            messages = seat_messages(style, p.episode, p.seat, own, {}, None)
            assert p.prompt_ids == render_prompt(tok, messages, style, False)
            checked += 1
        assert checked >= 3


def test_warm_start_lowers_the_loss_and_logs_rates(micro, tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    tok, path = micro
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    cfg = replace(
        build_config("micro"),
        model=str(path),
        format_warmstart_steps=6,
        format_warmstart_batch_size=4,
        format_warmstart_lr=3e-3,
        format_warmstart_eval_every=3,
        format_warmstart_eval_positions=6,
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lines = tmp_path / "warmstart.jsonl"
    summary = format_warmstart(model, tok, cfg, pack=None, log=lambda *_: None, metrics_path=lines)
    rows = [json.loads(x) for x in lines.read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 7))
    assert all(r["kl"] >= -1e-6 and r["loss"] > 0 and r["step_s"] > 0 for r in rows)
    assert rows[-1]["kl"] < rows[0]["kl"]
    assert {"invalid_rate", "malformed_rate"} <= set(rows[2]) and "invalid_rate" not in rows[0]
    assert 0 <= summary["invalid_rate_last"] <= 1 and summary["format_warmstart_steps"] == 6
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_config_refuses_what_the_warm_start_cannot_honour() -> None:
    smol = build_config("smol")
    assert smol.format_warmstart_steps > 0  # the LLM preset learns the format first
    assert PRESETS["qwen3-4b"].get("format_warmstart_steps", 0) == 0  # the reference: no such phase
    assert build_config("qwen3-4b").format_warmstart_steps == 0
    for change, needle in (
        ({"enable_thinking": True}, "enable_thinking=false"),
        ({"format_warmstart_steps": -1}, "format_warmstart_steps must be >= 0"),
        ({"format_warmstart_batch_size": 0}, "format_warmstart_batch_size must be >= 1"),
        ({"format_warmstart_lr": float("nan")}, "format_warmstart_lr"),
        ({"format_warmstart_lr": 0.0}, "format_warmstart_lr"),
    ):
        with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
            validate(replace(smol, **change))
    with pytest.raises(ConfigError, match="tiny model has its own"):
        validate(replace(build_config("micro"), format_warmstart_steps=2))


@pytest.mark.real_model
@pytest.mark.slow
def test_smollm2_learns_the_format(monkeypatch) -> None:
    """SmolLM2-135M-Instruct: every held-out reply invalid at step 0, most legal after a few
    steps (measured: 100% -> 25% invalid, 0% malformed, after 6 steps of batch 8)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.support.real_model import THREADS, pull_real_model

    path = pull_real_model()
    for key, value in THREADS.items():
        monkeypatch.setenv(key, value)
    from training.chat_template import apply_chat_system_prompt

    tok = AutoTokenizer.from_pretrained(path)
    cfg = replace(build_config("smol"), format_warmstart_steps=6, format_warmstart_eval_every=6)
    assert apply_chat_system_prompt(tok, cfg.chat_system_prompt)  # the prompts the trainer uses
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    cfg = replace(cfg, format_warmstart_eval_positions=8)
    summary = format_warmstart(model, tok, cfg, pack=None, log=lambda *_: None)
    assert summary["invalid_rate_first"] >= 0.75
    assert summary["invalid_rate_last"] <= 0.5 and summary["malformed_rate_last"] <= 0.25


def _played(moves: list[str]):
    from mars_eval.games import make_game

    ep = make_game("tic_tac_toe").new_episode(0)
    for move in moves:
        ep.apply(move)
    return ep


def test_tactical_moves_win_at_once_else_block_else_all() -> None:
    win = _played(["x(0,0)", "o(1,1)", "x(0,1)", "o(2,2)"])  # x completes the top row
    assert tactical_moves(win, win.legal_actions()) == ["x(0,2)"]
    block = _played(["x(0,0)", "o(1,1)", "x(0,1)"])  # o must take (0,2)
    assert tactical_moves(block, block.legal_actions()) == ["o(0,2)"]
    quiet = _played(["x(1,1)"])
    assert tactical_moves(quiet, quiet.legal_actions()) == quiet.legal_actions()
    # o threatens (1,2), but x wins at once at (0,2): the win, not the block
    both = _played(["x(0,0)", "o(1,0)", "x(0,1)", "o(1,1)"])
    assert tactical_moves(both, both.legal_actions()) == ["x(0,2)"]
    # x threatens (0,2) and (2,0) at once: no move leaves o safe, so every legal move
    lost = _played(["x(0,0)", "o(1,1)", "x(1,0)", "o(2,1)", "x(0,1)"])
    assert tactical_moves(lost, lost.legal_actions()) == lost.legal_actions()


def test_tactical_targets_are_a_subset_of_the_legal_replies(micro) -> None:
    tok, _ = micro
    found = positions(
        ("tic_tac_toe",), 40, 5, tok, style="compact-legal", thinking=False, pack=None, policy="tactical"
    )
    narrowed = 0
    for p in found:
        assert p.targets and all(t in p.replies for t in p.targets)
        narrowed += len(p.targets) < len(p.replies)
    assert narrowed > 0  # some positions had a win or a block to make
    uniform = positions(("tic_tac_toe",), 40, 5, tok, style="compact-legal", thinking=False, pack=None)
    assert all(p.targets == p.replies for p in uniform)


def test_tactical_is_uniform_where_chance_or_hidden_information() -> None:
    from mars_eval.games import make_game

    ep = make_game("kuhn_poker").new_episode(0)
    assert tactical_moves(ep, ep.legal_actions()) == ep.legal_actions()


def test_compact_legal_prompt_lists_the_legal_moves_of_board_games_only() -> None:
    ep = _played(["x(1,1)"])
    (message,) = ep.messages(1, "compact-legal")
    compact = ep.messages(1, "compact")[0]["content"]
    assert message["content"].startswith(compact)
    listed = message["content"][len(compact) :]
    assert all(move in listed for move in ep.legal_actions()) and "o(1,1)" not in listed
    from mars_eval.games import make_game

    poker = make_game("kuhn_poker").new_episode(0)
    seat = poker.current_player
    assert poker.messages(seat, "compact-legal") == poker.messages(seat, "compact")  # lists Options already


def test_format_warmstart_policy_is_validated() -> None:
    with pytest.raises(ConfigError, match="format_warmstart_policy"):
        validate(replace(build_config("micro"), format_warmstart_policy="greedy"))
