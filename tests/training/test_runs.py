"""End to end on the micro preset: a run, exact resume, NaN handling (seconds each)."""

import json

import pytest
import torch
from safetensors.torch import load_file

from training.cli import main
from training.config import build_config
from training.trainer import Trainer

QUIET = dict(log=lambda *_: None)

# Real training runs: 18-80 s each on a loaded 2-core machine, a third of the fast signal's time.
pytestmark = pytest.mark.slow


def _weights(path):
    return load_file(str(path / "model.safetensors"))


def test_micro_cli_run_end_to_end(tmp_path):
    out = tmp_path / "run"
    assert (
        main(["--preset", "micro", "--output", str(out), "--steps", "2", "eval_every=2", "eval_episodes=2"])
        == 0
    )
    for name in ("initial", "step-1", "final"):
        assert (out / "checkpoints" / name / "COMPLETE").exists(), name
    assert not (out / "checkpoints" / "step-2").exists()  # the last step is `final` only
    meta = json.loads((out / "checkpoints" / "final" / "mars_eval.json").read_text())
    assert meta["prompt_style"] == "compact" and meta["max_tokens"] == 16
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    for key in ("loss", "kl", "clip_frac", "entropy", "adv_std", "rollout_tokens_per_s", "step_s"):
        assert key in rows[-1]
    assert "eval/tic_tac_toe/random/p0/normalized" in rows[-1]
    # mini-batches: 2 optimizer steps per rollout batch, so the second sees a moved policy
    assert rows[-1]["optimizer_steps"] == 2
    assert rows[-1]["ratio_mean"] != 1.0 and rows[-1]["approx_kl_old"] > 0
    ws = json.loads((out / "warmstart.json").read_text())
    assert ws["warmstart_kl_last"] < ws["warmstart_kl_first"]  # the supervised warm start learned
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(out / "checkpoints" / "final")
    # RL changed the weights
    a, b = _weights(out / "checkpoints" / "initial"), _weights(out / "checkpoints" / "final")
    assert any(not torch.equal(a[k], b[k]) for k in a)
    # a second run into the same folder without --resume is refused
    assert main(["--preset", "micro", "--output", str(out)]) == 2


@pytest.mark.parametrize("credit", [{}, {"advantage": "gtpo:gamma=0.9", "loss": "st-ppo"}])
def test_resume_matches_uninterrupted(tmp_path, credit):
    over = {"steps": 3, "save_every": 1, "eval_every": 0, "keep_last": 1} | credit
    cfg = build_config("micro", overrides=over)
    assert Trainer(cfg, tmp_path / "a", **QUIET).run() == 0
    kept = sorted(p.name for p in (tmp_path / "a" / "checkpoints").iterdir())
    assert kept == ["final", "initial", "step-2"]
    assert Trainer(cfg, tmp_path / "b", stop_after=2, **QUIET).run() == 4  # "killed" after step 2
    assert not (tmp_path / "b" / "checkpoints" / "final").exists()
    assert Trainer(cfg, tmp_path / "b", resume=True, **QUIET).run() == 0
    wa, wb = (
        _weights(tmp_path / "a" / "checkpoints" / "final"),
        _weights(tmp_path / "b" / "checkpoints" / "final"),
    )
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    ra = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    rb = [json.loads(x) for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rb] == [1, 2, 3]
    assert [r["loss"] for r in ra] == [r["loss"] for r in rb]
    if credit:  # the estimator and loss reached the run (st-ppo's own statistic)
        assert all("turn_weight_mean" in r for r in ra if r["step"] > 0)


def test_nan_loss_stops_and_keeps_last_good(tmp_path, monkeypatch):
    import training.losses as losses_mod  # loss=token-ppo calls ppo_loss through it

    real = losses_mod.ppo_loss
    calls = {"n": 0}
    messages = []

    def flaky(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] > 1:  # the second step's first micro-batch
            loss = loss * float("nan")
        return loss, stats

    monkeypatch.setattr(losses_mod, "ppo_loss", flaky)
    cfg = build_config("micro", overrides={"steps": 3, "save_every": 1, "eval_every": 0, "minibatches": 1})
    status = Trainer(cfg, tmp_path / "r", log=messages.append).run()
    assert status == 3
    ck = tmp_path / "r" / "checkpoints"
    assert (ck / "step-1" / "COMPLETE").exists()
    assert not (ck / "step-2").exists() and not (ck / "final").exists()
    assert any("non-finite" in m and "step-1" in m for m in messages)
    last = json.loads((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["stopped"] == "non-finite loss" and last["last_good"] == "step-1"


@pytest.mark.parametrize("estimator, norm, opponent", [("trajectory", "global", "random")])
def test_ablation_switches_run(tmp_path, monkeypatch, estimator, norm, opponent):
    """The ablation switches reach the run: the advantages come from the chosen estimator and
    normalization (not the reference's), and the learner plays the chosen opponent."""
    import training.estimators as estimators_mod  # advantage=turn|trajectory call them through it

    seen = []
    real = estimators_mod.compute_advantages

    def spy(trajs, **kwargs):
        seen.append(kwargs)
        return real(trajs, **kwargs)

    def not_the_reference(*_a, **_k):
        raise AssertionError("reference_advantages used despite normalization=" + norm)

    monkeypatch.setattr(estimators_mod, "compute_advantages", spy)
    monkeypatch.setattr(estimators_mod, "reference_advantages", not_the_reference)
    cfg = build_config(
        "micro",
        overrides={
            "steps": 1,
            "advantage": estimator,
            "normalization": norm,
            "opponent": opponent,
            "eval_every": 0,
        },
    )
    assert Trainer(cfg, tmp_path / "r", **QUIET).run() == 0
    assert seen and all((k["estimator"], k["normalization"]) == (estimator, norm) for k in seen)
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    played = {k for row in rows for k in row if k.startswith("return_vs_")}
    assert played and all(k.startswith(f"return_vs_{opponent}/") for k in played), played


def test_resume_after_warm_start_has_no_duplicate_rows(tmp_path, monkeypatch):
    cfg = build_config("micro", overrides={"steps": 2, "save_every": 0, "eval_every": 1, "eval_episodes": 1})
    out = tmp_path / "r"
    assert Trainer(cfg, out, stop_after=1, **QUIET).run() == 4  # killed after step 1, no step checkpoint
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1]
    import training.tiny as tiny

    def no_second_warm_start(*_a, **_k):
        raise AssertionError("the warm start ran again")

    monkeypatch.setattr(tiny, "supervised_warmstart", no_second_warm_start)
    assert Trainer(cfg, out, resume=True, **QUIET).run() == 0  # from checkpoints/initial
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2]  # the redone step-0 evaluation and step 1 are not duplicated
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))  # the default tracker
    # a resume with other settings is refused before any work
    assert main(["--preset", "micro", "--output", str(out), "--resume", "lr=0.5"]) == 2


def test_loss_logprobs_use_logprob_temperature(tmp_path, monkeypatch, micro_model_dir):
    # sampling at 0.5 with recomputed log-probs: every log-prob the loss sees (behaviour,
    # reference model, policy) is taken at logprob_temperature (1, the reference's raw logits)
    import training.update as update_mod  # the update computes every log-prob the loss sees

    seen = []
    real = update_mod.token_logprobs

    def spy(model, ids, attn, temperature=1.0, with_entropy=False, **kw):
        seen.append(temperature)
        assert kw.get("mask") is not None  # response positions only
        return real(model, ids, attn, temperature, with_entropy, **kw)

    monkeypatch.setattr(update_mod, "token_logprobs", spy)
    over = {"model": str(micro_model_dir), "steps": 1, "eval_every": 0, "save_every": 0}
    over.update(temperature=0.5, recompute_logprobs=True)
    assert Trainer(build_config("micro", overrides=over), tmp_path / "t1", **QUIET).run() == 0
    assert seen and set(seen) == {1.0}
    seen.clear()
    over["logprob_temperature"] = 0.5  # this trainer's behaviour before: logits / T
    assert Trainer(build_config("micro", overrides=over), tmp_path / "t2", **QUIET).run() == 0
    assert seen and set(seen) == {0.5}
