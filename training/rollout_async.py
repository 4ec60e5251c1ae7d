"""The rollout without lock-step rounds (`rollout_schedule=async`): each environment advances
as its own reply arrives.

Rounds (`rollout_schedule=rounds`, training/rollout.py) send every waiting prompt in one
`generate` and move on when all replies are back, so each round lasts as long as its slowest
reply: with the reference's 96 environments over 8 GPUs (12 sequences per GPU) and thinking
replies of a few hundred to 4,096 tokens, most rows of the engine's batch sit idle for most of
a round. Here every environment has at most one request in flight; the engine streams
(training/engines `submit` / `advance`): vLLM schedules a new request into its running batch at
its next step, the transformers engine into mars_eval's continuous-batching decode loop. This
is how the reference schedules generation: one env-manager thread per environment sends its
own request to a shared request scheduler and steps its game when the reply comes back
(roll/agentic/rollout/env_manager.py, `generate_one_request`).

The loop, one *tick* at a time:

    advance the engine (until some reply ends, or a few engine steps pass);
    apply each reply that ended to its environment (parse, move or forfeit, clock += tokens + 1);
    for every environment without a request in flight: finish its episode if it is over (and
        start its next one when `more` allows), else move the fixed opponents and queue the
        learner's prompt;
    stop(newly finished, clocks of the environments still playing)   <- once per tick

Collective cadence: `stop` may be a collective (training/composition.py gathers every rank's
finished trajectories in it); every rank calls it exactly once per tick, whatever its engine
returned, and a rank with nothing left to play keeps ticking (advance returns nothing at once)
until `stop` says stop, as rounds do with rounds. The engine caps a tick at a few steps when no
reply ends (`STREAM_STEPS`), so one rank's long reply does not hold the others at the collective
for long while their own engines idle.

Determinism: a reply's sampling seed is derive_seed(seed, "reply", environment, episode of
that environment, move number), never a round or arrival count, and each engine samples a
request with its own seed (a per-request seed in vLLM, a seeded generator per row in the
decode loop). Episodes are numbered by (environment, episode of it), not by when they start,
and the finished turns and results are returned in episode order; so the trajectories, and
therefore the clocks and the batch composition's choice, do not depend on the order the
replies arrive in. (Which extra episodes had also finished when the choice settled can differ:
only the kept ones are trained on.) Sampling differs from the rounds schedule, whose seeds are
per round: the two schedules give different, equally valid, samples.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from mars_eval.mas.base import derive_seed
from training.batch import Turn
from training.engines import Generation, Request, streaming
from training.episodes import EpisodeResult, EpisodeSpec, Finished, _Slot


def reply_seed(seed: int, env: int, episode: int, move: int) -> int:
    """The sampling seed of the reply at `move` of environment `env`'s episode `episode`."""
    return derive_seed(seed, "reply", env, episode, move)


def play_async(
    worker: Any,
    envs: list[list[EpisodeSpec]],
    seed: int,
    *,
    env_ids: list[int] | None = None,
    more: Callable[[int, int], bool] | None = None,
    stop: Callable[[list[Finished], list[float]], bool] | None = None,
) -> tuple[list[Turn], list[EpisodeResult], list[Finished]]:
    """`RolloutWorker.play_environments` without rounds (module docstring); same arguments and
    results, `stop` called once per tick."""
    ids = env_ids if env_ids is not None else list(range(len(envs)))
    slots = [_Slot(env, list(specs)) for env, specs in zip(ids, envs, strict=True)]
    base = 0
    for slot in slots:
        slot.base, base = base, base + len(slot.specs)
    engine = streaming(worker.engine)
    in_flight: dict[int, tuple[int, list[dict], list[int]]] = {}  # slot -> (seat, messages, prompt)
    turns: list[Turn] = []
    results: list[EpisodeResult] = []
    numbers: list[int] = []  # each result's episode number
    finished: list[Finished] = []
    queued: list[Request] = []

    def start(slot: _Slot) -> None:
        worker._next_episode(slot, slot.base + slot.started)

    def progress(i: int) -> list[Finished]:
        """Finish/start episodes of slot i until it waits for a reply or has nothing left."""
        slot, new = slots[i], []
        while slot.live is not None and i not in in_flight:
            live = slot.live
            seat = worker.to_learner(live)
            if seat is None:
                numbers.append(live.number)
                new += worker.close_episode(slot, turns, results)
                if slot.specs and (more is None or more(i, slot.produced)):
                    start(slot)
                continue
            messages = worker._messages(live, seat)
            prompt = worker.render(messages)
            caps = worker.reply_caps([prompt])
            cap = caps[0] if caps else worker.settings.max_new_tokens
            key = (i, live.number, live.moves)
            own = reply_seed(seed, slot.env, live.number - slot.base, live.moves)
            queued.append(Request(key, prompt, own, cap))
            in_flight[i] = (seat, messages, prompt)
        return new

    def submit() -> None:
        if queued:
            engine.submit(list(queued), worker.settings)
            queued.clear()

    def apply(key: Hashable, gen: Generation) -> None:
        i = key[0]  # type: ignore[index]
        seat, messages, prompt = in_flight.pop(i)
        slots[i].clock += len(gen.token_ids) + 1
        worker._apply_reply(slots[i], seat, messages, prompt, gen)

    for slot in slots:
        start(slot)
    new: list[Finished] = []
    for i in range(len(slots)):
        new += progress(i)
    submit()
    try:
        while True:
            if in_flight:
                for key, gen in engine.advance():
                    apply(key, gen)
            for i in range(len(slots)):
                new += progress(i)
            submit()
            finished += new
            running = [slot.clock for slot in slots if slot.live is not None]
            if stop is not None:
                if stop(new, running):
                    break
            elif not running:
                break
            new = []
    finally:
        engine.abort()  # what is still in flight when the rollout stops
    order = sorted(range(len(results)), key=lambda j: numbers[j])
    turns.sort(key=lambda t: t.episode)  # stable: each episode's turns keep their order
    return turns, [results[j] for j in order], sorted(finished)
