"""Issue 18: the statistics agree with themselves. Every pairing size runs, the interval shown
inverts the test shown, plan's power is the test's, degenerate data give no zero-width interval,
and the reference figures name their source. Checks are against independent computations
(numerical likelihood maxima, brute-force enumeration, simulation)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as st

from mars_eval.analysis import mcnemar, power, stats
from mars_eval.analysis.compare import compare_games, load_run
from mars_eval.run.intervals import cluster_ci, mean_ci
from mars_eval.run.metrics import accuracy_metrics
from tests.support.cli import run_cli
from tests.test_compare import write_games_run, write_run

Z975 = st.norm.ppf(0.975)


# --- 1. no crash on any pairing size -------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 4])
def test_one_paired_problem_gives_p_1_and_a_note(k):
    res = stats.paired_compare({"7": [(0.0, 1.0)] * k})
    assert res.n_paired == 1 and res.p_value == 1.0 and res.test == "none"
    assert res.note == stats.FEW_PAIRED and res.ci_low is None and res.se is None


def test_compare_cli_on_runs_sharing_one_problem_at_k4_exits_0(tmp_path):
    a = write_run(tmp_path / "A", {"1": [True, False, True, True], "2": [True] * 4})
    b = write_run(tmp_path / "B", {"1": [True, True, True, True], "3": [False] * 4})
    res = run_cli(["compare", str(a), str(b), "--json"], timeout=120)
    assert res.returncode == 0, res.describe()
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["n_paired"] == 1 and out["p_value"] == 1.0 and out["note"] == stats.FEW_PAIRED
    assert "fewer than 2 paired problems" in res.stdout


def test_games_row_with_one_episode_compares(tmp_path):
    ra = {("tic_tac_toe", "random", "first", 0): 1.0, ("tic_tac_toe", "random", "second", 0): -1.0}
    ra[("tic_tac_toe", "random", "second", 1)] = 0.0
    rb = {key: -v for key, v in ra.items()}
    out = compare_games(
        load_run(write_games_run(tmp_path / "A", ra)), load_run(write_games_run(tmp_path / "B", rb))
    )
    first = next(r for r in out["rows"] if r["seat"] == "first")
    assert first["n_paired"] == 1 and first["p_value"] == 1.0
    assert first["note"] == "fewer than 2 paired episodes: no test (p = 1) and no interval"
    assert first["win_p_value"] == 1.0


# --- 2. the interval inverts the test --------------------------------------------------------------
def _tango_by_likelihood(b: int, c: int, n: int, delta0: float) -> float:
    """Tango's score statistic with the restricted maximum likelihood found numerically (not the
    closed form): maximise the multinomial likelihood of (b, c, rest) under p01 - p10 = delta0."""
    rest = n - b - c

    def nll(q: float) -> float:  # q = P(right only in A), P(right only in B) = q + delta0
        probs = np.array([q, q + delta0, 1 - 2 * q - delta0])
        if np.any(probs <= 0):
            return 1e18
        return -float(b * np.log(probs[0]) + c * np.log(probs[1]) + rest * np.log(probs[2]))

    lo, hi = max(0.0, -delta0) + 1e-12, (1 - delta0) / 2 - 1e-12
    q = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
    return (c - b - n * delta0) / math.sqrt(n * (2 * q + delta0 * (1 - delta0)))


@pytest.mark.parametrize("b,c,n", [(2, 8, 30), (5, 5, 30), (1, 0, 30), (20, 50, 198), (0, 7, 30)])
def test_tango_statistic_matches_numerical_likelihood(b, c, n):
    for delta0 in (-0.2, -0.05, 0.03, 0.1, 0.25):
        if b == 0 and delta0 < 0 or c == 0 and delta0 > 0:
            continue  # the likelihood maximum sits on the boundary there
        assert mcnemar.tango_z(b, c, n, delta0) == pytest.approx(
            _tango_by_likelihood(b, c, n, delta0), abs=1e-4
        )
    # at 0 it is McNemar's statistic
    assert mcnemar.tango_z(b, c, n, 0.0) == pytest.approx((c - b) / math.sqrt(b + c))


def test_k1_interval_and_verdict_always_agree():
    """Every table of 30 problems: 0 lies outside the interval exactly when p < 0.05 (the
    displayed t interval of the old code disagreed in 2.4% of null runs)."""
    n = 30
    for b in range(n + 1):
        for c in range(n + 1 - b):
            pairs = {str(i): [(1.0, 0.0)] for i in range(b)}
            pairs |= {str(b + i): [(0.0, 1.0)] for i in range(c)}
            pairs |= {str(b + c + i): [(1.0, 1.0)] for i in range(n - b - c)}
            res = stats.paired_compare(pairs, bootstrap_resamples=0, detectable=False)
            assert res.test == "mcnemar-score"
            excluded = res.ci_low > 0 or res.ci_high < 0
            assert excluded == (res.p_value < 0.05), (b, c, res.p_value, res.ci_low, res.ci_high)
            assert (
                res.ci_low < res.delta < res.ci_high
                or res.ci_low == res.delta == -1
                or res.ci_high == res.delta == 1
            )


def test_sign_flip_is_exact_mid_p_enumeration():
    d = np.array([0.5, 0.25, -0.25, 0.75, 0.5, 0.0, 1.0, -0.5])
    obs = abs(d.sum())
    sums = [abs(float(np.dot(s, d))) for s in itertools.product((1, -1), repeat=d.size)]
    gt = sum(x > obs + 1e-12 for x in sums)
    eq = sum(abs(x - obs) <= 1e-12 for x in sums)
    assert stats.sign_flip_test(d) == pytest.approx((gt + eq / 2) / len(sums), abs=1e-12)


def test_k4_interval_inverts_the_sign_flip_test():
    rng = np.random.default_rng(5)
    disagree = 0
    for _ in range(60):
        d = (rng.binomial(4, 0.55, 30) - rng.binomial(4, 0.45, 30)) / 4
        sf = stats.SignFlip(d, resamples=4000)
        lo, hi = sf.interval()
        assert sf.pvalue(lo - 1e-6) <= 0.05 < sf.pvalue(lo + 1e-6)
        assert sf.pvalue(hi + 1e-6) <= 0.05 < sf.pvalue(hi - 1e-6)
        disagree += (sf.pvalue() < 0.05) != (lo > 0 or hi < 0)
    assert disagree == 0


def test_verdict_names_its_test(tmp_path, capsys):
    from mars_eval.analysis.compare import compare_command

    a = write_run(tmp_path / "A", {str(i): [i < 10] for i in range(30)})
    b = write_run(tmp_path / "B", {str(i): [i < 16] for i in range(30)})
    assert compare_command(str(a), str(b)) == 0
    out = capsys.readouterr().out
    assert "McNemar (score, no continuity correction) test, p =" in out and "CI (t)" not in out


# --- 3. plan's power is the test's ----------------------------------------------------------------
def test_mcnemar_power_matches_enumeration_of_all_tables():
    """Exact power by brute force over every (b, c, rest) table of 12 problems."""
    n, p10, p01 = 12, 0.1, 0.35
    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            prob = st.multinomial.pmf([b, c, n - b - c], n, [p10, p01, 1 - p10 - p01])
            total += prob * (mcnemar.mcnemar_test(b, c) < 0.05)
    assert mcnemar.mcnemar_power(p01 - p10, p10 + p01, n) == pytest.approx(total, abs=1e-12)


def test_t_based_detectable_effect():
    # noncentral t: 2.90 SE at 30 problems (the normal 2.80 SE promised too much)
    assert power.t_multiplier(30) == pytest.approx(2.899, abs=2e-3)
    assert power.t_multiplier(100_000) == pytest.approx(st.norm.ppf(0.975) + st.norm.ppf(0.8), abs=2e-3)


@pytest.mark.parametrize("k", [1, 4])
def test_plan_promise_matches_compare_test_in_simulation(k):
    """Two systems around 50% on 30 problems (difficulty Beta, independent systems), true gap =
    plan's detectable effect: compare's own test finds it about 80% of the time."""
    from mars_eval.analysis.planning import make_plan

    plan = make_plan(task="aime", accuracy=0.5, delta=0.1, samples=k)
    mde, between = plan["mde"], plan["between_variance"]
    rng = np.random.default_rng(11)

    def beta(mu: float, size: tuple[int, int]) -> np.ndarray:
        s = mu * (1 - mu) / between - 1
        return rng.beta(mu * s, (1 - mu) * s, size=size)

    reps, n = 600, 30
    ta, tb = beta(0.5 - mde / 2, (reps, n)), beta(0.5 + mde / 2, (reps, n))
    sa, sb = rng.random((reps, n, k)) < ta[..., None], rng.random((reps, n, k)) < tb[..., None]
    hits = 0
    for r in range(reps):
        pairs = {
            str(i): list(zip(sa[r, i].astype(float), sb[r, i].astype(float), strict=True)) for i in range(n)
        }
        res = stats.paired_compare(pairs, permutation_resamples=1000, bootstrap_resamples=0, detectable=False)
        hits += res.p_value < 0.05
    assert 0.74 <= hits / reps <= 0.88, hits / reps


def test_plan_from_two_runs_measures_the_variance_of_differences(tmp_path):
    from mars_eval.analysis.planning import make_plan

    rng = np.random.default_rng(3)
    x = rng.random(40)
    y = np.clip(x + rng.normal(0, 0.1, 40), 0, 1)  # B's difficulty follows A's: strongly correlated
    sa, sb = rng.random((40, 4)) < x[:, None], rng.random((40, 4)) < y[:, None]
    ra = write_run(tmp_path / "A", {str(i): [bool(v) for v in row] for i, row in enumerate(sa)})
    rb = write_run(tmp_path / "B", {str(i): [bool(v) for v in row] for i, row in enumerate(sb)})
    plan = make_plan(task=None, accuracy=None, delta=0.1, from_run=[str(ra), str(rb)])
    d = sb.mean(1) - sa.mean(1)
    within = np.mean(sa.astype(float).var(axis=1, ddof=1)) + np.mean(sb.astype(float).var(axis=1, ddof=1))
    assert plan["variance_source"] == "two runs" and plan["correlation_measured"]
    between = d.var(ddof=1) - within / 4
    if between >= 0:
        assert plan["paired_within"] == pytest.approx(within)
        assert plan["paired_between"] == pytest.approx(between)
    else:  # Var(d) below the within part the samples imply (noise): Var(d) is kept whole
        assert plan["paired_between"] == 0 and plan["paired_within"] == pytest.approx(4 * d.var(ddof=1))
    # at the runs' K the plan's Var(d) is the measured one (issue 28)
    assert plan["paired_between"] + plan["paired_within"] / 4 == pytest.approx(d.var(ddof=1))
    assert plan["correlation"] > 0.5  # measured, not the assumed 0
    one = make_plan(task=None, accuracy=None, delta=0.1, from_run=str(ra))
    assert one["correlation"] == 0.0 and not one["correlation_measured"]
    assert plan["mde"] < one["mde"]  # the measured correlation makes the pair more sensitive


def test_plan_cli_from_two_runs_and_assumed_rho_is_said(tmp_path):
    a = write_run(tmp_path / "A", {str(i): [i % 3 == 0, i % 2 == 0] for i in range(20)})
    b = write_run(tmp_path / "B", {str(i): [i % 3 == 0, i % 5 == 0] for i in range(20)})
    res = run_cli(["plan", "--from", str(a), str(b), "--delta", "10"], timeout=120)
    assert res.returncode == 0, res.describe()
    assert "measured from the two runs" in res.stdout
    one = run_cli(["plan", "--from", str(a), "--delta", "10"], timeout=120)
    assert one.returncode == 0 and "(assumed)" in one.stdout, one.describe()


# --- 4. no zero-width intervals the data cannot justify -------------------------------------------
def test_identical_runs_do_not_give_a_point():
    same = stats.paired_compare({str(i): [(float(i % 2), float(i % 2))] for i in range(30)})
    w = Z975**2 / (30 + Z975**2)
    assert same.p_value == 1.0 and same.ci_low == pytest.approx(-w) and same.ci_high == pytest.approx(w)
    k4 = stats.paired_compare({str(i): [(1.0, 1.0), (0.0, 0.0)] for i in range(30)})
    assert k4.ci_low < 0 < k4.ci_high and k4.p_value == 1.0


def test_equal_problem_means_do_not_give_a_point():
    ci = cluster_ci([[1.0, 0.0]] * 30)  # every problem 1 of 2: 60 samples, no spread
    assert ci.estimate == 0.5 and ci.low < 0.4 and ci.high > 0.6


def test_games_all_losses_do_not_give_a_point():
    m = mean_ci([-1.0] * 100, bounds=(-1.0, 1.0))
    assert m.low == -1.0 and m.high > -0.95


def test_low_accuracy_coverage_with_k4():
    """Beta(0.1, 0.9) difficulty, 30 problems, K = 4: the clustered t interval covered about
    90%; the Wilson interval at the clustered effective sample size at least 92% (bench_stats.py
    has the full table)."""
    rng = np.random.default_rng(21)
    reps, hits = 2000, 0
    for _ in range(reps):
        scores = rng.random((30, 4)) < rng.beta(0.1, 0.9, 30)[:, None]
        ci = cluster_ci(scores.astype(float))
        hits += ci.low <= 0.1 <= ci.high
    assert hits / reps >= 0.92, hits / reps


# --- 5. stderr, clipping, multiplicity --------------------------------------------------------------
def test_stderr_is_null_with_one_problem():
    out = accuracy_metrics([{"problem_id": "1", "sample": k, "correct": k == 0} for k in range(4)], samples=4)
    assert out["stderr"] is None and out["accuracy"] == 0.25


def test_paired_interval_is_clipped():
    res = stats.paired_compare({"1": [(0.0, 1.0), (0.0, 1.0)], "2": [(0.0, 1.0), (1.0, 1.0)]})
    assert -1.0 <= res.ci_low <= res.ci_high <= 1.0


def test_holm_by_hand():
    assert stats.holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06])


# --- 6. reference figures name their source ------------------------------------------------------
def test_reference_figures_are_labelled_and_shares_of_the_problems():
    from mars_eval.analysis import reference_figures as ref

    data = ref.reference_data()
    for section in ("mas", "games", "claims"):
        assert data[section]["source"] in data["sources"] and ref.source_label(section)
    assert "project page" in ref.source_label("mas") and "v1" in ref.source_label("claims")
    for row in data["mas"]["rows"]:
        for task, size in (("aime24", 30), ("gpqa-diamond", 198)):
            assert abs(row[task] / 100 * size - round(row[task] / 100 * size)) < 0.01, (row, task)
    gains = {c["task"]: c["gain"] for c in ref.claims()}
    assert gains == {"aime24": 10.0, "gpqa-diamond": 12.5, "games": 28.7}
