"""The new systems' flags from the command line: bad values are one line on stderr, exit 2,
before any call (the endpoint below does not exist)."""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli

NOWHERE = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("system", "extra", "message"),
    [
        ("macnet", ["--topology", "ring"], "unknown --topology 'ring'"),
        ("macnet", ["--macnet-handoff", "all"], "unknown --macnet-handoff 'all'"),
        ("macnet", ["--agents", "3", "--topology", "mlp"], "gives no edges"),
        ("dylan", ["--agents", "2"], "--agents must be at least 3"),
        ("agentverse", ["--agents", "1"], "--agents must be at least 2"),
        ("agentverse", ["--turns", "0"], "--turns must be at least 1"),
        ("self-consistency", ["--samples-per-answer", "0"], "--samples-per-answer must be at least 1"),
    ],
)
def test_bad_system_flags_exit_2_before_any_call(system, extra, message, tmp_path):
    args = ["mas", "--system", system, "--task", "arith", "--base-url", NOWHERE, "--output", str(tmp_path)]
    res = run_cli([*args, *extra])
    assert res.returncode == 2, res.describe()
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.describe()
    assert not any(tmp_path.iterdir())  # no run folder was made
