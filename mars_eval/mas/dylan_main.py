"""DyLAN's main variant (`--dylan-variant main`): MASLab's methods/dylan/dylan_main.py with
config_main.yaml (4 agents, 3 rounds, listwise ranking, every role "Assistant").

What runs, as MASLab's `DyLAN_Main.inference` (see `mars_eval.mas.dylan` for the dispatch):

1. Round 1: the agents answer the problem (system prompt `mas.dylan.main_system`, the problem
   alone as the user message) in a shuffled order.
2. Round 2: in a new shuffled order, each agent gets all round-1 replies, themselves shuffled
   for each agent, numbered ("response 1", ...: `mas.dylan.main_update` and `main_response`),
   and is asked for an updated answer and a 1..5 score per reply in the form `[[a, b, ...]]`.
3. With more than 3 agents a ranker (no system prompt) is shown the round-2 replies in a
   shuffled order (`mas.dylan.main_rank`) and names the best two as `[i,j]`: read as MASLab's
   regex does (the last `[d,d]` with single digits 1..7, a space allowed after the comma),
   each clipped to 1..n; when none is found two are drawn at random (counted as unparsed).
4. Round 3: a new shuffled order again; the agent at each *position* of that order named by the
   ranking answers (MASLab tests `position in picked`, so which agent answers is a draw, and a
   pair naming one reply twice runs one agent). Each sees all round-2 replies, shuffled: MASLab
   does not deactivate the replies the ranker left out. With 3 agents there is no ranking and
   all three answer.

Agreement is not on answers but on the reply texts, by MASLab's stand-in for BLEU
(`bleu_agrees`): two replies agree when at least 90% of one's lowercased whitespace tokens occur
in the other. Rounds 1 and 2 stop early, once more than floor(2/3 n) agents have answered, when
more than floor(2/3 n) replies agree with one reply (the first with most agreement, as
`most_frequent`); round 3 likewise over the ranked count. The final text is then that reply;
otherwise the reply of round 3 most others agree with. The answer is read from the final text
by the task's extractor.

Shuffles: one `random.Random` per sample, drawn in MASLab's order (each round's order, each
agent's view of the replies, the ranker's order, the random fallback pair, and before every
call the endpoint draw of MASLab's `call_llm`, which picks from a one-entry model list with the
same generator); Python's shuffle is the same algorithm as the module-level one MASLab calls.
Its seed (`--dylan-shuffle`): `sample` (default) derives it from the run's --seed and the
sample's key, so every problem and sample gets its own orders and a resumed run draws the same
ones; `maslab` seeds it with --seed alone at the start of every sample, as MASLab's
`random.seed(random_seed)` (0 in its config): with --seed 0, the orders of a sample run alone
under MASLab. (MASLab's threads share Python's global generator, so its orders under its
default parallel run are not reproducible at all.)

Deviations (named): an early stop in rounds 1-3 gives the agreed reply as the answer, where
MASLab returns the bare text and its inference loop, which wants a mapping with "response",
records the sample as an error (every early stop errors there); the score lists each agent
gives are read (`details["ratings"]`) into DyLAN's agent importance (`details["importance"]`),
which MASLab's main variant asks for but never computes; agents answering at once where no
agreement check falls between them run concurrently (the calls and orders are those of the
sequential reference); by default (`--dylan-shuffle sample`) every sample draws its own orders,
where MASLab reseeds with the same seed for every sample (`maslab` does that); the answer is read
from the final text by the task's extractor, where MASLab hands the text to its own evaluator.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.util import gather_or_cancel
from mars_eval.models.base import Message
from mars_eval.tasks.base import Task

# MASLab's main ranking reader: single digits 1..7 whatever the number of agents.
RANKS = re.compile(r"\[([1234567]),\s*([1234567])\]")
AGREE = 0.9 * 100  # MASLab compares its score (a percentage) with this very product


def bleu_agrees(reference: str, hypothesis: str) -> bool:
    """MASLab's `cmp_res`: the share of `hypothesis`'s lowercased whitespace tokens found among
    `reference`'s, as a percentage, at least 90 (an empty hypothesis scores 0). Not BLEU (no
    higher n-grams, no clipped counts, no brevity penalty), despite MASLab's name for it."""
    ref = set(reference.lower().split())  # MASLab tests membership in a list: the same, faster
    hyp = hypothesis.lower().split()
    matches = sum(1 for token in hyp if token in ref)
    precision = matches / len(hyp) if hyp else 0
    return precision * 100 >= AGREE


def most_frequent(texts: list[str]) -> tuple[int, int]:
    """MASLab's `_most_frequent` with `bleu_agrees`: (the index of the first text agreeing with
    the most texts, that count); (0, 0) when none agrees even with itself."""
    best, count = 0, 0
    for i, text in enumerate(texts):
        agreeing = sum(bleu_agrees(text, other) for other in texts)
        if agreeing > count:
            best, count = i, agreeing
    return best, count


def parse_ranks(text: str, n: int, rng: random.Random) -> tuple[list[int], bool]:
    """MASLab's main `_parse_ranks`: the last `[i,j]` (digits 1..7) as 0-based positions clipped
    to 0..n-1, and True; else two distinct positions drawn from `rng`, and False."""
    found = RANKS.findall(text)
    if not found:
        return rng.sample(list(range(n)), 2), False
    i, j = found[-1]
    return [min(max(int(i) - 1, 0), n - 1), min(max(int(j) - 1, 0), n - 1)], True


def last_double_bracket(text: str) -> str | None:
    r"""What `re.findall(r"\[\[(.*?)\]\]", text)[-1]` gives (None for no match), in linear time:
    that regex retries every "[[" of a line with no "]]" after it, quadratic on such a reply."""
    found, pos = None, 0
    close = eol = -2  # the next "]]" and newline found so far (-1: none left)
    while (i := text.find("[[", pos)) != -1:
        if -1 < close < i + 2 or close == -2:
            close = text.find("]]", i + 2)
        if -1 < eol < i + 2 or eol == -2:
            eol = text.find("\n", i + 2)
        if close != -1 and (eol == -1 or close < eol):
            found, pos = text[i + 2 : close], close + 2
        elif eol == -1:
            break
        else:  # no later "[[" of this line can close before its end either
            pos = eol + 1
    return found


def parse_ratings(text: str) -> list[int]:
    """MASLab's `_find_array`: the last `[[...]]` on one line, spaces removed, split at commas,
    each an int (0 where it is none)."""
    found = last_double_bracket(text)
    if found is None:
        return []
    out = []
    for item in found.replace(" ", "").split(","):
        try:
            out.append(int(item))
        except ValueError:  # also past Python's digit limit
            out.append(0)
    return out


def edge_weights(ratings: list[int], shown: list[int]) -> dict[int, float]:
    """MASLab's edge update: the scores (in the order the replies were shown, `shown` naming
    whose) as weights per earlier agent: s/5 for 1..5, 1 above, 0 else; normalised, uniform
    when all are 0 or the count is wrong."""
    scores = ratings if len(ratings) == len(shown) else [0] * len(shown)
    raw = {a: (s / 5 if 0 < s <= 5 else (1 if s > 5 else 0)) for a, s in zip(shown, scores, strict=True)}
    total = sum(raw.values())
    if total > 0:
        return {a: w / total for a, w in raw.items()}
    return {a: 1 / len(shown) for a in shown} if shown else {}


async def solve_main(
    ctx: SampleContext,
    task: Task,
    question: str,
    n: int,
    rng: random.Random,
    render: Callable[..., str],
) -> SystemResult:
    """One sample of the main variant (see the module docstring)."""
    names = [f"agent{i}" for i in range(n)]
    system: Message = {"role": "system", "content": render("main_system")}
    rounds: list[dict[str, Any]] = []  # agents (in answer order), replies, shown orders, weights

    def update_prompt(replies: list[str], shown: list[int]) -> str:
        responses = "".join(render("main_response", index=k, text=replies[a]) for k, a in enumerate(shown, 1))
        return render("main_update", question=question, responses=responses, count=len(shown))

    async def run_round(number: int, agents: list[int], earlier: list[str] | None, threshold: int):
        """Agents answer in order; after more than `threshold` answers, each answer is followed by
        the agreement check. Returns the round and the index of the agreed reply (or None)."""
        done: dict[str, Any] = {"round": number, "agents": [], "replies": [], "shown": [], "weights": []}
        rounds.append(done)

        def prepare(a: int) -> list[Message]:
            if earlier is None:
                _endpoint_draw(rng)
                return [system, _user(question)]
            shown = list(range(len(earlier)))
            rng.shuffle(shown)  # drawn in answer order, as MASLab's per-node shuffle
            done["shown"].append(shown)
            _endpoint_draw(rng)
            return [system, _user(update_prompt(earlier, shown))]

        head = agents[: threshold + 1]
        prompts = [prepare(a) for a in head]
        replies = await gather_or_cancel(
            _ask(ctx, names[a], p, number) for a, p in zip(head, prompts, strict=True)
        )
        done["agents"] += head
        done["replies"] += replies
        agreed = _agreement(done["replies"], threshold)
        for a in agents[threshold + 1 :]:
            if agreed is not None:
                break
            reply = await _ask(ctx, names[a], prepare(a), number)
            done["agents"].append(a)
            done["replies"].append(reply)
            agreed = _agreement(done["replies"], threshold)
        if earlier is not None:
            pairs = zip(done["replies"], done["shown"], strict=True)
            done["weights"] = [edge_weights(parse_ratings(t), s) for t, s in pairs]
        ctx.note(
            "dylan_layer",
            layer=number,
            agents=[names[a] for a in done["agents"]],
            answers=[task.extract(t) for t in done["replies"]],
            agreed=None if agreed is None else names[done["agents"][agreed]],
        )
        return done, agreed

    whole = math.floor(2 / 3 * n)
    first, agreed = await run_round(1, _shuffled(rng, n), None, whole)
    how = "agreement in round 1"
    unparsed, picked = 0, list(range(n))
    if agreed is None:
        second, agreed = await run_round(2, _shuffled(rng, n), _by_agent(first, n), whole)
        how = "agreement in round 2"
        if agreed is None:
            earlier = _by_agent(second, n)
            if n > 3:
                order = _shuffled(rng, n)
                responses = "".join(
                    render("main_response", index=k, text=earlier[a]) for k, a in enumerate(order, 1)
                )
                prompt = render("main_rank", question=question, responses=responses)
                _endpoint_draw(rng)
                resp = await ctx.ask("ranker", [_user(prompt)], role="ranker", tag={"stage": "ranking"})
                tops, ok = parse_ranks(resp.content, n, rng)
                unparsed += not ok
                picked = [order[t] for t in tops]
                ctx.note("ranking", agent="ranker", picked=[names[a] for a in picked], parsed=ok)
            positions = _shuffled(rng, n)  # round 3 runs the agents at the picked positions
            runs = [positions[p] for p in range(n) if p in picked]
            _, agreed = await run_round(3, runs, earlier, math.floor(2 / 3 * len(picked)))
            how = "agreement in round 3"
    last = rounds[-1]
    if agreed is None:
        agreed, count = most_frequent(last["replies"])
        how = f"the round-3 reply most agree with ({count}/{len(last['replies'])})"
    final_text = last["replies"][agreed]
    answer = task.extract(final_text)
    importance = _importance(rounds, last, n)
    scores = {names[i]: round(s, 4) for i, s in enumerate(importance)}
    ctx.note("importance", scores=scores)
    return SystemResult(
        answer=answer,
        final_text=final_text,
        how=how if answer is not None else f"{how}; no answer in it",
        details={
            "variant": "main",
            "layers": [
                {
                    "layer": r["round"],
                    "agents": [names[a] for a in r["agents"]],
                    "answers": [task.extract(t) for t in r["replies"]],
                }
                for r in rounds
            ],
            "picked": [names[a] for a in picked] if len(rounds) == 3 and n > 3 else [],
            "ratings": [[parse_ratings(t) for t in r["replies"]] for r in rounds[1:]],
            "importance": scores,
            "unparsed": unparsed,
        },
    )


def _user(text: str) -> Message:
    return {"role": "user", "content": text}


def _endpoint_draw(rng: random.Random) -> None:
    """The draw MASLab's `call_llm` makes from the same generator before every call: its
    endpoint, `random.choice` over the model's list (one entry, as in its example config)."""
    rng.choice(_ONE_ENDPOINT)


_ONE_ENDPOINT = (None,)


def _shuffled(rng: random.Random, n: int) -> list[int]:
    order = list(range(n))
    rng.shuffle(order)
    return order


def _by_agent(done: dict[str, Any], n: int) -> list[str]:
    """A full round's replies indexed by agent (the order MASLab's edges list them)."""
    out = [""] * n
    for a, t in zip(done["agents"], done["replies"], strict=True):
        out[a] = t
    return out


async def _ask(ctx: SampleContext, agent: str, messages: list[Message], number: int) -> str:
    resp = await ctx.ask(agent, list(messages), role="agent", tag={"stage": f"layer {number}"})
    return resp.content


def _agreement(replies: list[str], threshold: int) -> int | None:
    """The index of the reply more than `threshold` replies agree with, else None."""
    if len(replies) <= threshold:
        return None
    best, count = most_frequent(replies)
    return best if count > threshold else None


def _importance(rounds: list[dict[str, Any]], last: dict[str, Any], n: int) -> list[float]:
    """DyLAN's agent importance: the last round's answering agents share 1; going back, an
    agent's node gets, from each later node that was shown its reply, that node's importance
    times the weight of the edge (from the ratings). An agent's score: the sum over its rounds
    divided by the number of rounds."""
    node = {a: 1 / len(last["agents"]) for a in last["agents"]}
    totals = [0.0] * n
    for a, s in node.items():
        totals[a] += s
    for later in reversed(rounds[1:]):
        back = dict.fromkeys(range(n), 0.0)
        for a, weights in zip(later["agents"], later["weights"], strict=True):
            for j, w in weights.items():
                back[j] += node.get(a, 0.0) * w
        node = back
        for a, s in node.items():
            totals[a] += s
    return [t / len(rounds) for t in totals]
