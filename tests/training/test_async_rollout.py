"""rollout_schedule=async: environments advance as their own replies arrive, with the same
trajectories whatever order the replies come back in (training/rollout_async.py)."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.training.test_composition import ThreadGroup
from training.composition import plan_environments, play_batch
from training.engines import Generation, GenSettings, Request
from training.engines.hf_engine import TransformersEngine
from training.rewards import RewardShaping
from training.rollout import EpisodeSpec, RolloutWorker
from training.rollout_async import reply_seed


class Mover:
    """A scripted tic-tac-toe player, random by the request's seed: a random empty cell after
    a random number of filler tokens (replies of different lengths: clocks differ), or 1 time
    in 6 nonsense (a forfeit: episodes of different lengths)."""

    def __init__(self, tok):
        self.tok = tok
        self.seeds: list[int] = []

    def generate(self, prompts, settings, seed, max_tokens=None):
        out = []
        for i, p in enumerate(prompts):
            self.seeds.append(seed)
            rng = random.Random(seed * 1000 + i)
            text = self.tok.decode(p)
            mark = re.search(r"you are (\w)", text).group(1)
            rows = re.findall(r"^([.xo]{3})$", text, re.M)
            empty = [(r, c) for r in range(3) for c in range(3) if rows[r][c] == "."]
            r, c = rng.choice(empty)
            answer = "nonsense" if rng.random() < 1 / 6 else f"<answer>{mark}({r},{c})</answer>"
            ids = [self.tok.pad_token_id] * rng.randrange(6) + self.tok(answer, add_special_tokens=False)[
                "input_ids"
            ]
            ids.append(self.tok.eos_token_id)
            out.append(Generation(ids, [-0.1] * len(ids), True))
        return out


class Shuffled:
    """A streaming engine whose replies come back in a random order: each `advance` returns a
    random non-empty share of the queued requests, shuffled (each generated alone, with its own
    seed). `arrivals` records the order."""

    def __init__(self, inner, order_seed: int):
        self.inner = inner
        self.rng = random.Random(order_seed)
        self.queue: list[Request] = []
        self.arrivals: list = []
        self.ticks = 0

    def submit(self, requests, settings):
        self.queue += requests
        self.settings = settings

    def advance(self):
        self.ticks += 1
        if not self.queue:
            return []
        self.rng.shuffle(self.queue)
        k = self.rng.randint(1, len(self.queue))
        done, self.queue = self.queue[:k], self.queue[k:]
        out = []
        for req in done:
            (gen,) = self.inner.generate([req.prompt], self.settings, req.seed, [req.max_tokens])
            out.append((req.key, gen))
            self.arrivals.append(req.key)
        return out

    def abort(self):
        self.queue.clear()


@pytest.fixture(scope="module")
def tok(micro_model_dir):
    return AutoTokenizer.from_pretrained(micro_model_dir)


def _worker(engine, tok, schedule="async"):
    return RolloutWorker(
        engine,
        tok,
        prompt_style="compact",
        enable_thinking=False,
        settings=GenSettings(1.0, 1.0, 0, 16),
        shaping=RewardShaping(),
        schedule=schedule,
    )


def _envs():
    return [[EpisodeSpec("tic_tac_toe", 10 * e + k, (0, 1)) for k in range(3)] for e in range(5)]


def _signature(turns, results, finished):
    return (
        [
            (t.episode, t.seat, t.index, t.prompt_ids, t.response_ids, t.valid, round(t.reward, 6))
            for t in turns
        ],
        [(r.returns, r.invalid_by, r.turns) for r in results],
        finished,
    )


def test_the_same_trajectories_whatever_order_the_replies_arrive_in(tok):
    runs, orders = [], []
    for order_seed in range(4):
        engine = Shuffled(Mover(tok), order_seed)
        runs.append(
            _signature(*_worker(engine, tok).play_environments(_envs(), seed=3, env_ids=[4, 5, 6, 7, 8]))
        )
        orders.append(engine.arrivals)
    assert all(run == runs[0] for run in runs[1:])
    assert len({tuple(o) for o in orders}) == len(orders)  # the replies did come back differently
    turns, results, finished = runs[0]
    assert len(results) == 15 and {f.env for f in finished} == {4, 5, 6, 7, 8}
    assert any(r[1] is not None for r in results)  # forfeits: episodes of different lengths
    # an engine without streaming (one request at a time, in order) gives the same too
    plain = _worker(Mover(tok), tok).play_environments(_envs(), seed=3, env_ids=[4, 5, 6, 7, 8])
    assert _signature(*plain) == runs[0]
    # and the rounds schedule samples otherwise (seeds per round): a different batch
    rounds = _worker(Mover(tok), tok, "rounds").play_environments(_envs(), seed=3, env_ids=[4, 5, 6, 7, 8])
    assert _signature(*rounds)[0] != runs[0][0]


def test_each_reply_is_seeded_by_its_episode_and_move(tok):
    mover = Mover(tok)
    turns, _, _ = _worker(Shuffled(mover, 1), tok).play_environments(
        [[EpisodeSpec("tic_tac_toe", 1, (0, 1)), EpisodeSpec("tic_tac_toe", 2, (0, 1))]], seed=11, env_ids=[3]
    )
    by_episode = {}
    for t in turns:
        by_episode.setdefault(t.episode, []).append(t)
    expected = [
        reply_seed(11, 3, ep, move) for ep in sorted(by_episode) for move in range(len(by_episode[ep]))
    ]
    assert sorted(mover.seeds) == sorted(expected)
    assert len(set(expected)) == len(expected)


def _play_batch(tok, order_seed, rank=0, ranks=1, gather=None, calls=None, mode="oversample"):
    plans = plan_environments(
        ("tic_tac_toe",),
        mode=mode,
        rollout_batch=12,
        rollout_envs=6,
        dp_rank=rank,
        dp_size=ranks,
        seed=4,
    )
    gather = gather or (lambda obj: [obj])

    def counted(obj):
        if calls is not None:
            calls.append(1)
        return gather(obj)

    engine = Shuffled(Mover(tok), order_seed)
    turns, _, kept, _ = play_batch(
        _worker(engine, tok),
        plans,
        4,
        mode=mode,
        rollout_batch=12,
        games=("tic_tac_toe",),
        gather=counted,
    )
    keys = {(f.episode, f.seat) for f in kept if f.rank == rank}
    mine = sorted(
        (t.episode, t.seat, t.index, tuple(t.response_ids)) for t in turns if (t.episode, t.seat) in keys
    )
    return kept, mine


@pytest.mark.parametrize("mode", ["oversample", "fixed"])
def test_the_batch_is_the_same_whatever_the_order(tok, mode):
    first, *others = [_play_batch(tok, s, mode=mode) for s in range(3)]
    assert len(first[0]) == 12
    assert all(o == first for o in others)


def test_two_ranks_tick_together_and_keep_the_same_batch(tok):
    toks = [AutoTokenizer.from_pretrained(tok.name_or_path) for _ in range(2)]

    def body(rank, gather, order_seed):
        calls = []
        kept, mine = _play_batch(toks[rank], order_seed + rank, rank, 2, gather, calls)
        return kept, mine, len(calls)

    a0, a1 = ThreadGroup(2).run(lambda r, g: body(r, g, 0))
    b0, b1 = ThreadGroup(2).run(lambda r, g: body(r, g, 5))
    assert a0[0] == a1[0] == b0[0] == b1[0] and len(a0[0]) == 12  # one batch, whatever arrived when
    assert (a0[1], a1[1]) == (b0[1], b1[1])
    assert a0[2] == a1[2] and b0[2] == b1[2]  # every rank made the same collective calls


def test_the_transformers_engine_streams_with_a_seed_per_request(tok, micro_model_dir):
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    runs = []
    for rows in (8, 3):  # how many sequences decode together must not change what is sampled
        engine = TransformersEngine(
            model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], batch_size=rows
        )
        turns, results, finished = _worker(engine, tok).play_environments(_envs()[:3], seed=2)
        runs.append(_signature(turns, results, finished))
        assert engine._stream is None  # the decode loop and its prefix cache end with the rollout
    assert runs[0] == runs[1]
    turns = runs[0][0]
    assert turns and len({tuple(t[4]) for t in turns}) > 1  # real samples, not one reply
    # behaviour log-probs: the engine's scoring pass, as with rounds
    played, _, _ = _worker(engine, tok).play_environments(_envs()[:3], seed=2)
    scored = engine.score([t.prompt_ids for t in played], [t.response_ids for t in played], 1.0)
    for t, s in zip(played, scored, strict=True):
        assert t.behaviour_logprobs == pytest.approx(s, abs=1e-6)
    # engine_logprobs=generate: the loop's own logits give them, the samples unchanged
    engine.logprobs_from = "generate"
    again, _, _ = _worker(engine, tok).play_environments(_envs()[:3], seed=2)
    assert [t.response_ids for t in again] == [t.response_ids for t in played]
    for t, s in zip(again, scored, strict=True):
        assert t.behaviour_logprobs == pytest.approx(s, abs=1e-4)


def test_stop_strings_end_a_streamed_reply(tok, micro_model_dir):
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    engine = TransformersEngine(
        model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], batch_size=8, tokenizer=tok
    )
    prompt = tok("<answer>x(0,", add_special_tokens=False)["input_ids"]

    def replies(settings):
        engine.submit([Request(i, prompt, 100 + i, 12) for i in range(6)], settings)
        got = []
        while len(got) < 6:
            got += engine.advance()
        engine.abort()
        return dict(got)

    free = replies(GenSettings(1.0, 1.0, 0, 12))
    # a stop string the free replies reach after their first token: a letter one of them samples
    text = {k: tok.decode(g.token_ids, skip_special_tokens=True) for k, g in free.items()}
    key, stop = next((k, ch) for k, t in text.items() for ch in t[1:] if ch.isascii() and ch.isalpha())
    cut = replies(GenSettings(1.0, 1.0, 0, 12, stop=(stop,)))
    reply = cut[key]
    # the same seed samples the same tokens, up to and including the one completing the stop
    j = next(j for j in range(1, len(free[key].token_ids) + 1) if stop in tok.decode(free[key].token_ids[:j]))
    assert reply.token_ids == free[key].token_ids[:j] and reply.stopped
    assert len(reply.logprobs) == len(reply.token_ids)


def test_vllm_streams_through_its_engine_and_matches_one_request_at_a_time(tok, micro_model_dir):
    from tests.support.vllm_stream_double import make_api
    from training.engines import OneByOne
    from training.engines.vllm_engine import VLLMEngine

    def engine():
        return VLLMEngine(str(micro_model_dir), dtype="float32", api=make_api())

    streamed = engine()
    got = _signature(*_worker(streamed, tok).play_environments(_envs()[:3], seed=6))
    counters = streamed.llm.llm_engine.counters
    assert streamed.llm.counters.generate_calls == 0 and counters.added == len(got[0])
    assert counters.max_running > 1  # requests ran side by side
    one = engine()
    alone = _signature(*_worker(OneByOne(one), tok).play_environments(_envs()[:3], seed=6))
    assert alone == got
    assert one.llm.counters.generate_calls == len(got[0])
    # a rollout that stops early aborts what is still in flight
    stopper = engine()
    _worker(stopper, tok).play_environments(_envs()[:3], seed=6, stop=lambda new, running: bool(new))
    assert stopper.llm.llm_engine.counters.aborted >= 1 and not stopper._requests


def test_a_schedule_that_does_not_exist_is_refused(tok):
    with pytest.raises(ValueError, match="rollout_schedule='lockstep' is not one of rounds, async"):
        _worker(Mover(tok), tok, "lockstep")


def test_the_trainer_passes_the_schedule(micro_model_dir, tmp_path):
    from training.config import build_config
    from training.trainer import Trainer

    cfg = replace(build_config("micro", overrides={"model": str(micro_model_dir)}), rollout_schedule="async")
    trainer = Trainer(cfg, tmp_path / "run", log=lambda *_: None)
    trainer.tok, trainer.engine = AutoTokenizer.from_pretrained(micro_model_dir), object()
    assert trainer._rollout_worker(GenSettings()).schedule == "async"
