"""The scorer registry (tasks.scorers), the judge's reading of verdicts (tasks.judge), the judge
template in the packs, and where a scorer enters a run's identity (issue 42, item 1)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from mars_eval.analysis.agreement import agreement
from mars_eval.models.base import ChatResponse, ConfigError
from mars_eval.prompts import fields_of, load_pack, pack_from_data
from mars_eval.run.config import EvalConfig
from mars_eval.run.identity import model_identity
from mars_eval.tasks import make_task, scorers
from mars_eval.tasks.judge import public_url, read_verdict
from mars_eval.tasks.scorers import ScoreInput, exact_key, make_scorer, scorer_class, scorer_names


def test_the_builtin_scorers_are_declared_once_the_default_first() -> None:
    assert scorer_names()[:3] == ("task", "exact", "judge")
    assert all(scorer_class(n).summary for n in scorer_names())
    flags = [s.cli_flag for s in scorer_class("judge").settings]
    assert "--judge-model" in flags and "--judge-base-url" in flags


def test_an_unknown_scorer_is_one_line_with_the_nearest_name() -> None:
    with pytest.raises(ConfigError) as info:
        scorer_class("jugde")
    message = str(info.value)
    assert "\n" not in message and "did you mean 'judge'" in message and "FILE.py:CLASS" in message


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"judge_max_tokens": "0"}, "--judge-max-tokens must be at least 1"),
        ({"judge_verdict": "strict"}, "unknown --judge-verdict 'strict'"),
        ({"judge_temperature": "nan"}, "finite"),
        ({"rounds": "2"}, "scorer judge has no option 'rounds'"),
    ],
)
def test_judge_options_are_checked_by_their_declarations(options: dict, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        make_scorer("judge", options)


def test_an_option_of_another_scorer_names_its_scorer() -> None:
    with pytest.raises(ConfigError, match="--judge-model is used by --scorer judge only"):
        make_scorer("exact", {"judge_model": "m"})


@pytest.mark.parametrize(
    ("answer", "gold", "same"),
    [
        ("Paris", "paris", True),
        ("$42$.", "42", True),
        ("\\boxed{ New  York }", "new york", True),
        ("0.5", "\\frac{1}{2}", False),  # exact is text: math-verify is the task's scorer
        ("073", "73", False),
    ],
)
def test_exact_compares_text(answer: str, gold: str, same: bool) -> None:
    assert (exact_key(answer) == exact_key(gold)) is same
    verdict = asyncio.run(make_scorer("exact").score(None, ScoreInput("q", gold, answer, answer), None))  # type: ignore[arg-type]
    assert verdict.correct is same and verdict.detail is None


def test_the_task_scorer_is_the_tasks_own() -> None:
    task = make_task("aime24")
    scorer = make_scorer("task")
    item = ScoreInput("q", "73", "073", "\\boxed{073}")
    assert asyncio.run(scorer.score(task, item, None)).correct is True  # integers compared as integers
    assert scorer.identity() == {}


@pytest.mark.parametrize(
    ("reply", "ours", "maslab"),
    [
        ("Correct", True, True),
        ("  incorrect \n", False, False),
        ("[Correct]", True, None),  # MASLab reads the whole reply as the word
        ("**Incorrect**.", False, None),
        ("Verdict: the response is [Incorrect].", False, None),
        ("The response is correct.", None, None),  # a sentence: unreadable, never guessed
        ("", None, None),
    ],
)
def test_verdicts_are_read_as_declared(reply: str, ours: bool | None, maslab: bool | None) -> None:
    assert read_verdict(reply, "ours") is ours
    assert read_verdict(reply, "maslab") is maslab


def test_a_judges_base_url_keeps_no_secret() -> None:
    assert public_url("https://user:sk-secret@api.example.com:8443/v1/?key=sk-x#frag") == (
        "https://api.example.com:8443/v1"
    )
    assert public_url("127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert public_url(None) is None


class _Judge:
    model = "judge-m"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.seen: list = []

    async def chat(self, messages, params) -> ChatResponse:
        self.seen.append((messages, params))
        return ChatResponse(content=self.reply, finish_reason="stop")


def test_the_judge_sends_the_problem_reply_and_gold_and_stores_its_verdict() -> None:
    judge = _Judge("Incorrect")
    scorer = make_scorer("judge", {"judge_max_tokens": "16"})
    item = ScoreInput("What is 6*7?", "42", "41", "I get \\boxed{41}.", "p#0")
    verdict = asyncio.run(scorer.score(None, item, judge))  # type: ignore[arg-type]
    assert verdict.correct is False
    assert verdict.detail == {
        "scorer": "judge",
        "verdict": "incorrect",
        "reply": "Incorrect",
        "finish_reason": "stop",
        "calls": 1,
    }
    [(messages, params)] = judge.seen
    text = messages[0]["content"]
    assert "What is 6*7?" in text and "I get \\boxed{41}." in text and "Reference answer: 42" in text
    assert params.max_tokens == 16 and params.temperature == 0.0 and params.thinking is False


def test_no_reply_is_wrong_without_a_call_and_an_unreadable_verdict_is_wrong() -> None:
    judge = _Judge("Hmm, let me think.")
    scorer = make_scorer("judge")
    empty = asyncio.run(scorer.score(None, ScoreInput("q", "1", None, ""), judge))  # type: ignore[arg-type]
    assert empty.correct is False and empty.detail["verdict"] == "no reply" and not judge.seen
    odd = asyncio.run(scorer.score(None, ScoreInput("q", "1", "1", "1"), judge))  # type: ignore[arg-type]
    assert odd.correct is False and odd.detail["verdict"] == "unreadable"


def test_the_judge_template_is_ours_and_keeps_every_pack_hash() -> None:
    ours = load_pack("ours")
    assert fields_of(ours.templates["scoring.judge"]) == {"question", "response", "gold"}
    data = ours.to_data()
    del data["templates"]["scoring"]
    older = pack_from_data(data, "older")  # a pack written before the judge: ours' text, same hash
    assert older.templates["scoring.judge"] == ours.templates["scoring.judge"]
    assert older.hash == ours.hash
    data["templates"]["scoring"] = {"judge": "Grade {response} against {gold}."}
    assert pack_from_data(data, "own").hash != ours.hash
    data["templates"]["scoring"] = {"judge": "Grade {response}."}
    with pytest.raises(ConfigError, match="scoring.judge must use placeholder {gold}"):
        pack_from_data(data, "bad")


def test_the_default_scorer_leaves_the_identity_as_it_was_and_another_enters_it() -> None:
    model = model_identity("m", "http")
    plain = EvalConfig(task="arith").identity(model, "d")
    assert "scorer" not in plain
    assert EvalConfig(task="arith", scorer="task").identity(model, "d") == plain
    judged = EvalConfig(task="arith", scorer="judge", scoring=make_scorer("judge").identity())
    out = judged.identity(model, "d")
    assert out["scorer"]["name"] == "judge" and out["scorer"]["prompt"]["pack"] == "ours"
    assert {k: v for k, v in out.items() if k != "scorer"} == plain
    hotter = EvalConfig(
        task="arith", scorer="judge", scoring=make_scorer("judge", {"judge_temperature": 0.7}).identity()
    )
    assert hotter.identity(model, "d") != out


def test_a_scorer_of_ones_own_loads_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the file's scorer is registered in this process: a copy of the registry keeps it out of the
    # other tests (its --suffix-case would enter every in-process --help)
    monkeypatch.setattr(scorers, "_SCORERS", {n: scorer_class(n) for n in scorer_names()})
    path = tmp_path / "mine.py"
    path.write_text(
        textwrap.dedent(
            """
            from mars_eval.models.settings import Setting
            from mars_eval.tasks.scorers import Scorer, Verdict

            class Suffix(Scorer):
                name = "suffix"
                summary = "the gold ends the final reply"
                settings = (Setting("suffix_case", bool, False, "compare case too"),)

                async def score(self, task, item, client):
                    text = (item.final_text or "").strip()
                    if not self.options["suffix_case"]:
                        text, gold = text.lower(), item.gold.lower()
                    else:
                        gold = item.gold
                    return Verdict(text.endswith(gold), {"scorer": self.name})
            """
        )
    )
    scorer = make_scorer(f"{path}:Suffix", {"suffix_case": "true"})
    assert scorer.identity() == {"name": "suffix", "protocol": 1, "suffix_case": True}
    assert (
        asyncio.run(scorer.score(None, ScoreInput("q", "Paris", None, "It is paris"), None)).correct is False
    )  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no Scorer subclass named 'Nope'"):
        scorer_class(f"{path}:Nope")
    (tmp_path / "broken.py").write_text("raise SystemExit(3)\n")
    with pytest.raises(ConfigError, match=r"importing it failed: called sys.exit\(3\)"):
        scorer_class(f"{tmp_path / 'broken.py'}:X")


def test_cohens_kappa_and_the_table() -> None:
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    t = agreement([*pairs, (None, True), (True, None)])
    assert (t.both, t.a_only, t.b_only, t.neither, t.unjudged, t.n) == (20, 5, 10, 15, 2, 50)
    # p_o = 0.7; p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = 0.2 / 0.5
    assert t.observed == pytest.approx(0.7) and t.expected == pytest.approx(0.5)
    assert t.kappa == pytest.approx(0.4)
    assert agreement([(True, True), (False, False)]).kappa == pytest.approx(1.0)
    assert agreement([(True, False), (False, True)]).kappa == pytest.approx(-1.0)
    assert agreement([(False, False)] * 3).kappa is None  # one verdict for all: undefined


def test_the_api_gives_scorer_settings_to_the_scorer() -> None:
    from mars_eval.api import _eval_config

    cfg = _eval_config(
        None, "arith", None, None, {"scorer": "judge", "judge_max_tokens": 16, "rounds": None}, False
    )
    assert cfg.scorer == "judge" and cfg.scorer_options == {"judge_max_tokens": 16}
    with pytest.raises(ConfigError, match="--judge-verdict"):
        _eval_config(None, "arith", None, None, {"scorer": "judge", "judge_verdict": "x"}, False)
    with pytest.raises(ConfigError, match="unknown --scorer"):
        _eval_config(None, "arith", None, None, {"scorer": "nope"}, False)
