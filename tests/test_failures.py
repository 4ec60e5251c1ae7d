"""One failure classifier for every command (mars_eval.run.failures): a run folder that cannot be
written and bad input stop the run; a model access or scorer failure is an errored sample
(exit 3, rerun); a bug is an errored sample too, but exit 1. The same for mas, games and suite."""

from __future__ import annotations

import asyncio

import pytest

from mars_eval.cli.games_cmds import games_command
from mars_eval.models.base import ConfigError, ModelAccessError
from mars_eval.run import failures
from mars_eval.run import games_runner as games
from mars_eval.run.store import RunStore, StoreError
from mars_eval.tasks.base import ScorerError


def test_sample_errors_by_kind():
    assert failures.sample_error(ModelAccessError("HTTP 500: boom")) == {
        "error": "model access: HTTP 500: boom"
    }
    assert failures.sample_error(ScorerError("timed out")) == {"error": "scorer: timed out"}
    try:
        {}["x"]
    except KeyError as exc:
        bug = failures.sample_error(exc)
    assert bug["error"] == "internal: KeyError: 'x'" and "test_failures.py" in bug["traceback"]
    for stop in (StoreError("disk full"), ConfigError("bad")):
        assert failures.stops_run(stop)
        with pytest.raises(ValueError):
            failures.sample_error(stop)


def test_exit_codes():
    assert failures.exit_code({}) == 0
    assert failures.exit_code({"model access": 2, "scorer": 1}) == 3
    assert failures.exit_code({"model access": 2, "internal": 1}) == 1
    assert failures.exit_code_of(ConfigError("x")) == 2
    assert failures.exit_code_of(StoreError("x")) == failures.exit_code_of(RuntimeError("x")) == 1
    assert failures.worst([0, 3, 2, 0]) == 2 and failures.worst([3, 1, 2]) == 1 and failures.worst([]) == 0


def _games_options(tmp_path) -> dict:
    return dict(
        games="tic_tac_toe",
        train=False,
        held_out=False,
        model=None,
        base_url=[],
        agent="random",
        opponents="random",
        episodes=2,
        seed=0,
        output=str(tmp_path / "runs"),
        concurrency=None,
        max_tokens=None,
        temperature=None,
        thinking=None,
        prompt_style=None,
        fresh=False,
    )


def _failing_first_episode(monkeypatch, error: BaseException) -> list[str]:
    """The first episode played raises `error`; the others are played for real."""
    real = games.play_episode
    played: list[str] = []

    async def play(episode, seats, evaluated):
        played.append("x")
        if len(played) == 1:
            raise error
        return await real(episode, seats, evaluated)

    monkeypatch.setattr(games, "play_episode", play)
    return played


@pytest.mark.parametrize(
    ("error", "code", "kind"),
    [(ModelAccessError("HTTP 503: busy"), 3, "model access"), (KeyError("seat"), 1, "internal")],
    ids=["model access: rerun", "a bug: unexpected"],
)
def test_games_exit_code_follows_the_failed_episodes(tmp_path, monkeypatch, capsys, error, code, kind):
    played = _failing_first_episode(monkeypatch, error)
    assert games_command(json_out=True, **_games_options(tmp_path)) == code
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = list(RunStore.load_records(run_dir / "samples.jsonl").values())
    assert len(played) == len(records) == 4  # two seats x two episodes: the others finished
    errors = [r for r in records if r.get("error")]
    assert len(errors) == 1 and errors[0]["error"].startswith(f"{kind}: ")
    assert ("traceback" in errors[0]) == (kind == "internal")


def test_games_stop_when_the_run_folder_cannot_be_written(tmp_path, monkeypatch):
    """A store failure is the run's, not an episode's: it is raised (exit 1 from the CLI), never
    stored as an episode's "internal" error that a rerun would retry."""
    _failing_first_episode(monkeypatch, StoreError("cannot write samples.jsonl: disk full"))
    with pytest.raises(StoreError):
        games_command(**_games_options(tmp_path))


def test_suite_cell_exit_codes_come_from_the_classifier(monkeypatch):
    from mars_eval.run import suite
    from mars_eval.run.runner import EvalConfig

    outcomes = {
        "ok": {"errors": 0, "error_kinds": {}},
        "errored": {"errors": 2, "error_kinds": {"model access": 2}},
        "buggy": {"errors": 1, "error_kinds": {"internal": 1}},
        "refused": ConfigError("the run folder is in use"),
        "crashed": RuntimeError("boom"),
    }

    async def run_eval(cfg, **_kw):
        out = outcomes[cfg.model]
        if isinstance(out, BaseException):
            raise out
        return out

    monkeypatch.setattr(suite, "run_eval", run_eval)
    cells = [suite.Cell(m, "single", "arith", EvalConfig(task="arith", model=m)) for m in outcomes]

    class Bar:
        def hook(self, cell):
            return None

    asyncio.run(suite._run_cells(cells, None, dict.fromkeys(outcomes), None, Bar(), {"arith": []}))
    codes = {c.model: c.exit_code for c in cells}
    assert codes == {"ok": 0, "errored": 3, "buggy": 1, "refused": 2, "crashed": 1}
    assert cells[3].failure == "bad input: the run folder is in use"
    assert cells[4].failure == "internal: RuntimeError: boom"
