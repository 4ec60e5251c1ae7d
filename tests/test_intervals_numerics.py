"""The t quantile of a run's summary (mpmath, run/intervals.py) against scipy's."""

from __future__ import annotations

import pytest

from mars_eval.run.intervals import t_quantile

DFS = [1, 2, 3, 4, 5, 7, 10, 19, 29, 30, 49, 99, 199, 499, 999, 4999, 99999]
QS = [0.6, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 0.025, 0.1]


def test_t_quantile_equals_scipys_stdtrit():
    from scipy.special import stdtrit

    for df in DFS:
        for q in QS:
            ours, theirs = t_quantile(q, df), float(stdtrit(df, q))
            assert ours == pytest.approx(theirs, rel=1e-13, abs=0), (q, df)


def test_t_quantile_known_values_and_symmetry():
    assert t_quantile(0.975, 1) == pytest.approx(12.706204736174707, rel=1e-14)
    assert t_quantile(0.975, 29) == pytest.approx(2.045229642132703, rel=1e-14)
    assert t_quantile(0.5, 7) == 0.0
    assert t_quantile(0.1, 12) == -t_quantile(0.9, 12)


@pytest.mark.parametrize(("q", "df"), [(0.0, 5), (1.0, 5), (0.975, 0), (-0.1, 3)])
def test_t_quantile_refuses_what_has_no_quantile(q, df):
    with pytest.raises(ValueError):
        t_quantile(q, df)
