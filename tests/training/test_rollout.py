"""Rollouts: only the learner's own response tokens carry loss; turn rewards; fixed opponents."""

import re

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from training.batch import build_rows
from training.engines import Generation, GenSettings
from training.engines.hf_engine import TransformersEngine
from training.rewards import RewardShaping
from training.rollout import (
    EpisodeSpec,
    RolloutWorker,
    plan_episodes,
    render_reference_chat,
    rollout_metrics,
)


class ScriptedEngine:
    """The engine calls a rollout makes besides `generate`: nothing to do for a script."""

    def update_weights(self, named):
        pass

    def sleep(self):
        pass

    def wake_up(self):
        pass


class FirstEmptyCell(ScriptedEngine):
    """A scripted engine: answers the first empty cell; seats in `broken` answer garbage."""

    def __init__(self, tok, broken=()):
        self.tok = tok
        self.broken = broken

    def generate(self, prompts, settings, seed, max_tokens=None):
        out = []
        for p in prompts:
            text = self.tok.decode(p)
            mark = re.search(r"you are (\w)", text).group(1)
            rows = re.findall(r"^([.xo]{3})$", text, re.M)
            cell = next((r, c) for r in range(3) for c in range(3) if rows[r][c] == ".")
            answer = (
                "nonsense"
                if (mark == "o") in self.broken
                else f"<answer>{mark}({cell[0]},{cell[1]})</answer>"
            )
            ids = self.tok(answer, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
            out.append(Generation(ids, [-0.1] * len(ids), True))
        return out


@pytest.fixture(scope="module")
def tok(micro_model_dir):
    return AutoTokenizer.from_pretrained(micro_model_dir)


def _worker(engine, tok, **kw):
    return RolloutWorker(
        engine,
        tok,
        prompt_style="compact",
        enable_thinking=False,
        settings=GenSettings(1.0, 1.0, 0, 16),
        shaping=RewardShaping(),
        **kw,
    )


def test_scripted_self_play_rewards(tok):
    # first-empty-cell self-play: x takes (0,0) (0,2) (1,1) (2,0) and wins on the anti-diagonal
    turns, results = _worker(FirstEmptyCell(tok), tok).play([EpisodeSpec("tic_tac_toe", 1, (0, 1))], seed=0)
    assert results[0].returns == [1.0, -1.0]
    x = [t.reward for t in turns if t.seat == 0]
    o = [t.reward for t in turns if t.seat == 1]
    assert x == pytest.approx([0.05, 0.05, 0.05, 1.05])
    assert o == pytest.approx([0.05, 0.05, -0.95])
    assert [t.index for t in turns if t.seat == 0] == [0, 1, 2, 3]


@pytest.mark.parametrize("forfeit, x_reward", [("reference", 0.05), ("game", 0.05 + 1.0)])
def test_invalid_answer_forfeits_with_penalty(tok, forfeit, x_reward):
    turns, results = _worker(FirstEmptyCell(tok, broken=(True,)), tok, forfeit=forfeit).play(
        [EpisodeSpec("tic_tac_toe", 1, (0, 1))], seed=0
    )
    o = [t for t in turns if t.seat == 1]
    assert len(o) == 1 and not o[0].valid
    assert o[0].reward == pytest.approx(-1.0 - 10.0)  # the game's loss plus the extra penalty
    assert results[0].invalid_by == 1
    # reference: the other seat is not paid the win (get_losing_state gives it 0); game: +1
    assert [t.reward for t in turns if t.seat == 0] == pytest.approx([x_reward])
    m = rollout_metrics(turns, results)
    assert m["invalid/tic_tac_toe/p1"] == 1.0 and m["invalid/tic_tac_toe/p0"] == 0.0


def test_fixed_opponent_turns_are_not_recorded(tok):
    specs = [EpisodeSpec("tic_tac_toe", 5, (1,), "random"), EpisodeSpec("tic_tac_toe", 6, (0,), "random")]
    turns, results = _worker(FirstEmptyCell(tok), tok).play(specs, seed=0)
    assert {(t.episode, t.seat) for t in turns} == {(0, 1), (1, 0)}
    assert all(len(r.returns) == 2 for r in results)


def test_only_learner_response_tokens_have_loss_mask(micro_model_dir, tok):
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    engine = TransformersEngine(model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], batch_size=8)
    specs = plan_episodes(
        ("tic_tac_toe",), 6, opponent="self", mix_opponent="random", mix_fraction=0.34, seed=3
    )
    assert sum(len(s.learner_seats) for s in specs) == 6
    turns, _ = _worker(engine, tok).play(specs, seed=1)
    assert turns
    ids, attn, mask = build_rows(
        [t.prompt_ids for t in turns], [t.response_ids for t in turns], tok.pad_token_id
    )
    for b, t in enumerate(turns):
        masked = ids[b, 1:][mask[b] > 0].tolist()
        assert masked == t.response_ids  # exactly the response, in order
        assert mask[b].sum() == len(t.response_ids) == len(t.behaviour_logprobs)
        unmasked = tok.decode(ids[b, 1:][(mask[b] == 0) & (attn[b, 1:] > 0)].tolist())
        assert "Tic-tac-toe" in unmasked and "<|im_start|>assistant" in unmasked  # the prompt: no loss
    # behaviour log-probs equal the trainer's own computation (ratio 1 before any update)
    from training.loss import token_logprobs

    logp, _ = token_logprobs(model, ids, attn, 1.0)
    for b, t in enumerate(turns):
        assert torch.allclose(logp[b][mask[b] > 0], torch.tensor(t.behaviour_logprobs), atol=1e-4)


class ReferenceFirstLegal(ScriptedEngine):
    """A scripted engine for the reference prompt style: the first of the LEGAL ACTIONS, or a
    reply that never stops (cut off at the token limit) when `runaway`."""

    def __init__(self, tok, runaway=False):
        self.tok = tok
        self.runaway = runaway
        self.prompts = []

    def generate(self, prompts, settings, seed, max_tokens=None):
        out = []
        for p in prompts:
            text = self.tok.decode(p)
            self.prompts.append(text)
            legal = re.findall(r"LEGAL ACTIONS:\n(.*?)\.\n", text, re.S)[-1].split(", ")
            opened = text.endswith("<answer>")  # the reference prefills "<answer>" (thinking off)
            reply = f"{legal[0]}</answer>" if opened else f"<answer>{legal[0]}</answer>"
            ids = self.tok(reply, add_special_tokens=False)["input_ids"]
            stopped = not self.runaway
            out.append(
                Generation(
                    ids + ([self.tok.eos_token_id] if stopped else []), [-0.1] * (len(ids) + stopped), stopped
                )
            )
        return out


def test_reference_prompt_style_trains_on_the_reference_text(tok):
    engine = ReferenceFirstLegal(tok)
    worker = _worker(engine, tok)
    worker.style = "reference"
    turns, results = worker.play([EpisodeSpec("tic_tac_toe", 1, (0, 1))], seed=0)
    assert all(t.valid for t in turns) and results[0].invalid_by is None
    assert "LEGAL ACTIONS:" in engine.prompts[0] and "<X(0,0)>" in engine.prompts[0]
    # the chat grows: a seat's later prompt holds its earlier reply as an assistant message
    later = [p for p in engine.prompts if p.count("<|im_start|>assistant") >= 3]
    assert later and "<answer><X(0,0)></answer>" in later[0]


def test_reply_cut_off_at_the_limit_forfeits(tok):
    worker = _worker(ReferenceFirstLegal(tok, runaway=True), tok, forfeit_tokens=4096)
    worker.style = "reference"
    turns, results = worker.play([EpisodeSpec("tic_tac_toe", 1, (0, 1))], seed=0)
    assert len(turns) == 1 and not turns[0].valid and results[0].invalid_by == 0
    # with forfeit_tokens=0 (the tiny preset) the same cut-off reply is parsed as before
    worker = _worker(ReferenceFirstLegal(tok, runaway=True), tok, forfeit_tokens=0)
    worker.style = "reference"
    turns, _ = worker.play([EpisodeSpec("tic_tac_toe", 1, (0, 1))], seed=0)
    assert turns[0].valid


def test_sequence_nearly_full_forfeits(tok):
    # the reference forfeits a turn that leaves <= 1000 tokens of sequence_length
    worker = _worker(ReferenceFirstLegal(tok), tok, sequence_length=1001)
    worker.style = "reference"
    turns, results = worker.play([EpisodeSpec("tic_tac_toe", 1, (0, 1))], seed=0)
    assert len(turns) == 1 and not turns[0].valid and results[0].invalid_by == 0


def test_reference_chat_rendering_as_the_env_manager():
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U1"},
        {"role": "assistant", "content": "<think>\nwhy\n</think><answer><X(0,0)></answer>"},
        {"role": "user", "content": "U2"},
    ]
    text = render_reference_chat(msgs, thinking=True)
    assert text == (
        "<|im_start|>system\nS<|im_end|><|im_start|>user\nU1<|im_end|>"
        "<|im_start|>assistant\n<think>\nwhy\n</think><answer><X(0,0)></answer><|im_end|>"
        "<|im_start|>user\nU2<|im_end|><|im_start|>assistant\n<think>\n"
    )  # earlier thinking kept, no newline after <|im_end|>, the reply's "<think>" forced
    assert render_reference_chat(msgs[:2], thinking=False).endswith("<|im_start|>assistant\n<answer>")


class RecordingCaps(ReferenceFirstLegal):
    """ReferenceFirstLegal that records the per-prompt reply limits it was given."""

    def __init__(self, tok):
        super().__init__(tok)
        self.caps = []

    def generate(self, prompts, settings, seed, max_tokens=None):
        self.caps.append((list(map(len, prompts)), max_tokens))
        return super().generate(prompts, settings, seed)


def test_reply_limit_is_the_tokens_left_in_the_sequence(tok):
    # the reference's env manager: max_new_tokens = max(min(max_new_tokens, sequence_length - prompt), 1)
    engine = RecordingCaps(tok)
    worker = _worker(engine, tok, sequence_length=10_000)
    worker.style = "reference"
    worker.play([EpisodeSpec("tic_tac_toe", 1, (0, 1))], seed=0)
    assert all(caps == [16] * len(lens) for lens, caps in engine.caps)  # far from the end: 16
    first = engine.caps[0][0][0]
    worker.sequence_length = first + 5  # 5 tokens left after the first prompt
    engine.caps.clear()
    worker.play([EpisodeSpec("tic_tac_toe", 1, (0, 1))], seed=0)
    assert engine.caps[0][1] == [5]
    assert worker.reply_caps([[1] * (first + 9)]) == [1]  # never below one token
    worker.sequence_length = 0  # off (the tiny preset): the engine's own limit
    assert worker.reply_caps([[1] * 3]) is None


def test_transformers_engine_cuts_each_reply_at_its_limit(tok, micro_model_dir):
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    engine = TransformersEngine(model, pad_id=tok.pad_token_id, eos_ids=[], batch_size=4)
    prompt = tok("x", add_special_tokens=False)["input_ids"]
    gens = engine.generate([prompt] * 3, GenSettings(1.0, 1.0, 0, 6), seed=0, max_tokens=[1, 3, 6])
    assert [len(g.token_ids) for g in gens] == [1, 3, 6]  # no end-of-turn token: all cut
    assert not any(g.stopped for g in gens) and [len(g.logprobs) for g in gens] == [1, 3, 6]
