"""`mars-eval plan`: detectable effects and K against hand-computed values, --from a run folder."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as st

from mars_eval.analysis.planning import make_plan, plan_command
from mars_eval.models.base import ConfigError
from tests.support.cli import run_cli
from tests.test_compare import write_run


def mcnemar_power_by_simulation(n: int, psi: float, delta: float, reps: int = 20000) -> float:
    """Power of McNemar's test (no continuity correction) on simulated tables."""
    rng = np.random.default_rng(5)
    counts = rng.multinomial(n, [(psi - delta) / 2, (psi + delta) / 2, 1 - psi], size=reps)
    b, c = counts[:, 0], counts[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(b + c > 0, np.abs(c - b) / np.sqrt(b + c), 0.0)
    return float(np.mean(z > 1.959963984540054))


def test_aime_k1_default_is_mcnemar_power_and_lists_paper_gains():
    plan = make_plan(task="aime", accuracy=40, delta=6.67)
    assert plan["task"] == "aime24" and plan["n_problems"] == 30 and plan["samples"] == 1
    # K = 1, uncorrelated systems: Var(d) = 2 p (1 - p) = 0.48 at delta 0; at the detectable
    # effect the discordance is psi = Var(d) + delta^2 (the variance is not scaled down past 40%).
    mde = plan["mde"]
    assert mcnemar_power_by_simulation(30, 0.48 + mde**2, mde) == pytest.approx(0.8, abs=0.01)
    assert mde > 2.9 * math.sqrt(0.48 / 30)  # more than the normal quantiles' 2.80 SE
    assert plan["samples_needed"] is None  # 6.67 points on 30 problems: no K is enough
    assert plan["correlation"] == 0.0 and not plan["correlation_measured"]
    mad = next(g for g in plan["paper_gains"] if g["system"] == "mad")
    assert (mad["base"], mad["trained"]) == (40.0, 46.67)


def test_percent_and_fraction_agree():
    a = make_plan(task="gpqa", accuracy=0.4, delta=0.1, samples=4)
    b = make_plan(task="gpqa-diamond", accuracy=40, delta=10, samples=4)
    assert a["mde"] == pytest.approx(b["mde"]) and a["n_problems"] == 198


def test_samples_needed_is_the_smallest_enough_k():
    plan = make_plan(task="gpqa", accuracy=0.4, delta=0.06, correlation=0.8)
    k = plan["samples_needed"]
    by_k = {
        kk: make_plan(task="gpqa", accuracy=0.4, delta=0.06, correlation=0.8, samples=kk) for kk in (k - 1, k)
    }
    assert by_k[k]["mde"] <= 0.06 < by_k[k - 1]["mde"] and by_k[k]["power_at_delta"] >= 0.8
    assert plan["mde_by_samples"]["1"] > plan["mde_by_samples"]["64"]


def test_from_run_uses_measured_variances(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.random(40)
    scores = rng.random((40, 4)) < x[:, None]
    run = write_run(tmp_path / "R", {str(i): [bool(v) for v in row] for i, row in enumerate(scores)})
    plan = make_plan(task=None, accuracy=None, delta=0.1, from_run=str(run))
    means = scores.mean(1)
    within = np.mean(scores.astype(float).var(axis=1, ddof=1))
    between = max(0.0, means.var(ddof=1) - within / 4)
    assert plan["measured"] and plan["samples"] == 4 and plan["n_problems"] == 40
    assert plan["accuracy"] == pytest.approx(means.mean())
    assert plan["within_variance"] == pytest.approx(within)
    assert plan["between_variance"] == pytest.approx(between)
    var_d = (2 * between + 2 * within / 4) * max(1.0, 0.5 * (1 + _r(means.mean(), plan["mde"])))
    t = st.t.ppf(0.975, 39)
    ncp = plan["mde"] * math.sqrt(40 / var_d)
    assert st.nct.sf(t, 39, ncp) + st.nct.cdf(-t, 39, ncp) == pytest.approx(0.8, abs=1e-4)
    with pytest.raises(ConfigError, match="does not match"):
        make_plan(task="gpqa", accuracy=None, delta=0.1, from_run=str(run))
    # --accuracy with --from is checked as without it: at 100% every variance would be 0.
    with pytest.raises(ConfigError, match="strictly between"):
        make_plan(task=None, accuracy=100, delta=0.1, from_run=str(run))


def test_json_last_line(capsys):
    assert plan_command(json_out=True, task="aime25", accuracy=0.5, delta=0.2, samples=8) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["samples"] == 8 and out["n_problems"] == 30 and out["paper_gains"] == []


def _r(p: float, delta: float) -> float:
    q = p + delta
    return q * (1 - q) / (p * (1 - p))


def test_generated_task_has_its_own_size():
    """arith is no hub benchmark (not in reference_figures.json) but knows its size, as `list` shows."""
    from mars_eval.tasks import make_task

    plan = make_plan(task="arith", accuracy=0.4, delta=0.1)
    assert plan["n_problems"] == make_task("arith").n == 30
    assert plan["mde"] == pytest.approx(make_plan(task="aime", accuracy=0.4, delta=0.1)["mde"])


@pytest.mark.parametrize(
    "args,message",
    [
        (["--delta", "5"], "give --task and --accuracy"),
        (["--task", "nope", "--accuracy", "40", "--delta", "5"], "unknown task 'nope'"),
        (["--task", "nope", "--accuracy", "40", "--delta", "5", "--problems", "30"], "unknown task 'nope'"),
        (["--task", "aime", "--accuracy", "100", "--delta", "5"], "strictly between"),
    ],
)
def test_bad_input_exit_2(args, message):
    res = run_cli(["plan", *args], timeout=60)
    assert res.returncode == 2, res.describe()
    assert message in res.stderr and res.stderr.strip().count("\n") == 0


def _simulated_power(n: int, k: int, p: float, delta: float, between: float, rho: float, reps: int) -> float:
    """Power of the paired t-test on per-problem means when the true effect is `delta`: problem
    accuracies are Beta draws (variance `between`) linked by a Gaussian copula (rho = 0: independent;
    a copula's rho is not the Pearson correlation of the Beta draws, so only rho = 0 is checked)."""
    rng = np.random.default_rng(11)

    def beta(mu: float, u: np.ndarray) -> np.ndarray:
        s = mu * (1 - mu) / between - 1
        return st.beta.ppf(u, mu * s, (1 - mu) * s)

    z = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=(reps, n))
    u = st.norm.cdf(z)
    ta, tb = beta(p - delta / 2, u[..., 0]), beta(p + delta / 2, u[..., 1])
    sa = rng.binomial(k, ta) / k
    sb = rng.binomial(k, tb) / k
    d = sb - sa
    sd = d.std(axis=1, ddof=1)
    ok = sd > 0
    t = d.mean(axis=1)[ok] / (sd[ok] / math.sqrt(n))
    return float(np.mean(np.abs(t) > st.t.ppf(0.975, n - 1)))


@pytest.mark.parametrize(("k", "rho"), [(4, 0.0), (16, 0.0)])  # K = 1: test_stats_coherence.py
def test_detectable_effect_has_about_80_percent_power_in_simulation(k, rho):
    """An independent check of the planning formula: simulate two systems on 30 problems whose
    true gap is plan's detectable effect; the paired test should find it about 80% of the time."""
    plan = make_plan(task="aime", accuracy=0.5, delta=0.1, samples=k, correlation=rho)
    power = _simulated_power(30, k, 0.5, plan["mde"], plan["between_variance"], rho, reps=3000)
    assert 0.72 <= power <= 0.88, power


def test_delta_is_in_points_through_the_cli(tmp_path):
    """--delta 6.67 is 6.67 points (1 is one point, not 100%); a value under 1 is refused with
    the fix; a --from run at 0% or 100% says its variance cannot be measured."""
    res = run_cli(["plan", "--task", "aime", "--accuracy", "40", "--delta", "6.67", "--json"], timeout=60)
    assert res.returncode == 0, res.describe()
    assert res.summary["delta"] == pytest.approx(0.0667)
    one = run_cli(["plan", "--task", "aime", "--accuracy", "40", "--delta", "1", "--json"], timeout=60)
    assert one.returncode == 0 and one.summary["delta"] == pytest.approx(0.01), one.describe()
    small = run_cli(["plan", "--task", "aime", "--accuracy", "40", "--delta", "0.05"], timeout=60)
    assert small.returncode == 2 and small.stderr.count("\n") == 1, small.describe()
    assert "percentage points" in small.stderr and "--delta 5" in small.stderr
    # not a number: one line in points, not the fraction-or-percent wording of --accuracy
    nan = run_cli(["plan", "--task", "aime", "--accuracy", "40", "--delta", "nan"], timeout=60)
    assert nan.returncode == 2 and nan.stderr.count("\n") == 1, nan.describe()
    assert "percentage points" in nan.stderr and "fraction" not in nan.stderr
    for value, word in ((True, "100%"), (False, "0%")):
        run = write_run(tmp_path / word.strip("%"), {str(i): [value, value] for i in range(5)})
        flat = run_cli(["plan", "--from", str(run), "--delta", "5"], timeout=60)
        assert flat.returncode == 2 and flat.stderr.count("\n") == 1, flat.describe()
        assert f"accuracy {word}" in flat.stderr and "variance cannot be measured" in flat.stderr
