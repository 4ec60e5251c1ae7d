"""A scripted "model" for the multi-agent systems: replies in the shape each role asks for.

`RolePolicy` answers every role of the systems (solvers and debaters, AgentVerse's recruiter,
critics and evaluator, DyLAN's ranker, MacNet's reviewers and aggregators) in the format that
role's prompt asks for, so that a system's stop rules and parsers are exercised as with a real
model. Which role a request is for is read from words of its prompt that every prompt pack's
wording keeps (format tokens such as "[Agree]" and "Correctness:").

Answers are right or wrong by a hash of (problem, request seed): `p_right` of the calls answer
the gold, the others one of three wrong numbers, so agents sometimes agree and sometimes not, as
real samples do (`p_right=1` makes every call right: exact accuracies for tests). Critics
agree, evaluators accept and rankers pick by further hashes, with `p_agree` and `p_accept`.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from tests.support.scripted_policy import Reply, ScriptedRequest


def _unit(*parts: object) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class RolePolicy:
    def __init__(
        self,
        golds: dict[str, str],
        p_right: float = 0.6,
        p_agree: float = 0.5,
        p_accept: float = 0.7,
        wrong: set[str] = frozenset(),
    ) -> None:
        self.golds = golds  # a substring of the problem -> its gold answer
        self.p_right, self.p_agree, self.p_accept = p_right, p_agree, p_accept
        self.wrong = wrong  # problem keys always answered wrong
        self._order = sorted(golds, key=len, reverse=True)

    @classmethod
    def from_jsonl(cls, path: str | Path, limit: int | None = None, **kw: float) -> RolePolicy:
        """Golds of an AIME-style file (the first 80 characters of each problem as its key)."""
        golds = {}
        for line in Path(path).read_text(encoding="utf-8").splitlines()[:limit]:
            row = json.loads(line)
            golds[row["problem"][:80]] = str(row["answer"])
        return cls(golds, **kw)

    def _problem(self, prompt: str) -> str | None:
        return next((k for k in self._order if k in prompt), None)

    def _answer(self, key: str | None, req: ScriptedRequest, salt: str = "") -> str:
        if key is None:
            return "0"
        gold = self.golds[key]
        if not gold.isdigit():
            return gold if key not in self.wrong else f"not {gold}"
        if key in self.wrong:  # always the same wrong answer: agents agree on it
            return str(int(gold) + 1)
        if _unit(key, req.seed, salt) < self.p_right:
            return gold
        return str(int(gold) + 2 + int(_unit(key, req.seed, "w", salt) * 3))

    def __call__(self, req: ScriptedRequest) -> Reply:
        prompt = req.prompt
        last = str(req.messages[-1].get("content") or "")
        key = self._problem(prompt)
        u = _unit(key, req.seed, "role")
        think = f"thinking about it (seed {req.seed})"
        if "[Agree]" in last:  # an AgentVerse critic
            text = (
                "My solution reaches the same final answer. [Agree]"
                if u < self.p_agree
                else ("The second step miscounts one case; recheck it.")
            )
            return Reply(content=text, reasoning_content=think)
        if "Correctness" in last:  # AgentVerse's evaluator
            verdict = 1 if u < self.p_accept else 0
            return Reply(
                content=f"Correctness: {verdict}\nResponse: checked each step.", reasoning_content=think
            )
        found = re.search(r"recruit (\d+)", prompt)
        if found and "1." in last:  # AgentVerse's recruiter
            n = int(found.group(1))
            roles = [
                "a number theorist",
                "an algebraist",
                "a geometer",
                "a combinatorialist",
                "a probabilist",
            ]
            return Reply(content="\n".join(f"{i + 1}. {roles[i % len(roles)]}." for i in range(n)))
        if re.search(r"\[1,\s?3\]|\[1,\s?2\]", last) and "best" in last:  # DyLAN's ranker
            count = len(re.findall(r"```", last)) // 2 or 4
            i = int(u * count)
            j = (i + 1 + int(_unit(key, req.seed, "pick") * (count - 1))) % count
            return Reply(content=f"Solutions {i + 1} and {j + 1} are the most careful. [{i + 1},{j + 1}]")
        if "debate_answer" in last:  # MAD's moderator or judge: a JSON verdict, sometimes undecided
            decided = u < self.p_accept or "Reason" in last and "Supported Side" not in last
            verdict = {
                "Whether there is a preference": "Yes" if decided else "No",
                "Supported Side": "Affirmative",
                "Reason": "weighed both sides",
                "debate_answer": self._answer(key, req) if decided else "",
            }
            return Reply(content=json.dumps(verdict), reasoning_content=think)
        if "<INFO>" in last:  # a MacNet review
            return Reply(content="Check the final arithmetic step once more.", reasoning_content=think)
        answer = self._answer(key, req)
        text = f"Working through it step by step gives \\boxed{{{answer}}}."
        if "TERMINATE" in prompt and u < self.p_accept:  # AutoGen's assistant ends the chat
            text += " TERMINATE"
        return Reply(content=text, reasoning_content=think)
