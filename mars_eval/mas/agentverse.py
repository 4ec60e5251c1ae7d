"""`agentverse`: AgentVerse (Chen et al. 2023), as MASLab's methods/agentverse (main config).

Reproduces agentverse_main.py with config_main.yaml (2 agents, 3 turns, 3 criticizing rounds):
expert recruitment, a vertical solver-critic discussion and an evaluator, in turns. Prompt
text: the prompt pack's `mas.agentverse.*` templates (ours by default; `--prompts maslab` after
`mars-eval prompts import maslab PATH` gives MASLab's).

A turn:
1. the recruiter (system: the problem, how many experts, the evaluator's advice so far) lists
   `agents` experts as "1. ...", "2. ..." (each description read up to its first period);
2. discussion: the first expert is the solver, the others critics. The solver proposes a
   solution; then, for up to `rounds` criticizing rounds, every critic (its role and the problem
   in its system prompt) compares its own solution with the discussion so far and either gives a
   critique or ends with "[Agree]"; a round in which no critic has disagreed yet ends the
   discussion, otherwise the solver revises. As in the reference, disagreements accumulate over
   the rounds of a turn: once a critic has disagreed, the remaining rounds all run.
   Who sees what, exactly as MASLab's objects: one discussion record ("[expert]: text" entries:
   solutions, critiques that disagree, the evaluator's advice at the start of a later turn),
   kept across the turns of a sample. The solver's view is taken after the advice is added and
   after each disagreeing critique, a critic's after each solution. A view taken while the record
   holds at most 5 (solver) or 3 (critic) entries is the record itself, not a copy (MASLab's
   `history_solver = self.history`), so what is appended later shows in it until it is taken
   again; a view taken from a longer record is a copy of its last 5 or 3 entries. So with
   critics that disagree, agree, agree (S = a solution, C = a critique), the solver's calls see
   [], [S0, C1], [S0, C1, S1], [S0, C1, S1, S2]; with 3 experts the second critic sees the first
   critic's critique of the same round (while the record is short). The first turn's solver
   view is empty until a critic disagrees;
3. the evaluator (the experts, the problem and the solution) replies "Correctness: 0 or 1" and
   "Response: ..." (advice). Correctness 1 ends the sample; else its advice goes to the next turn.

The final answer is what the task extracts from the last solution (no vote); none is no answer.
Calls: a turn is 4 calls (the critic agrees at once) or 3 + 2 x rounds (9 by default); a sample
makes 1..`turns` turns: 4..27 with the defaults (with more critics, each critic is one call).

Each sample starts afresh (no discussion or advice carries over from another sample), as in
MASLab, whose inference.py builds a new method instance for every sample.

Differences from MASLab, where it raises (its inference.py then records the sample as an error
with no response); each is counted in `details["unparsed"]` (the summary's `unparsed`), and the
sample is answered and scored:
  * a recruiter reply with fewer experts than asked is padded with a generic expert, one with
    more is cut;
  * an evaluation without a readable "Correctness:" ends the sample with the solution it has;
  * an evaluation with a "Correctness:" but no "Response:" goes on with the whole evaluation
    reply (newline runs collapsed) as the advice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.registry import register
from mars_eval.mas.system import System, option
from mars_eval.mas.util import debate_question
from mars_eval.models.base import Message
from mars_eval.tasks.base import Problem, Task

AGREE = "[Agree]"
SOLVER_MEMORY, CRITIC_MEMORY = 5, 3  # discussion entries the solver / a critic sees (the reference's)
ROLE_LINE = re.compile(r"\d+\.\s*([^.]+)")
CORRECTNESS = re.compile(r"Correctness:\s*(\d)")
ADVICE = re.compile(r"Response:\s*(.+)", re.DOTALL)


def parse_roles(text: str, n: int, generic: str = "an expert problem solver") -> tuple[list[str], bool]:
    """`n` expert descriptions from a numbered list, and whether exactly `n` were found. Each is
    the text as MASLab's regex finds it, whitespace and all (a role of only spaces counts)."""
    roles = ROLE_LINE.findall(text)
    ok = len(roles) == n
    return (roles + [generic] * n)[:n], ok


def parse_evaluation(text: str) -> tuple[int | None, str]:
    """(correctness, advice) from an evaluation; correctness None when it cannot be read."""
    found = CORRECTNESS.search(text)
    advice = ADVICE.search(text)
    advice_text = re.sub(r"\n+", "\n", advice.group(1).strip()) if advice else text.strip()
    return (int(found.group(1)) if found else None), advice_text


@register
class AgentVerse(System):
    name = "agentverse"
    summary = "AgentVerse (MASLab): expert recruitment, solver and critics, an evaluator, in turns"
    # 2: the solver's and critics' views are MASLab's (the record itself while short), a missing
    # "Response:" is counted. 3: expert roles as MASLab's regex finds them (not stripped).
    protocol = 3

    @dataclass(frozen=True)
    class Options:
        rounds: int = option(3, "criticizing rounds per turn", minimum=1)
        agents: int = option(2, "experts recruited (a solver and critics)", minimum=2)
        turns: int = option(3, "most turns (recruit, discuss, evaluate)", minimum=1)

    @property
    def max_calls(self) -> int:
        # a turn: recruit, solve, per round every critic and a revision, evaluate (27 by default)
        return self.turns * (3 + self.rounds * self.agents)

    def _t(self, key: str, **values: Any) -> str:
        return self.prompts.render(f"mas.agentverse.{key}", **values)

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        question = debate_question(problem, task)
        no_advice = advice = self._t("no_advice")
        discussion: list[Message] = []  # "[expert]: text" entries, shared by the turns of this sample
        turns: list[dict[str, Any]] = []
        unparsed = 0
        solution = ""
        for turn in range(1, self.turns + 1):
            stage = {"turn": turn}
            reply = await ctx.ask(
                "recruiter",
                [
                    _msg(
                        "system", self._t("recruit_system", question=question, n=self.agents, advice=advice)
                    ),
                    _msg("user", self._t("recruit", n=self.agents)),
                ],
                role="recruiter",
                tag={"stage": f"turn {turn}: recruitment", **stage},
            )
            roles, ok = parse_roles(reply.content, self.agents, self._t("generic_expert"))
            unparsed += not ok
            ctx.note("recruitment", turn=turn, roles=roles, parsed=ok)
            given = advice if advice != no_advice else None
            solution, record = await self._discuss(ctx, question, roles, discussion, turn, given)
            evaluation = await ctx.ask(
                "evaluator",
                [
                    _msg(
                        "system",
                        self._t(
                            "evaluator_system", roles="\n".join(roles), question=question, solution=solution
                        ),
                    ),
                    _msg("user", self._t("evaluator")),
                ],
                role="evaluator",
                tag={"stage": f"turn {turn}: evaluation", **stage},
            )
            score, advice_text = parse_evaluation(evaluation.content)
            advice_found = ADVICE.search(evaluation.content) is not None
            parsed = score is not None
            ctx.note("evaluation", turn=turn, correctness=score, parsed=parsed, advice_found=advice_found)
            if score is not None and not advice_found:  # MASLab raises; the whole reply is the advice
                unparsed += 1
            turns.append({"turn": turn, "roles": roles, **record, "correctness": score})
            if score is None:
                unparsed += 1
                break
            if score == 1:
                break
            advice = advice_text
        answer = task.extract(solution)
        last = turns[-1]
        if last["correctness"] == 1:
            how = f"evaluator accepted the solution in turn {last['turn']}"
        elif last["correctness"] is None:
            how = f"solution of turn {last['turn']} (evaluation unreadable)"
        else:
            how = f"last solution after {len(turns)} turns (never accepted)"
        return SystemResult(
            answer=answer,
            final_text=solution,
            how=how if answer is not None else "the last solution states no answer",
            details={"turns": turns, "unparsed": unparsed},
        )

    async def _discuss(
        self,
        ctx: SampleContext,
        question: str,
        roles: list[str],
        discussion: list[Message],
        turn: int,
        advice: str | None,
    ) -> tuple[str, dict[str, Any]]:
        """The vertical solver-first discussion of one turn: (the last solution, a summary).

        `solver_view` and `critic_view` are what the solver and the critics are shown; each is
        re-taken where MASLab re-takes it (`_window`), and a view that is the record itself shows
        entries appended after it was taken (see the module docstring)."""
        solver_system = _msg("system", self._t("solver_system", question=question))
        solver_user = _msg("user", self._t("solver", role=roles[0]))
        solver_view: list[Message] = []  # nothing before the first advice
        if advice is not None:
            discussion.append(_msg("assistant", f"[Evaluator]: {advice}"))
            solver_view = _window(discussion, SOLVER_MEMORY)

        async def propose(rnd: int) -> str:
            reply = await ctx.ask(
                "solver",
                [solver_system, *solver_view, solver_user],
                role="solver",
                tag={"stage": f"turn {turn}: solution {rnd}", "turn": turn},
            )
            discussion.append(_msg("assistant", f"[{roles[0]}]: {reply.content}"))
            return reply.content

        solution = await propose(0)
        critic_view = _window(discussion, CRITIC_MEMORY)
        disagreed = 0
        rounds_run = 0
        for rnd in range(1, self.rounds + 1):
            rounds_run = rnd
            for j, role in enumerate(roles[1:], start=1):
                critique = await ctx.ask(
                    f"critic{j}",
                    [
                        _msg("system", self._t("critic_system", role=role, question=question)),
                        *critic_view,
                        _msg("user", self._t("critic")),
                    ],
                    role="critic",
                    tag={"stage": f"turn {turn}: critique {rnd}", "turn": turn},
                )
                if AGREE not in critique.content:
                    disagreed += 1
                    text = re.sub(r"\n+", "\n", critique.content.strip())
                    discussion.append(_msg("assistant", f"[{role}]: {text}"))
                    solver_view = _window(discussion, SOLVER_MEMORY)
            ctx.note("critique_round", turn=turn, round=rnd, disagreements_so_far=disagreed)
            if disagreed == 0:
                break
            solution = await propose(rnd)
            critic_view = _window(discussion, CRITIC_MEMORY)
        return solution, {"criticizing_rounds": rounds_run, "consensus": disagreed == 0}


def _window(discussion: list[Message], most: int) -> list[Message]:
    """A view of the discussion as MASLab takes it: the record itself (not a copy) while it holds
    at most `most` entries, so entries appended later show in it; else a copy of the last `most`."""
    return discussion if len(discussion) <= most else discussion[-most:]


def _msg(role: str, content: str) -> Message:
    return {"role": role, "content": content}
