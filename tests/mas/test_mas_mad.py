"""MAD (Liang et al.) protocol flow against a scripted fake model."""

from __future__ import annotations

import asyncio
import json

import pytest
from mas_fakes import PROBLEM, Call, FakeChoiceTask, FakeMathTask, ScriptedClient, make_ctx

from mars_eval.mas import make_system
from mars_eval.mas.mad import MADDebate
from mars_eval.models.base import ConfigError, ModelAccessError

AGENTS = ("affirmative", "negative", "moderator", "judge")
NO_VERDICT = json.dumps({"preference": False, "supported_side": "", "reason": "both unsure", "answer": ""})


def verdict(answer: object, side: str = "negative") -> str:
    body = json.dumps({"preference": True, "supported_side": side, "reason": "clearer", "answer": answer})
    return f"<think>compare the sides</think>Here is my verdict:\n```json\n{body}\n```"


def debater_policy(moderator: list[str], judge: list[str] | None = None, aff: str = "73", neg: str = "72"):
    """Debaters answer with a secret in their thinking; moderator/judge replies come from lists."""

    def policy(call: Call) -> str:
        if call.agent == "affirmative":
            return f"<think>SECRET-aff-{call.n}</think>I say \\boxed{{{aff}}} (round {call.n + 1})."
        if call.agent == "negative":
            return f"<think>SECRET-neg-{call.n}</think>No, it is \\boxed{{{neg}}} (round {call.n + 1})."
        if call.agent == "moderator":
            return moderator[call.n]
        if call.agent == "judge":
            return (judge or [])[call.n]
        raise AssertionError(f"unexpected agent {call.agent}")

    return policy


def run(
    policy,
    rounds: int = 3,
    task=None,
    judge_sees: str = "first-round",
    stop: str = "lenient",
    reader: str = "tolerant",
):
    """Most tests below are of the lenient rule (--mad-stop lenient); the reference rule's are
    marked so. All read verdicts with the tolerant reader (--mad-verdict tolerant: fenced JSON
    after thinking, key aliases); the reference reader's tests are in test_mas_mad_reference.py."""
    client = ScriptedClient(policy, AGENTS)
    ctx = make_ctx(client)
    result = asyncio.run(
        MADDebate(rounds=rounds, mad_judge=judge_sees, mad_stop=stop, mad_verdict=reader).solve(
            PROBLEM, task or FakeMathTask(), ctx
        )
    )
    return result, client, ctx


def test_round_one_verdict_stops_the_debate():
    result, client, ctx = run(debater_policy([verdict("73", "affirmative")]))
    assert client.agents_in_order() == ["affirmative", "negative", "moderator"]
    assert result.answer == "73"
    assert result.how == "moderator verdict, round 1"
    assert result.details["stopped_early"] is True
    assert result.details["source"] == "moderator"
    assert result.details["verdicts"][0]["verdict"]["side"] == "affirmative"
    notes = [t for t in ctx.transcript if t.get("event") == "verdict"]
    assert len(notes) == 1 and notes[0]["answer"] == "73"


def test_prompts_follow_the_protocol():
    result, client, _ = run(debater_policy([NO_VERDICT, verdict("72")]))
    assert client.agents_in_order() == ["affirmative", "negative", "moderator"] * 2
    aff1, neg1, mod1, aff2, neg2, mod2 = client.calls
    assert "What is 40 + 33?" in aff1.last_user and "\\boxed{}" in aff1.last_user
    # The negative side sees the affirmative's answer and is told it does not agree.
    assert "I say \\boxed{73} (round 1)" in neg1.last_user and "not agree" in neg1.last_user
    # Round 2: each side answers the other's latest argument, keeping its own history.
    assert "No, it is \\boxed{72} (round 1)" in aff2.last_user
    assert "I say \\boxed{73} (round 2)" in neg2.last_user
    assert [m["role"] for m in aff2.messages] == ["system", "user", "assistant", "user"]
    # The moderator sees both arguments of its round and its own earlier verdict.
    assert "I say \\boxed{73} (round 1)" in mod1.last_user
    assert "No, it is \\boxed{72} (round 1)" in mod1.last_user
    assert "second round" in mod2.last_user and NO_VERDICT in mod2.text()
    assert "first round" in mod1.last_user and '"debate_answer"' in mod1.last_user
    assert result.answer == "72" and result.how == "moderator verdict, round 2"


def test_thinking_never_reaches_another_agent():
    _, client, ctx = run(debater_policy([NO_VERDICT, NO_VERDICT, NO_VERDICT], [" a\n b", verdict("73")]))
    assert len(client.calls) == 11
    for call in client.calls:
        assert "SECRET" not in call.text(), call.agent
        assert "compare the sides" not in call.text()
    # ... but it is kept in the transcript.
    thinking = [t["thinking"] for t in ctx.transcript if t.get("agent") == "affirmative"]
    assert thinking == ["SECRET-aff-0", "SECRET-aff-1", "SECRET-aff-2"]


def test_judge_lists_candidates_then_picks():
    judge = ["Candidates:\n73\n72", '{"reason": "affirmative is right", "answer": "73"}']
    result, client, ctx = run(debater_policy([NO_VERDICT] * 3, judge))
    assert client.agents_in_order() == ["affirmative", "negative", "moderator"] * 3 + ["judge", "judge"]
    cand, pick = client.calls[-2:]
    # As in both references, the judge is shown the first round's arguments (memory_lst[2]).
    assert "I say \\boxed{73} (round 1)" in cand.last_user
    assert "No, it is \\boxed{72} (round 1)" in cand.last_user
    assert "round 3" not in cand.text()
    assert cand.system.startswith("You are a moderator")  # the references' judge meta prompt
    assert "What is 40 + 33?" in pick.last_user  # the topic again before the pick
    assert "Candidates:\n73\n72" in pick.text()  # the pick sees its own candidate list
    assert result.answer == "73" and result.how == "judge verdict"
    assert result.details == {
        "rounds_run": 3,
        "verdicts": result.details["verdicts"],
        "source": "judge",
        "stopped_early": False,
    }
    assert [v["parsed"] for v in result.details["verdicts"]] == [True, True, True]
    assert any(t.get("event") == "judge_candidates" for t in ctx.transcript)


def test_unparseable_verdicts_count_as_no_answer():
    prose = "The affirmative side seems right, the answer is probably 73."
    result, client, _ = run(debater_policy([prose, prose], ["73 or 72", verdict("72")]), rounds=2)
    assert len(client.calls) == 3 * 2 + 2
    assert [v["parsed"] for v in result.details["verdicts"]] == [False, False]
    assert result.answer == "72" and result.details["source"] == "judge"


@pytest.mark.parametrize("placeholder", ["no idea at all", "", None, "undetermined", "N/A", "Neither side"])
def test_placeholder_verdict_answer_does_not_stop(placeholder):
    result, client, _ = run(debater_policy([verdict(placeholder), verdict("73")]))
    assert len(client.calls) == 6
    assert result.answer == "73"
    assert result.details["verdicts"][0]["parsed"] is True
    assert result.details["verdicts"][0]["verdict"]["answer"] is None


def test_verdict_answer_the_task_cannot_extract_does_not_stop():
    def policy(call: Call) -> str:
        if call.agent in ("affirmative", "negative"):
            return "Answer: B"
        return verdict("E") if call.n == 0 else verdict("B")

    result, client, _ = run(policy, task=FakeChoiceTask())
    assert len(client.calls) == 6
    assert result.details["verdicts"][0]["verdict"]["answer"] == "E"
    assert result.details["verdicts"][0]["answer"] is None
    assert result.answer == "B" and result.how == "moderator verdict, round 2"


@pytest.mark.parametrize(
    ("judge", "aff", "neg", "answer", "source"),
    [
        (["x", "I pick \\boxed{72} without JSON"], "73", "72", "72", "judge_text"),
        (["x", "no idea"], "73", "72", "73", "affirmative"),
        (["x", "no idea"], "not sure", "72", "72", "negative"),
        (["x", '{"answer": ""}'], "not sure", "unsure", None, "none"),
    ],
)
def test_fallback_order(judge, aff, neg, answer, source):
    def policy(call: Call) -> str:
        if call.agent == "affirmative":
            return aff if aff == "not sure" else f"\\boxed{{{aff}}}"
        if call.agent == "negative":
            return neg if neg == "unsure" else f"\\boxed{{{neg}}}"
        return NO_VERDICT if call.agent == "moderator" else judge[call.n]

    result, client, ctx = run(policy, rounds=1)
    assert len(client.calls) == 5
    assert result.answer == answer
    assert result.details["source"] == source
    fallbacks = [t for t in ctx.transcript if t.get("event") == "fallback"]
    assert [f["source"] for f in fallbacks] == [source]


@pytest.mark.parametrize("raw", ["73", "\\boxed{73}", 73, "$73$", " 73. ", ["73"]])
def test_verdict_answer_forms_are_normalized(raw):
    result, _, _ = run(debater_policy([verdict(raw)]))
    assert result.answer == "73"


@pytest.mark.parametrize("raw", ["C", "(C)", "\\boxed{C}", "Option C", "c"])
def test_choice_verdicts(raw):
    def policy(call: Call) -> str:
        if call.agent in ("affirmative", "negative"):
            return "Answer: B"
        return verdict(raw)

    result, _, _ = run(policy, task=FakeChoiceTask())
    assert result.answer == "C"


def test_latex_verdict_without_escaping():
    """A moderator writing "\\boxed{73}" unescaped inside JSON must not lose the backslash."""
    raw = '{"preference": true, "supported_side": "affirmative", "reason": "ok", "answer": "\\boxed{73}"}'
    assert "\\boxed" in raw and "\\\\boxed" not in raw
    result, _, _ = run(debater_policy([raw]))
    assert result.answer == "73"


def test_tokens_and_calls_are_counted():
    _, client, ctx = run(debater_policy([NO_VERDICT, verdict("73")]))
    assert ctx.calls == 6
    assert ctx.prompt_tokens == client.prompt_tokens > 0
    assert ctx.completion_tokens == client.completion_tokens > 0
    messages = [t for t in ctx.transcript if "agent" in t and "content" in t]
    assert [m["role"] for m in messages] == ["debater", "debater", "moderator"] * 2


def test_model_errors_propagate():
    def policy(call: Call):
        return ModelAccessError("endpoint down") if call.agent == "negative" else "\\boxed{1}"

    with pytest.raises(ModelAccessError):
        run(policy)


def test_registry_and_bad_rounds():
    assert make_system("mad").rounds == 3
    assert make_system("mad", rounds=2).rounds == 2
    with pytest.raises(ConfigError):
        MADDebate(rounds=0)


def test_judge_option_shows_the_last_round():
    judge = ["73\n72", '{"Reason": "r", "debate_answer": "72"}']
    result, client, _ = run(debater_policy([NO_VERDICT] * 3, judge), judge_sees="last-round")
    cand = client.calls[-2]
    assert "(round 3)" in cand.last_user and "(round 1)" not in cand.last_user
    assert result.answer == "72"
    assert make_system("mad", mad_judge="last-round").mad_judge == "last-round"
    assert make_system("mad").mad_judge == "first-round"
    with pytest.raises(ConfigError, match="mad-judge"):
        MADDebate(mad_judge="everything")


@pytest.mark.parametrize(
    ("raw", "answer", "side"),
    [
        ("Affirmative", "73", "affirmative"),
        ("the negative side", "72", "negative"),
        ("Negative side's answer", "72", "negative"),
        ("The affirmative side is correct.", "73", "affirmative"),
    ],
)
def test_moderator_naming_a_side_means_that_sides_latest_answer(raw, answer, side):
    result, client, _ = run(debater_policy([NO_VERDICT, verdict(raw, side)]))
    assert len(client.calls) == 6
    assert result.answer == answer  # round 2's answer of that side, never the word itself
    assert result.how == f"moderator verdict, round 2 (named the {side} side)"
    assert result.details["verdicts"][1]["via"] == side


def test_judge_naming_a_side_means_the_argument_it_was_shown():
    def policy(call: Call) -> str:
        if call.agent in ("affirmative", "negative"):
            return f"\\boxed{{{call.agent[:3]}{call.n}}}"
        if call.agent == "moderator":
            return NO_VERDICT
        return "x" if call.n == 0 else '{"Reason": "r", "debate_answer": "Negative"}'

    result, _, _ = run(policy, rounds=2)
    assert result.answer == "neg0" and result.how == "judge verdict (named the negative side)"
    result, _, _ = run(policy, rounds=2, judge_sees="last-round")
    assert result.answer == "neg1"


@pytest.mark.parametrize(
    "placeholder", ["Continue", "No clear answer yet", "N/A", "The debate continues", "continue debating"]
)
def test_no_answer_words_do_not_stop_the_debate(placeholder):
    """A math task's extractor would take these as answers: they must not end the debate."""
    result, client, _ = run(debater_policy([verdict(placeholder, ""), verdict("73")]))
    assert len(client.calls) == 6
    assert result.answer == "73" and result.how == "moderator verdict, round 2"


def test_reference_verdict_keys_are_read():
    body = json.dumps(
        {
            "Whether there is a preference": "Yes",
            "Supported Side": "Negative",
            "Reason": "r",
            "debate_answer": "72",
        }
    )
    result, client, _ = run(debater_policy([body]))
    assert len(client.calls) == 3 and result.answer == "72"
    assert result.details["verdicts"][0]["verdict"]["side"] == "negative"


def test_no_prompt_asks_a_debater_to_hold_its_position():
    """The references' debaters are asked whether they agree, never to keep their answer."""
    _, client, _ = run(debater_policy([NO_VERDICT] * 3, ["x", verdict("73")]))
    for call in client.calls:
        if call.agent in ("affirmative", "negative"):
            text = call.text().lower()
            for nudge in ("only for good reasons", "keep or change", "argue for what you believe"):
                assert nudge not in text
    rebuttal = next(c for c in client.calls if c.agent == "affirmative" and c.n == 1)
    assert "No, it is \\boxed{72} (round 1)" in rebuttal.last_user and "agree" in rebuttal.last_user


# --- the reference stop rule (the default) ------------------------------------------------------
def test_reference_rule_is_the_default():
    assert make_system("mad").mad_stop == "reference"
    with pytest.raises(ConfigError, match="--mad-stop"):
        MADDebate(mad_stop="sometimes")


@pytest.mark.parametrize("raw", ["73", "\\boxed{73}", 73, "$73$", " 73. ", ["73"]])
def test_reference_rule_reads_the_answer_as_written(raw):
    result, client, _ = run(debater_policy([verdict(raw)]), stop="reference")
    assert result.answer == "73" and len(client.calls) == 3


@pytest.mark.parametrize("raw", ["Affirmative", "the negative side", "Continue", "N/A", "no idea at all"])
def test_reference_rule_stops_at_any_non_empty_answer_and_counts_it(raw):
    """A side's name or a placeholder ends the debate, as in the references; it is no answer."""
    result, client, _ = run(debater_policy([verdict(raw), verdict("73")]), stop="reference")
    assert len(client.calls) == 3 and result.answer is None
    assert result.details["verdict_not_an_answer"] is True and result.details["rounds_run"] == 1


def test_reference_rule_goes_on_past_an_empty_answer_and_has_no_fallback():
    empty = verdict("")
    result, client, _ = run(
        debater_policy([empty, empty, empty], judge=["candidates: 73 and 72", verdict("")]), stop="reference"
    )
    assert len(client.calls) == 11 and result.answer is None  # the debaters' 73 is not used
    assert result.details["judge_no_answer"] is True
    assert client.agents_in_order()[-2:] == ["judge", "judge"]


def test_reference_rule_counts_an_unreadable_verdict_and_stops():
    result, client, _ = run(debater_policy(["I prefer the affirmative side."]), stop="reference")
    assert len(client.calls) == 3 and result.answer is None
    assert result.details["verdict_unparseable"] is True


# --- the reference reader (the default) ---------------------------------------------------------
def reference_verdict(answer: object) -> str:
    """A Python literal (repr: False and None as Python writes them)."""
    body = {"Whether there is a preference": "Yes", "Supported Side": "Negative", "Reason": "r"}
    return repr({**body, "debate_answer": answer})


def test_reference_reader_is_the_default():
    assert make_system("mad").mad_verdict == "reference"
    with pytest.raises(ConfigError, match="--mad-verdict"):
        MADDebate(mad_verdict="loose")


@pytest.mark.parametrize(
    ("raw", "calls"), [(0, 6), (False, 6), (None, 6), ([], 6), ("", 6), (" ", 3), ("0", 3)]
)
def test_reference_stop_is_python_truthiness(raw, calls):
    """MASLab's `if mod_ans["debate_answer"]`: a false value goes on, anything else stops."""
    policy = debater_policy([reference_verdict(raw), reference_verdict("73")])
    result, client, _ = run(policy, stop="reference", reader="reference")
    assert len(client.calls) == calls
    assert result.answer == {6: "73", 3: None if raw == " " else "0"}[calls]


def test_reference_reader_keeps_the_moderators_reply_de_fenced():
    fenced = "```json\n" + reference_verdict("") + "\n```  "
    result, client, _ = run(
        debater_policy([fenced, reference_verdict("73")]), stop="reference", reader="reference"
    )
    moderator = [c for c in client.calls if c.agent == "moderator"][1]
    assert moderator.messages[2] == {"role": "assistant", "content": reference_verdict("")}
    assert result.answer == "73"


def test_reference_reader_with_the_lenient_rule():
    """The readers and the stop rules combine: an unreadable verdict goes on under lenient."""
    policy = debater_policy(["Prose. " + reference_verdict("72"), reference_verdict("73")])
    result, client, _ = run(policy, stop="lenient", reader="reference")
    assert len(client.calls) == 6 and result.answer == "73"
