"""Turn rewards: game payoff accrued between a player's actions, plus the reference shaping.

For player p's turn t (its t-th action, taken at time a_t; its next action at a_{t+1}, or the
end of the episode):

    r_t = [R_p(a_{t+1}) - R_p(a_t)]                  payoff accrued (pyspiel running returns;
                                                      at the end: the final payoff, chips, score)
          + valid_bonus              if the action was valid                 (+0.05)
          + invalid_penalty          if it was invalid: the game ends and the (-10)
                                     offender also gets the game's minimum payoff (forfeit rule
                                     of mars_eval.games: the other player gets the maximum)
          + (draw_value - 0)         on the last turn of a competitive game whose final payoffs
                                     are all 0 (a draw's 0 becomes 0.1)
          + length_penalty(n_t)      n_t = response tokens of the turn

    length_penalty(n) = -max * clamp((n - start) / (end - start), 0, 1)
                        (0 at 2048 tokens, -0.5 at 4096 in the reference)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RewardShaping:
    valid_bonus: float = 0.05
    invalid_penalty: float = -10.0
    draw_value: float = 0.1
    length_penalty_start: int = 2048
    length_penalty_end: int = 4096
    length_penalty_max: float = 0.5

    @classmethod
    def from_config(cls, cfg) -> RewardShaping:
        return cls(**{k: getattr(cfg, k) for k in cls.__dataclass_fields__})

    def length_penalty(self, n_tokens: int) -> float:
        frac = (n_tokens - self.length_penalty_start) / (self.length_penalty_end - self.length_penalty_start)
        return -self.length_penalty_max * min(1.0, max(0.0, frac))

    def action_shaping(self, valid: bool, n_tokens: int) -> float:
        """The part of a turn's reward known when the action is taken."""
        bonus = self.valid_bonus if valid else self.invalid_penalty
        return bonus + self.length_penalty(n_tokens)

    def draw_bonus(self, final_returns: list[float], cooperative: bool) -> float:
        """Added to each player's last turn when a competitive game ends in a 0-0 draw."""
        if cooperative or any(r != 0.0 for r in final_returns):
            return 0.0
        return self.draw_value


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
