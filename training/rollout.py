"""Self-play rollouts: many episodes of several games advanced side by side, generation batched.

Each step plays a fresh set of episodes, grouped in environments that play theirs one after
another (`play_environments`; which ones make the batch: training/composition.py). In a
self-play episode the learner plays every seat; in a "mixed" episode (share `mix_fraction`)
or under the fixed-opponent ablation (`opponent != "self"`) one seat is the learner and the
others are a fixed opponent (mars_eval.games.make_opponent), the learner's seat alternating
between episodes.

The loop: move every fixed opponent until a learner seat is to act; collect the prompts of all
episodes waiting for the learner; one batched `engine.generate`; parse each reply with the
game's parser (`Episode.parse`, the same one evaluation uses) and apply the action, or forfeit
the game on an invalid/missing answer; repeat until all episodes end (rollout_schedule=rounds;
with rollout_schedule=async each episode moves on as soon as its own reply is back, without
waiting for a round's slowest: training/rollout_async.py). "full" and "compact"
prompts are rendered as `mars-eval games` renders them (the model's chat template,
add_generation_prompt, the configured enable_thinking); "reference" prompts as the reference's
env manager renders them (`render_reference_chat`: plain ChatML, earlier replies kept whole with
their thinking, the reply's start forced). Replies are decoded with skip_special_tokens=True.

Each learner seat's view is its own chat. Compact style: every turn is one single-turn prompt
(the current compact view). Full style: the chat grows turn by turn (system, observation,
reply, next observation, ...), so a turn's prompt contains the seat's earlier replies; those
are context only, never trained on twice. Either way a `Turn` is (prompt tokens, response
tokens) and only the response tokens carry loss (row_layout=trajectory trains a trajectory whose
prompts grow turn by turn as one row: training/rows.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mars_eval.games import SINGLE_TURN_STYLES, make_game, make_opponent
from mars_eval.mas.base import derive_seed
from mars_eval.models.base import split_thinking
from mars_eval.prompts import PromptPack
from training.batch import Turn
from training.engines import GenerationEngine, GenSettings
from training.episodes import EpisodeResult, EpisodeSpec, Finished, _Live, _Slot
from training.rewards import RewardShaping, final_payoffs, turn_rewards

SCHEDULES = ("rounds", "async")  # rollout_schedule (training/config.py)


def render_reference_chat(messages: list[dict], thinking: bool) -> str:
    """The prompt text the reference's env manager builds (roll/agentic/rollout/env_manager.py).

    It replaces the model's chat template with a plain ChatML one, so earlier replies go back
    whole, thinking included (Qwen3's own template drops earlier turns' thinking); it removes
    the newline after every <|im_end|>; and it forces the start of the reply: "<think>\n" with
    thinking on, "<answer>" with it off.
    """
    parts = []
    for m in messages:
        parts.append(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts) + ("<think>\n" if thinking else "<answer>")


def seat_messages(
    style: str,
    ep: Any,
    seat: int,
    replies: list[str],
    chats: dict[int, list[dict]],
    pack: PromptPack | None,
) -> list[dict]:
    """What `seat` is sent this turn: compact, the position alone; reference, the reference
    environments' chat rebuilt from the seat's earlier `replies`; full, the seat's chat in
    `chats` grown by this observation (its earlier replies appended by the caller)."""
    if style in SINGLE_TURN_STYLES:
        return ep.messages(seat, style, pack=pack)
    if style == "reference":
        return ep.messages(seat, "reference", replies, pack)
    chat = chats.get(seat)
    if chat is None:
        chat = chats[seat] = [{"role": "system", "content": ep.system_prompt(seat, "full", pack)}]
    chat.append({"role": "user", "content": ep.observation(seat, "full", pack)})
    return chat


def render_prompt(tok: Any, messages: list[dict], style: str, thinking: bool) -> list[int]:
    """The prompt tokens of `messages` as the rollout renders them (reference style: the
    reference's own ChatML with the forced reply start; else the model's chat template)."""
    if style == "reference":
        text = render_reference_chat(messages, thinking)
    else:
        text = tok.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, enable_thinking=thinking
        )
    return tok(text, add_special_tokens=False)["input_ids"]


def reply_prefill(style: str, thinking: bool) -> str:
    """What the prompt forces at the start of the reply (reference style only)."""
    if style != "reference":
        return ""
    return "<think>\n" if thinking else "<answer>"


def plan_episodes(
    games: tuple[str, ...],
    trajectories_per_game: int,
    *,
    opponent: str,
    mix_opponent: str,
    mix_fraction: float,
    seed: int,
) -> list[EpisodeSpec]:
    """Episode specs giving about `trajectories_per_game` learner trajectories per game.

    Self-play episodes of an n-player game give n trajectories, mixed / fixed-opponent ones 1.
    Cooperative games are always pure self-play unless the fixed-opponent ablation is on.
    """
    specs: list[EpisodeSpec] = []
    for game_name in games:
        game = make_game(game_name)
        n = game.num_players
        if opponent != "self":
            n_fixed, fixed_spec = trajectories_per_game, opponent
        elif game.cooperative:
            n_fixed, fixed_spec = 0, None
        else:
            n_fixed, fixed_spec = round(mix_fraction * trajectories_per_game), mix_opponent
            if (trajectories_per_game - n_fixed) % n:  # self-play takes whole episodes
                n_fixed += (trajectories_per_game - n_fixed) % n
        n_self = (trajectories_per_game - n_fixed) // n
        for i in range(n_self):
            specs.append(EpisodeSpec(game_name, derive_seed(seed, game_name, "self", i), tuple(range(n))))
        for i in range(n_fixed):
            specs.append(
                EpisodeSpec(game_name, derive_seed(seed, game_name, "fixed", i), (i % n,), fixed_spec)
            )
    return specs


class RolloutWorker:
    """Plays episode specs with one engine and tokenizer; returns learner turns with rewards."""

    def __init__(
        self,
        engine: GenerationEngine,
        tokenizer: Any,
        *,
        prompt_style: str,
        enable_thinking: bool,
        settings: GenSettings,
        shaping: RewardShaping,
        max_turns: int = 200,
        forfeit: str = "reference",
        forfeit_tokens: int = 0,
        sequence_length: int = 0,
        pack: PromptPack | None = None,
        schedule: str = "rounds",
    ):
        if schedule not in SCHEDULES:
            raise ValueError(f"rollout_schedule={schedule!r} is not one of {', '.join(SCHEDULES)}")
        self.schedule = schedule  # "rounds" (lock-step) | "async" (training/rollout_async.py)
        self.pack = pack  # the prompt pack of every style (None: ours)
        self.sequence_length = sequence_length  # prompt + reply within 1000 of this forfeits; 0: off
        self.engine = engine
        self.forfeit = forfeit  # payoffs after a forfeit (training/rewards.py)
        self.forfeit_tokens = forfeit_tokens  # replies this long (or cut off) are invalid; 0: off
        self.tok = tokenizer
        self.style = prompt_style
        self.enable_thinking = enable_thinking
        self.settings = settings
        self.shaping = shaping
        self.max_turns = max_turns

    # --- prompts ---------------------------------------------------------------------------
    def _messages(self, live: _Live, seat: int) -> list[dict]:
        return seat_messages(self.style, live.episode, seat, live.replies[seat], live.chats, self.pack)

    def render(self, messages: list[dict]) -> list[int]:
        return render_prompt(self.tok, messages, self.style, self.enable_thinking)

    def reply_caps(self, prompts: list[list[int]]) -> list[int] | None:
        """Each reply's token limit: max_new_tokens, or fewer when the sequence has fewer left
        (the reference's env manager: max(min(max_new_tokens, sequence_length - prompt), 1));
        None without a sequence_length."""
        if self.sequence_length <= 0:
            return None
        limit = self.settings.max_new_tokens
        return [max(min(limit, self.sequence_length - len(p)), 1) for p in prompts]

    def reply_prefill(self) -> str:
        return reply_prefill(self.style, self.enable_thinking)

    # --- the loop --------------------------------------------------------------------------
    def play(self, specs: list[EpisodeSpec], seed: int) -> tuple[list[Turn], list[EpisodeResult]]:
        """Every spec played to its end, side by side (each its own environment)."""
        turns, results, _ = self.play_environments([[s] for s in specs], seed)
        return turns, results

    def play_environments(
        self,
        envs: list[list[EpisodeSpec]],
        seed: int,
        *,
        env_ids: list[int] | None = None,
        more: Callable[[int, int], bool] | None = None,
        stop: Callable[[list[Finished], list[float]], bool] | None = None,
    ) -> tuple[list[Turn], list[EpisodeResult], list[Finished]]:
        """Environments side by side, each playing its episodes one after another: in lock-step
        rounds (`schedule="rounds"`: one batched generate of every waiting prompt a round), or
        each environment advancing as its own reply arrives (`schedule="async"`,
        training/rollout_async.py, where `stop` is called once per tick instead of per round).

        `more(i, trajectories so far)`: whether environment i starts its next episode (default:
        while it has one). `stop(newly finished, clocks of the environments still playing)` runs
        after every round (it may be a collective: every rank calls it once a round until it
        says stop); True ends the rollout and drops the episodes still running. Without it the
        rollout ends when every environment is done. An environment's clock counts the tokens
        it generated plus one per turn (training/composition.py: the finish order).

        Returns the finished episodes' turns and results, and one `Finished` per trajectory.
        """
        if self.schedule == "async":
            from training.rollout_async import play_async

            return play_async(self, envs, seed, env_ids=env_ids, more=more, stop=stop)
        ids = env_ids if env_ids is not None else list(range(len(envs)))
        slots = [_Slot(env, list(specs)) for env, specs in zip(ids, envs, strict=True)]
        counter = 0
        for slot in slots:
            counter = self._next_episode(slot, counter)
        turns: list[Turn] = []
        results: list[EpisodeResult] = []
        finished: list[Finished] = []
        round_no = 0
        while True:
            waiting: list[tuple[_Slot, int, list[dict]]] = []
            for slot in slots:
                seat = self.to_learner(slot.live) if slot.live is not None else None
                if seat is not None:
                    waiting.append((slot, seat, self._messages(slot.live, seat)))
            if waiting:
                prompts = [self.render(m) for _, _, m in waiting]
                gens = self.engine.generate(
                    prompts,
                    self.settings,
                    seed=derive_seed(seed, "round", round_no),
                    max_tokens=self.reply_caps(prompts),
                )
                round_no += 1
                for (slot, seat, messages), prompt, gen in zip(waiting, prompts, gens, strict=True):
                    slot.clock += len(gen.token_ids) + 1
                    self._apply_reply(slot, seat, messages, prompt, gen)
            new: list[Finished] = []
            for i, slot in enumerate(slots):
                while slot.live is not None and slot.live.episode.is_terminal:
                    new += self.close_episode(slot, turns, results)
                    if slot.specs and (more is None or more(i, slot.produced)):
                        counter = self._next_episode(slot, counter)
            finished += new
            running = [slot.clock for slot in slots if slot.live is not None]
            if stop is not None:
                if stop(new, running):
                    break
            elif not running:
                break
        return turns, results, finished

    def to_learner(self, live: _Live) -> int | None:
        """Move the fixed opponents until a learner seat is to act; that seat, or None once
        the episode is over (the move limit forfeits it: a safety net never hit in these games)."""
        ep = live.episode
        while not ep.is_terminal and ep.current_player not in live.spec.learner_seats:
            ep.apply(live.opponent.act(ep))
            live.moves += 1
        if not ep.is_terminal and live.moves >= self.max_turns:
            ep.forfeit(ep.current_player, "move limit")
        return None if ep.is_terminal else ep.current_player

    def close_episode(self, slot: _Slot, turns: list[Turn], results: list[EpisodeResult]) -> list[Finished]:
        """The slot's finished episode: its turns and result appended, one `Finished` per
        trajectory (at the slot's clock), the slot left without a live episode."""
        live = slot.live
        assert live is not None
        done_turns, result = self._finish_one(live)
        turns += done_turns
        results.append(result)
        slot.produced += len(live.turns)
        slot.live = None
        game = live.spec.game
        return [Finished(slot.clock, slot.env, live.number, seat, game=game) for seat in sorted(live.turns)]

    def _next_episode(self, slot: _Slot, counter: int) -> int:
        """Start the slot's next episode (if any) as episode number `counter` of this rollout."""
        if not slot.specs:
            return counter
        slot.started += 1
        spec = slot.specs.pop(0)
        game = make_game(spec.game)
        opp = make_opponent(spec.opponent, game, spec.seed + 1) if spec.opponent else None
        slot.live = _Live(spec, game.new_episode(spec.seed), opp, game.cooperative, number=counter)
        return counter + 1

    def _apply_reply(self, slot: _Slot, seat: int, messages: list[dict], prompt: list[int], gen: Any) -> None:
        """Parse one reply (the reference's whole-reply rule in reference style), record the turn,
        and move or forfeit."""
        live = slot.live
        assert live is not None
        ep = live.episode
        text = self.reply_prefill() + self.tok.decode(gen.token_ids, skip_special_tokens=True)
        content, _thinking = split_thinking(text)
        overlong = self.forfeit_tokens > 0 and (not gen.stopped or len(gen.token_ids) >= self.forfeit_tokens)
        if self.sequence_length > 0:  # the reference: <= 1000 tokens left in the sequence
            overlong |= self.sequence_length - len(prompt) - len(gen.token_ids) <= 1000
        if overlong:
            action = None
        elif self.style == "reference":  # the whole reply, its forced start included
            action = ep.parse_reply(text, self.enable_thinking)
        else:
            action = ep.parse(content, "full")
        live.returns_before[seat].append(ep.returns()[seat])
        turn = Turn(
            game=live.spec.game,
            seat=seat,
            episode=live.number,
            index=len(live.turns[seat]),
            prompt_ids=prompt,
            response_ids=list(gen.token_ids),
            behaviour_logprobs=list(gen.logprobs),
            valid=action is not None,
            truncated=not gen.stopped,
            text=content,
        )
        live.turns[seat].append(turn)
        if self.style == "full":
            messages.append({"role": "assistant", "content": text})
        if self.style == "reference":  # earlier replies go back whole, thinking included
            live.replies[seat].append(text)
        if action is None:
            ep.forfeit(seat, "invalid answer")
        else:
            ep.apply(action)
        live.moves += 1

    def _finish_one(self, live: _Live) -> tuple[list[Turn], EpisodeResult]:
        """The rewards of a finished episode's turns, and its result."""
        ep = live.episode
        payoff = final_payoffs(ep, self.forfeit)
        last_step = [float(r) for r in ep.state.rewards()]
        bonus = self.shaping.terminal_bonus(live.spec.game, last_step, ep.forfeited_by is not None)
        turns: list[Turn] = []
        for seat, seat_turns in live.turns.items():
            shaping = [self.shaping.action_shaping(t.valid, len(t.response_ids)) for t in seat_turns]
            rewards = turn_rewards(live.returns_before[seat], payoff[seat], shaping, bonus[seat])
            for t, r in zip(seat_turns, rewards, strict=True):
                t.reward = r
            turns.extend(seat_turns)
        result = EpisodeResult(
            game=live.spec.game,
            learner_seats=live.spec.learner_seats,
            returns=ep.returns(),
            invalid_by=ep.forfeited_by,
            turns=live.moves,
            opponent=live.spec.opponent,
            cooperative=live.cooperative,
        )
        return turns, result


@dataclass(frozen=True)
class TurnStat:
    """What the rollout metrics need of one turn (small: gathered from every rank)."""

    game: str
    seat: int
    valid: bool
    truncated: bool
    response_tokens: int
    reward: float


def turn_stats(turns: list[Turn]) -> list[TurnStat]:
    return [
        TurnStat(t.game, t.seat, t.valid, t.truncated, len(t.response_ids), float(t.reward)) for t in turns
    ]


def rollout_metrics(turns: list[Turn], results: list[EpisodeResult]) -> dict[str, float]:
    """Returns, win and invalid rates per game and learner seat (self-play and mixed together)."""
    return rollout_metrics_of(turn_stats(turns), results)


def rollout_metrics_of(stats: list[TurnStat], results: list[EpisodeResult]) -> dict[str, float]:
    """`rollout_metrics` from turn stats (e.g. every rank's, gathered: training/trainer.py)."""
    out: dict[str, float] = {}
    acc: dict[str, list[float]] = defaultdict(list)
    for r in results:
        for seat in r.learner_seats:
            key = f"{r.game}/p{seat}"
            acc[f"return/{key}"].append(r.returns[seat])
            if not r.cooperative:
                acc[f"win/{key}"].append(1.0 if r.returns[seat] > 0 else 0.0)
            if r.opponent:
                acc[f"return_vs_{r.opponent}/{key}"].append(r.returns[seat])
    for t in stats:
        acc[f"invalid/{t.game}/p{t.seat}"].append(0.0 if t.valid else 1.0)
        acc["response_tokens"].append(float(t.response_tokens))
        acc["reward"].append(t.reward)
    for k, v in acc.items():
        out[k] = sum(v) / len(v)
    out["invalid_rate"] = sum(0.0 if t.valid else 1.0 for t in stats) / max(1, len(stats))
    out["truncated_rate"] = sum(1.0 if t.truncated else 0.0 for t in stats) / max(1, len(stats))
    out["episodes"] = float(len(results))
    out["turns"] = float(len(stats))
    return out
