"""The LLM agent end to end against a fake ModelClient, through the games runner."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from mars_eval.games import make_game
from mars_eval.games.agents import BuiltinAgent
from mars_eval.models.base import ChatResponse, ConfigError, ModelAccessError
from mars_eval.run.games_runner import run_games
from tests.games.game_fakes import FakeCall, FakeClient, first_legal, legal_in
from tests.support.games_config import games_config


def config(tmp_path, **kw):
    return games_config(tmp_path, **{"games": "kuhn_poker", "model": "fake-model", "episodes": 4, **kw})


def run(cfg, client):
    return asyncio.run(run_games(cfg, client=client, progress=False))


def rows_by(summary):
    return {(r["game"], r["opponent"], r["seat"]): r for r in summary["results"]}


def test_llm_plays_every_game_seat_and_opponent(tmp_path):
    client = FakeClient()
    cfg = config(tmp_path, games=None, train=True, episodes=3)
    summary = run(cfg, client)
    rows = rows_by(summary)
    assert set(rows) == {
        ("tic_tac_toe", "mcts100", "first"),
        ("tic_tac_toe", "mcts100", "second"),
        ("tic_tac_toe", "mcts1000", "first"),
        ("tic_tac_toe", "mcts1000", "second"),
        ("kuhn_poker", "cfr", "first"),
        ("kuhn_poker", "cfr", "second"),
        ("mini_hanabi", "self", "both"),
    }
    for r in rows.values():
        assert r["episodes"] == 3 and r["invalid_rate"] == 0.0
        if r["cooperative"]:  # Hanabi has no winner: score statistics instead
            assert r["win_rate"] is r["draw_rate"] is r["loss_rate"] is None
            assert r["score_min"] <= r["mean_return"] <= r["score_max"]
            continue
        assert r["win_rate"] + r["draw_rate"] + r["loss_rate"] == pytest.approx(1.0)
        assert r["normalized_return"] == pytest.approx(make_game(r["game"]).normalize(r["mean_return"]))
    # Always taking the first free cell loses to MCTS: the runner reports real games.
    assert rows[("tic_tac_toe", "mcts1000", "second")]["loss_rate"] > 0.5
    assert summary["errors"] == 0
    records = [json.loads(line) for line in open(f"{summary['run_dir']}/samples.jsonl")]
    assert len(records) == 21 and len({r["key"] for r in records}) == 21
    hanabi = next(r for r in records if r["game"] == "mini_hanabi")
    assert {t["agent"] for t in hanabi["transcript"] if "agent" in t} == {"player0", "player1"}
    assert hanabi["key"].startswith("mini_hanabi|self|both|")


def test_invalid_answers_lose_and_are_counted(tmp_path):
    """Answers with a J are unparseable; those episodes are forfeited as in the reference: the
    offender loses its chips in the pot (1 here, never the -2 minimum payoff)."""

    def reply(call: FakeCall) -> str:
        if "Your card: J" in call.last:
            return "I fold... <answer>resign</answer>"
        return first_legal(call)

    summary = run(config(tmp_path, episodes=30, prompt_style="full"), FakeClient(reply))
    records = [json.loads(line) for line in open(f"{summary['run_dir']}/samples.jsonl")]
    for rec in records:
        seat = 0 if rec["seat"] == "first" else 1
        dealt_j = (
            make_game("kuhn_poker").new_episode(rec["seed"]).state.information_state_string(seat)[0] == "0"
        )
        assert rec["invalid"] == dealt_j
        if dealt_j:
            assert rec["agent_return"] == -1.0 and rec["invalid_player"] == seat
            assert rec["returns"][1 - seat] == 1.0
            assert "answer" in rec["invalid_reason"]
    for row in summary["results"]:
        expected = sum(r["invalid"] for r in records if r["seat"] == row["seat"]) / 30
        assert 0 < row["invalid_rate"] == pytest.approx(expected)
        assert row["loss_rate"] >= row["invalid_rate"]


def test_invalid_in_cooperative_hanabi_scores_zero(tmp_path):
    summary = run(config(tmp_path, games="mini_hanabi", episodes=3), FakeClient(lambda c: "no tags"))
    (row,) = summary["results"]
    assert row["seat"] == "both" and row["invalid_rate"] == 1.0
    assert row["mean_return"] == 0.0 and row["zero_rate"] == 1.0 and row["normalized_return"] == 0.0
    assert row["loss_rate"] is None


def test_truncated_reply_is_invalid(tmp_path):
    def reply(call: FakeCall) -> ChatResponse:
        return ChatResponse(content=f"<answer>{legal_in(call.last)[0]}</answer>", finish_reason="length")

    summary = run(config(tmp_path, episodes=2), FakeClient(reply))
    assert all(r["invalid_rate"] == 1.0 for r in summary["results"])


def test_full_style_is_multi_turn_and_thinking_is_never_fed_back(tmp_path):
    client = FakeClient(thinking="SECRET-THOUGHT")
    run(config(tmp_path, games="tic_tac_toe", opponents="random", episodes=2, prompt_style="full"), client)
    assert not any("SECRET-THOUGHT" in m["content"] for c in client.calls for m in c.messages)
    later = [c for c in client.calls if len(c.messages) > 2]
    assert later, "no player moved twice"
    for c in later:
        roles = [m["role"] for m in c.messages]
        assert roles[:2] == ["system", "user"] and roles[2::2] == ["assistant"] * len(roles[2::2])
        assert all(m["content"].startswith("<answer>") for m in c.messages if m["role"] == "assistant")
        assert "Legal actions" in c.messages[-1]["content"]


def test_compact_style_is_single_turn(tmp_path):
    client = FakeClient()
    summary = run(config(tmp_path, prompt_style="compact", episodes=3), client)
    assert client.calls and all([m["role"] for m in c.messages] == ["user"] for c in client.calls)
    assert all(r["invalid_rate"] == 0.0 for r in summary["results"])


def test_checkpoint_settings_pick_style_and_sampling(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "mars_eval.json").write_text(
        json.dumps({"prompt_style": "compact", "temperature": 0.3, "max_tokens": 64})
    )
    cfg = config(tmp_path, model=str(ckpt))
    assert cfg.prompt_style == "compact" and cfg.params.temperature == 0.3 and cfg.params.max_tokens == 64
    cfg = config(tmp_path, model=str(ckpt), prompt_style="full", temperature=0.9, max_tokens=100)
    assert cfg.prompt_style == "full" and cfg.params.temperature == 0.9 and cfg.params.max_tokens == 100
    assert config(tmp_path).params.max_tokens == 4096 and config(tmp_path).prompt_style == "reference"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"prompt_style": "tiny"}, "prompt style"),
        ({"agent": "random"}, "not both"),
        ({"games": "chess"}, "unknown game"),
        ({"episodes": 0}, "episodes"),
        ({"model": None, "agent": "mcts"}, "cannot play kuhn_poker"),
        ({"opponents": "mcts100"}, "fits none"),
        ({"games": "kuhn_poker,tic_tac_toe", "opponents": "cfr"}, "no opponent given for tic_tac_toe"),
    ],
)
def test_bad_options_are_config_errors(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        config(tmp_path, **overrides)


def test_opponent_list_applies_to_the_games_it_fits(tmp_path):
    cfg = config(tmp_path, games="kuhn_poker,tic_tac_toe", opponents="random,mcts10")
    assert cfg.opponents == {"kuhn_poker": ["random"], "tic_tac_toe": ["random", "mcts10"]}


def test_same_seed_same_games(tmp_path):
    """Replies depend on the per-call seed, so identical records prove seeds, deals and opponents repeat."""

    def reply(call: FakeCall) -> str:
        legal = legal_in(call.last)
        return f"<answer>{legal[call.params.seed % len(legal)]}</answer>"

    histories = []
    for out in ("a", "b"):
        s = run(config(tmp_path / out, games="tic_tac_toe,leduc_poker", episodes=3), FakeClient(reply))
        recs = [json.loads(line) for line in open(f"{s['run_dir']}/samples.jsonl")]
        histories.append(sorted((r["key"], r["history"], r["returns"]) for r in recs))
    assert histories[0] == histories[1]
    other = run(
        config(tmp_path / "c", games="tic_tac_toe,leduc_poker", episodes=3, seed=1), FakeClient(reply)
    )
    recs = [json.loads(line) for line in open(f"{other['run_dir']}/samples.jsonl")]
    assert sorted((r["key"], r["history"], r["returns"]) for r in recs) != histories[0]


def test_model_errors_are_kept_apart_and_resumed(tmp_path):
    calls = {"n": 0}

    def flaky(call: FakeCall):
        calls["n"] += 1
        return (
            ModelAccessError("HTTP 500 after retries")
            if "your card is Queen (Q)" in call.last
            else first_legal(call)
        )

    cfg = config(tmp_path, episodes=10)
    first = run(cfg, FakeClient(flaky))
    assert first["errors"] > 0
    assert sum(r["episodes"] for r in first["results"]) == 20 - first["errors"]
    healthy = FakeClient()
    second = run(cfg, healthy)
    assert second["errors"] == 0 and second["run_dir"] == first["run_dir"]
    assert all(r["episodes"] == 10 for r in second["results"])
    # Only the failed episodes were replayed; their completed calls came from the store.
    assert 0 < len(healthy.calls) <= first["errors"] * 2
    again = FakeClient()
    run(cfg, again)
    assert again.calls == []


def test_episodes_run_side_by_side(tmp_path):
    """Episodes wait on their calls side by side, up to --concurrency of them: the client sees
    that many calls in flight at once (one after another it would see one)."""
    client = FakeClient(latency=0.02)
    run(config(tmp_path, episodes=16, concurrency=8), client)
    assert client.peak == 8


def test_builtin_search_runs_off_the_event_loop():
    class Slow:
        name = "slow"

        def act(self, episode):
            time.sleep(0.3)
            return episode.legal_actions()[0]

    async def main() -> int:
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        move = await BuiltinAgent(Slow()).act(make_game("tic_tac_toe").new_episode(0), 0)
        task.cancel()
        assert move.action == "x(0,0)"
        return ticks

    assert asyncio.run(main()) >= 10


def test_without_model_the_embedded_checkpoint_brings_its_settings(tmp_path):
    from mars_eval.models import EMBEDDED_MODEL

    default = config(tmp_path, model=None)
    explicit = config(tmp_path, model="results/tiny")
    assert Path(default.model).resolve() == EMBEDDED_MODEL.resolve()
    saved = json.loads((EMBEDDED_MODEL / "mars_eval.json").read_text())
    assert default.prompt_style == explicit.prompt_style == saved["prompt_style"]
    assert default.params == explicit.params and default.params.max_tokens == saved["max_tokens"]
    # An endpoint without --model serves its own model: no checkpoint settings, the reference style.
    served = config(tmp_path, model=None, base_url=["http://127.0.0.1:9/v1"])
    assert served.model is None and served.prompt_style == "reference"


def test_reference_style_is_the_default_chat(tmp_path):
    client = FakeClient(thinking="SECRET-THOUGHT")
    summary = run(config(tmp_path, games="tic_tac_toe", opponents="random", episodes=2), client)
    assert summary["prompt_style"] == "reference"
    assert all(r["invalid_rate"] == 0.0 for r in summary["results"])
    assert not any("SECRET-THOUGHT" in m["content"] for c in client.calls for m in c.messages)
    from mars_eval.prompts import load_pack

    ours = load_pack()  # the default pack
    own_turn = ours.render("games.turn.own", n=99).replace("99", "")
    for c in client.calls:
        assert c.messages[0]["content"] == ours.render("games.tic_tac_toe.system")
        assert c.messages[1]["content"].startswith(
            ours.render("games.tic_tac_toe.user", rules="", information="", instructions="")[:12]
        )
        assert [m["role"] for m in c.messages[2::2]] == ["assistant"] * len(c.messages[2::2])
        assert own_turn.split("\n\n", 1)[1][:40] in c.messages[-1]["content"]
        assert c.messages[-1]["content"].rstrip().endswith(">.")  # LEGAL ACTIONS: <X(0,0)>, ...
    later = [c for c in client.calls if len(c.messages) > 2]
    assert later and all(m["content"].startswith("<answer>") for c in later for m in c.messages[2::2])


def test_lenient_answers_are_invalid_under_the_reference_rule(tmp_path):
    """'<answer>x(1,1)</answer>' is fine in our styles; the reference wants '<X(1,1)>' exactly."""

    def lower(call: FakeCall) -> str:
        return f"<answer>{legal_in(call.last)[0].strip('<>').lower()}</answer>"

    ref = run(config(tmp_path / "r", games="tic_tac_toe", opponents="random", episodes=2), FakeClient(lower))
    assert all(r["invalid_rate"] == 1.0 for r in ref["results"])


def test_normalization_is_documented_beside_raw_figures(tmp_path):
    summary = run(config(tmp_path, episodes=2), FakeClient())
    assert "unpublished and is not min-max" in summary["normalization"]
    for r in summary["results"]:
        assert {"mean_return", "win_rate", "normalized_return"} <= set(r)
    # The claim in the note: min-max maps every legal Kuhn second-mover strategy against the
    # equilibrium (mean return -0.389 .. +0.056) to 40.3 .. 51.4, so the paper's 3.9 is not min-max.
    kuhn = make_game("kuhn_poker")
    assert round(kuhn.normalize(-7 / 18), 1) == 40.3 and round(kuhn.normalize(1 / 18), 1) == 51.4


def test_context_overflow_forfeits_the_turn_instead_of_erroring(tmp_path):
    """A prompt that no longer fits the context is the seat's own failure: the episode ends by
    forfeit and is scored (as the reference env manager does), not left out as an error and
    rerun forever."""
    from mars_eval.models.base import ContextOverflowError

    def overflow(call: FakeCall):
        return ContextOverflowError(
            "the prompt has 328 tokens; the model's context length is 256 tokens", 256, 328
        )

    cfg = config(tmp_path, games="tic_tac_toe", opponents="random", episodes=3)
    summary = run(cfg, FakeClient(overflow))
    assert summary["errors"] == 0
    rows = rows_by(summary)
    for seat in ("first", "second"):
        row = rows[("tic_tac_toe", "random", seat)]
        assert row["episodes"] == 3 and row["invalid_rate"] == 1.0 and row["loss_rate"] == 1.0
    records = [json.loads(line) for line in open(f"{summary['run_dir']}/samples.jsonl")]
    assert all(r["error"] is None and r["invalid_reason"].startswith("context overflow") for r in records)
    assert all(any(t.get("event") == "context_overflow" for t in r["transcript"]) for r in records)
    # Any other access failure is still an error (rerun by the next command).
    other = run(config(tmp_path / "b", episodes=2), FakeClient(lambda c: ModelAccessError("HTTP 500")))
    assert other["errors"] == 4
