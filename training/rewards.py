"""Turn rewards: game payoff accrued between a player's actions, plus the reference shaping.

For player p's turn t (its t-th action, taken at time a_t; its next action at a_{t+1}, or the
end of the episode):

    r_t = [R_p(a_{t+1}) - R_p(a_t)]                  payoff accrued (pyspiel running returns;
                                                      at the end: the final payoff, chips, score)
          + valid_bonus              if the action was valid                 (+0.05)
          + invalid_penalty          if it was invalid: the game ends (-10); a reply of
                                     forfeit_tokens (4096) tokens or more, or cut off at the
                                     token limit, is invalid too (as in evaluation)
          + draw_value               on the player's last turn when the game ends by itself and
                                     the final move paid that player 0 (the reference envs turn
                                     a terminal step reward of 0 into 0.1: a tic-tac-toe draw,
                                     or a Hanabi game ending on a move that scored nothing; the
                                     poker envs do not)
          + length_penalty(n_t)      n_t = response tokens of the turn

    length_penalty(n) = -max * max(0, (n - start) / (end - start))
                        (reference: 0 at 2048 tokens, slope 0.5 / (2048 - 11) per token, so
                        start 2048, end 4085; not capped, as the reference: -0.5027 at 4096
                        tokens, where the reply also forfeits)

Payoffs after a forfeit (`forfeit`), what R_p(end) is for each player:

    "reference" (the reference environments' get_losing_state, via
                mars_eval.games.reference_env.forfeit_rewards): the forfeited step pays the
                offender -(its stake) and the other player 0, so
                  tic-tac-toe / connect four: offender -1, the other player 0 (not the +1 win)
                  Kuhn / Leduc: offender -(chips it has put in), the other player 0
                  Hanabi: offender -(score so far), i.e. 0 in total; the partner keeps the
                  score so far
                (plus invalid_penalty on the offender's turn, the reference's extra -10)
    "game"      the evaluation payoffs of mars_eval.games (Episode.returns after a forfeit)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# games whose reference environment turns a terminal step reward of 0 into 0.1
ZERO_STEP_BONUS_GAMES = ("tic_tac_toe", "connect_four", "mini_hanabi", "simple_hanabi")


@dataclass(frozen=True)
class RewardShaping:
    valid_bonus: float = 0.05
    invalid_penalty: float = -10.0
    draw_value: float = 0.1
    length_penalty_start: int = 2048
    length_penalty_end: int = 4085  # slope 0.5 / (2048 - 11) as the reference's env manager
    length_penalty_max: float = 0.5

    @classmethod
    def from_config(cls, cfg: Any) -> RewardShaping:
        return cls(**{k: getattr(cfg, k) for k in cls.__dataclass_fields__})

    def length_penalty(self, n_tokens: int) -> float:
        frac = (n_tokens - self.length_penalty_start) / (self.length_penalty_end - self.length_penalty_start)
        return -self.length_penalty_max * max(0.0, frac)

    def action_shaping(self, valid: bool, n_tokens: int) -> float:
        """The part of a turn's reward known when the action is taken."""
        bonus = self.valid_bonus if valid else self.invalid_penalty
        return bonus + self.length_penalty(n_tokens)

    def terminal_bonus(self, game: str, last_step_rewards: list[float], forfeited: bool) -> list[float]:
        """Per player: draw_value where the game ended by itself on a step that paid it 0."""
        if forfeited or game not in ZERO_STEP_BONUS_GAMES:
            return [0.0] * len(last_step_rewards)
        return [self.draw_value if r == 0.0 else 0.0 for r in last_step_rewards]

    def draw_bonus(self, final_returns: list[float], cooperative: bool) -> float:
        """Added to each player's last turn when a competitive game ends in a 0-0 draw."""
        if cooperative or any(r != 0.0 for r in final_returns):
            return 0.0
        return self.draw_value


def final_payoffs(episode: Any, forfeit: str = "reference") -> list[float]:
    """R_p(end) per player: the game's payoffs, or after a forfeit the training payoffs above."""
    if episode.forfeited_by is None or forfeit == "game":
        return [float(r) for r in episode.returns()]
    from mars_eval.games import reference_env

    offender = episode.forfeited_by
    running = [float(r) for r in episode.state.returns()]  # the state is left where it was
    step = reference_env.forfeit_rewards(episode, offender)
    # the extra -10 inside the reference's step reward is invalid_penalty here (action_shaping)
    extra = reference_env.FORFEIT_PENALTY
    return [running[p] + step[p] + (extra if p == offender else 0.0) for p in range(len(running))]


def turn_rewards(
    action_returns: list[float],
    final_return: float,
    shaping: list[float],
    draw_bonus: float = 0.0,
) -> list[float]:
    """Rewards of one player's turns.

    action_returns[t]: the player's running return just before its t-th action; final_return:
    its return at the end; shaping[t]: `action_shaping` of turn t. Payoff accrued to turn t is
    action_returns[t+1] - action_returns[t] (final_return for the last turn).
    """
    n = len(action_returns)
    out = []
    for t in range(n):
        nxt = action_returns[t + 1] if t + 1 < n else final_return
        out.append(nxt - action_returns[t] + shaping[t])
    if n:
        out[-1] += draw_bonus
    return out
