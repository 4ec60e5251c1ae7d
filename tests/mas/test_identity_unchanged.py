"""Run folders made before the system registry keep their names: every system's identity (and
the identity-1 "legacy" one an old folder is found by) hashes as it did. The expected hashes were
written by the code before the registry (tests/mas/data/identity_before_registry.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mars_eval.run.config import EvalConfig
from mars_eval.run.identity import model_identity
from mars_eval.run.store import config_hash

CASES = json.loads((Path(__file__).parent / "data" / "identity_before_registry.json").read_text())
# Systems whose conversation changed since, on purpose (a protocol bump): what their identity
# gained. Their folders are new ones, and the old ones are not resumed (legacy hash differs).
# dylan 2 (issue 27): the main variant by default for every task but math500. agentverse 3 and
# macnet 2 (issue 42): expert roles as MASLab's regex finds them; temperatures not rounded.
CHANGED = {
    "dylan": {"dylan_variant": "auto", "dylan_shuffle": "sample", "protocol": 2},
    "agentverse": {"protocol": 3},
    "macnet": {"protocol": 2},
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['system']}-{c['engine']}-{sorted(c['options'])}")
def test_identity_hash_is_the_one_before_the_registry(case) -> None:
    cfg = EvalConfig(task="arith", system=case["system"], system_options=dict(case["options"]))
    if "matched" in case:
        cfg.matched = case["matched"]
    engine = case["engine"]
    model = model_identity("m", engine) if engine == "http" else {"model": "m", "engine": engine}
    identity = cfg.identity(model, "d" * 16)
    if case["system"] in CHANGED:
        assert identity == {**case["identity"], **CHANGED[case["system"]]}
        assert config_hash(identity) != case["hash"]
        assert config_hash(cfg.legacy_identity("m")) != case["legacy_hash"]
        return
    assert identity == case["identity"]
    assert config_hash(identity) == case["hash"]
    assert config_hash(cfg.legacy_identity("m")) == case["legacy_hash"]
