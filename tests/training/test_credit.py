"""The estimator and loss registries: built-ins on hand-computed batches (2 games x 3 turns),
today's outputs kept exactly, the spec syntax, errors, one's own from a file, old configs."""

import json
import math
import random
import textwrap
from dataclasses import replace

import pytest
import torch

from mars_eval.models.base import ConfigError
from training.advantages import TrajectoryRewards, compute_advantages, reference_advantages
from training.cli import main
from training.config import TrainConfig, build_config, check_resume_config, validate
from training.estimators import ESTIMATORS, resolve_estimator
from training.loss import ppo_loss
from training.losses import LOSSES, resolve_loss, turn_ppo_loss

CFG = TrainConfig()
# two games (episodes) of one seat, three turns each
GAMES = [
    TrajectoryRewards("g", 0, (0.0, 0.0, 1.0), (2, 1, 3)),
    TrajectoryRewards("g", 0, (1.0, 0.0, -1.0), (1, 2, 2)),
]


def _estimate(spec, trajs, **settings):
    return resolve_estimator(replace(CFG, advantage=spec, **settings)).instance.compute(trajs)


# --- advantage estimators ------------------------------------------------------------------
def _today(cfg, trajs):
    """The trainer's dispatch before the registry (training/trainer.py `_advantages`)."""
    if cfg.normalization == "reference":
        return reference_advantages(
            trajs,
            estimator=cfg.advantage,
            gamma=cfg.gamma,
            reward_clip=cfg.reward_clip,
            advantage_clip=cfg.advantage_clip,
        )
    return compute_advantages(
        trajs, estimator=cfg.advantage, normalization=cfg.normalization, gamma=cfg.gamma
    )


def _random_batch(seed):
    rng = random.Random(seed)
    out = []
    for game in ("a", "b", "c"):
        for seat in (0, 1):
            for _ in range(rng.randint(1, 4)):
                n = rng.randint(1, 4)
                rewards = tuple(round(rng.uniform(-2, 2), 2) for _ in range(n))
                out.append(TrajectoryRewards(game, seat, rewards, tuple(rng.randint(1, 9) for _ in range(n))))
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert len(x) == len(y)
        for u, v in zip(x, y, strict=True):
            assert type(u) is type(v)
            assert (u == v) if isinstance(u, float) else bool((u == v).all())


@pytest.mark.parametrize("estimator", ["turn", "trajectory"])
@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"normalization": "return_mean"},
        {"normalization": "global", "gamma": 0.9},
        {"gamma": 0.8, "reward_clip": 0.5, "advantage_clip": 1.0},
    ],
)
def test_turn_and_trajectory_equal_todays_output_exactly(estimator, settings):
    cfg = replace(CFG, advantage=estimator, **settings)
    for seed in range(4):
        batch = _random_batch(seed) + GAMES
        got_adv, got_stats = resolve_estimator(cfg).instance.compute(batch)
        want_adv, want_stats = _today(cfg, batch)
        _same(got_adv, want_adv)
        assert got_stats == want_stats


def test_spec_options_equal_the_top_level_settings():
    a, _ = _estimate("turn:normalization=return_mean,gamma=0.5", GAMES)
    b, _ = _estimate("turn", GAMES, normalization="return_mean", gamma=0.5)
    assert a == b
    # the spec's option wins over the top-level setting
    c, _ = _estimate("turn:normalization=global", GAMES, normalization="return_mean")
    d, _ = compute_advantages(GAMES, normalization="global")
    assert c == d


def test_gtpo_by_hand_group_seat():
    # gamma 0.5: G1 = [0.25, 0.5, 1], G2 = [1 - 0.25, -0.5, -1] = [0.75, -0.5, -1]
    # the six values: mean 1/6, population variance 71/144, std sqrt(71)/12
    adv, stats = _estimate("gtpo:gamma=0.5", GAMES)
    std = math.sqrt(71) / 12
    want = [[(g - 1 / 6) / (std + 1e-6) for g in row] for row in ([0.25, 0.5, 1.0], [0.75, -0.5, -1.0])]
    for got, w in zip(adv, want, strict=True):
        assert got == pytest.approx(w, abs=1e-12)
    assert stats["return_mean"] == pytest.approx(1 / 6)


def test_gtpo_by_hand_group_turn_and_singletons():
    # per turn index: {0.25, 0.75} -> -1, +1; {0.5, -0.5} -> +1, -1; {1, -1} -> +1, -1
    adv, _ = _estimate("gtpo:gamma=0.5,group=turn,eps=0", GAMES)
    assert adv == [pytest.approx([-1.0, 1.0, 1.0]), pytest.approx([1.0, -1.0, -1.0])]
    # another (game, seat) with one turn: its own group of one, advantage 0
    lone = GAMES + [TrajectoryRewards("h", 1, (3.0,), (4,))]
    adv, _ = _estimate("gtpo:gamma=0.5", lone)
    assert adv[2] == [0.0]


def test_gtpo_gamma_defaults_to_the_top_level_gamma():
    assert resolve_estimator(replace(CFG, advantage="gtpo", gamma=0.7)).options["gamma"] == 0.7
    assert resolve_estimator(replace(CFG, advantage="gtpo:gamma=0.3", gamma=0.7)).options["gamma"] == 0.3


def test_trajectory_by_hand_global():
    # R = [1, 0] on every turn; global whitening over the six turns: mean 0.5, std 0.5
    adv, _ = _estimate("trajectory:normalization=global", GAMES)
    assert adv == [pytest.approx([1.0] * 3, abs=1e-5), pytest.approx([-1.0] * 3, abs=1e-5)]


# --- policy losses ------------------------------------------------------------------------
# six rows (turns): game 1 = rows 0-2 (5 tokens), game 2 = rows 3-5 (6 tokens); per-token
# log-ratios, advantages +1 (game 1) and -1 (game 2); eps 0.2, dual clip 1.4, no KL
LOG_RATIOS = [[0.1, 0.1], [0.5, 0.1], [-0.4], [0.0, 0.0], [1.0, 1.0], [-0.5, 0.1]]
ADV = [1.0, 1.0, 1.0, -1.0, -1.0, -1.0]
GAME_TOKENS = [5, 5, 5, 6, 6, 6]
# J_b by hand (geometric mean: s_b = mean log-ratio, rho_b = e^s_b)
J = [
    math.exp(0.1),  # 1.105, inside the clip range
    1.2,  # e^0.3 = 1.350 clipped at 1 + eps
    math.exp(-0.4),  # 0.670: low ratio with A > 0 is not clipped (min picks it)
    -1.0,  # rho = 1
    -1.4,  # e^1 = 2.718 with A < 0: min gives -2.718, the dual clip floors it at -1.4
    -math.exp(-0.2),  # 0.819: inside
]


def _batch(requires_grad=False):
    n = max(len(r) for r in LOG_RATIOS)
    logp = torch.zeros(len(LOG_RATIOS), n, dtype=torch.float64)
    mask = torch.zeros_like(logp)
    for b, r in enumerate(LOG_RATIOS):
        logp[b, : len(r)] = torch.tensor(r, dtype=torch.float64)
        mask[b, : len(r)] = 1.0
    old = torch.zeros_like(logp)
    adv = torch.tensor(ADV, dtype=torch.float64)[:, None].expand_as(logp).clone()
    logp.requires_grad_(requires_grad)
    return logp, old, adv, mask


def _shared():
    return dict(
        clip_eps=0.2,
        dual_clip=1.4,
        num_sequences=2,
        row_tokens=torch.tensor(GAME_TOKENS, dtype=torch.float64),
    )


def _by_hand(js):
    """L = (1/2) * sum_games sum_{b in game} n_b * (-J_b) / game tokens."""
    n = [len(r) for r in LOG_RATIOS]
    g1 = sum(-js[b] * n[b] for b in range(3)) / 5
    g2 = sum(-js[b] * n[b] for b in range(3, 6)) / 6
    return (g1 + g2) / 2


def _loss(spec):
    return resolve_loss(replace(CFG, loss=spec)).instance


def test_turn_ppo_by_hand():
    loss, stats = _loss("turn-ppo")(*_batch(), **_shared())
    assert float(loss) == pytest.approx(_by_hand(J), abs=1e-12)
    # clipped: row 1 (2 tokens) of 11; dual clip: row 4 (2 tokens)
    assert stats["clip_frac"] == pytest.approx(2 / 11)
    assert stats["dual_clip_frac"] == pytest.approx(2 / 11)


def test_turn_ppo_gradient_is_shared_by_the_turns_tokens():
    logp, old, adv, mask = _batch(requires_grad=True)
    loss, _ = turn_ppo_loss(logp, old, adv, mask, **_shared())
    loss.backward()
    # row 0 is unclipped: dL/dlogp_t = -(1/2) * (n_b / 5) * rho_b * A_b / n_b, the same for both tokens
    want = -0.5 * math.exp(0.1) / 5
    assert logp.grad[0].tolist() == pytest.approx([want, want])
    assert logp.grad[1].abs().sum() == 0  # clipped
    assert logp.grad[4].abs().sum() == 0  # dual clip active


def test_turn_ppo_sum_ratio_by_hand():
    # ratio=sum: row 0's s_b = 0.2, rho = e^0.2 = 1.221 is now clipped at 1.2; row 2 unchanged
    j = list(J)
    j[0] = 1.2
    j[1] = 1.2  # e^0.6
    j[4] = -1.4  # e^2 with the dual clip
    j[5] = -0.8  # s = -0.4: rho 0.670, with A < 0 min(-0.670, -0.8) = -0.8
    loss, _ = _loss("turn-ppo:ratio=sum")(*_batch(), **_shared())
    assert float(loss) == pytest.approx(_by_hand(j), abs=1e-12)


def test_st_ppo_by_hand_down_weights_off_policy_turns():
    # w_b = min(1, 0.2 / |rho_b - 1|): rows 0, 3, 5 inside (|rho - 1| <= 0.2): 1
    rho = [math.exp(0.1), math.exp(0.3), math.exp(-0.4), 1.0, math.exp(1.0), math.exp(-0.2)]
    w = [min(1.0, 0.2 / abs(r - 1)) if abs(r - 1) > 0.2 else 1.0 for r in rho]
    assert w[0] == w[3] == w[5] == 1.0 and w[4] == pytest.approx(0.2 / (math.e - 1))
    loss, stats = _loss("st-ppo")(*_batch(), **_shared())
    assert float(loss) == pytest.approx(_by_hand([wb * jb for wb, jb in zip(w, J, strict=True)]), abs=1e-12)
    assert stats["turn_weight_mean"] < 1.0
    # the weight is a stop-gradient factor: row 2's gradient is w_2 times turn-ppo's
    grads = []
    for spec in ("st-ppo", "turn-ppo"):
        logp, old, adv, mask = _batch(requires_grad=True)
        _loss(spec)(logp, old, adv, mask, **_shared())[0].backward()
        grads.append(logp.grad[2, 0].item())
    assert grads[0] == pytest.approx(w[2] * grads[1])
    # power 0: no correction, turn-ppo exactly
    a = _loss("st-ppo:power=0")(*_batch(), **_shared())[0]
    b = _loss("turn-ppo")(*_batch(), **_shared())[0]
    assert float(a) == float(b)


def test_token_ppo_is_todays_loss_exactly():
    logp, old, adv, mask = _batch()
    ref = torch.full_like(logp, -0.3)
    shared = _shared() | dict(ref_logp=ref, kl_coef=0.2, kl_clamp=10.0)
    got = _loss("token-ppo")(logp, old, adv, mask, **shared)
    want = ppo_loss(logp, old, adv, mask, **shared)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]


def test_turn_losses_on_policy_equal_token_ppo_value():
    # rho = 1 everywhere: every loss is -sum A n_b / tokens / N, the same number
    logp, _, adv, mask = _batch()
    vals = [
        float(_loss(s)(logp, logp.detach(), adv, mask, **_shared())[0])
        for s in ("token-ppo", "turn-ppo", "st-ppo")
    ]
    assert vals[0] == pytest.approx(vals[1]) == pytest.approx(vals[2])


# --- specs, errors, listing, one's own, old configs --------------------------------------------
@pytest.mark.parametrize(
    "override, words",
    [
        ({"advantage": "gtpoo"}, "did you mean 'gtpo'"),
        ({"advantage": "gtpo:gama=0.9"}, "did you mean 'gamma'"),
        ({"advantage": "gtpo:gamma=abc"}, "gamma must be float"),
        ({"advantage": "turn:normalization=whiten"}, "choose one of"),
        ({"loss": "st-ppp"}, "did you mean 'st-ppo'"),
        ({"loss": "turn-ppo:ratio=max"}, "choose one of: mean, sum"),
        ({"loss": "st-ppo:power=-1"}, "at least 0"),
        ({"loss": "nowhere.py:Mine"}, "file not found"),
    ],
)
def test_bad_specs_are_one_line_config_errors(override, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")) as err:
        validate(replace(build_config("micro"), **override))
    assert "\n" not in str(err.value)


def test_cli_bad_loss_exits_2(capsys, tmp_path):
    assert main(["--preset", "micro", "--output", str(tmp_path / "r"), "loss=st-ppp"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "did you mean 'st-ppo'" in err


def test_cli_list(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in (*ESTIMATORS.entries, *LOSSES.entries):
        assert f"  {name}" in out
    assert "gamma=1.0" in out and "ratio=mean (mean|sum)" in out


def test_identity_names_only_changed_options():
    assert resolve_estimator(CFG).identity == "turn"
    assert resolve_estimator(replace(CFG, advantage="gtpo:group=turn")).identity == "gtpo:group=turn"
    assert resolve_loss(replace(CFG, loss="st-ppo:power=2,ratio=mean")).identity == "st-ppo:power=2"


OWN = '''
from dataclasses import dataclass

from mars_eval.mas.system import option
from training.estimators import AdvantageEstimator


class Outcome(AdvantageEstimator):
    """The raw outcome, scaled: A_{i,t} = scale * sum_t r_{i,t}."""

    name = "outcome"

    @dataclass(frozen=True)
    class Options:
        scale: float = option(1.0, "multiplies the outcome")

    def compute(self, trajectories):
        adv = [[self.options.scale * sum(tr.rewards)] * len(tr.rewards) for tr in trajectories]
        return adv, {"turns": float(sum(len(a) for a in adv))}
'''


def test_own_estimator_from_a_file(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(OWN))
    r = resolve_estimator(replace(CFG, advantage=f"{path}:Outcome:scale=2"))
    assert r.options == {"scale": 2.0}
    adv, _ = r.instance.compute(GAMES)
    assert adv == [[2.0] * 3, [0.0] * 3]
    with pytest.raises(ConfigError, match="no AdvantageEstimator subclass 'Nope'"):
        resolve_estimator(replace(CFG, advantage=f"{path}:Nope"))


def test_old_run_config_without_loss_still_resumes(tmp_path):
    cfg = build_config("micro")
    old = json.loads(json.dumps(cfg.to_dict()))
    del old["loss"]  # a run_config.json written before the setting existed
    path = tmp_path / "run_config.json"
    path.write_text(json.dumps(old))
    check_resume_config(path, cfg)  # no error: a missing setting is its default
    with pytest.raises(ConfigError, match="loss"):
        check_resume_config(path, replace(cfg, loss="st-ppo"))


def test_ablation_script_plans_every_cell_and_seed(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "credit_ablation.py"
    spec = importlib.util.spec_from_file_location("credit_ablation", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    argv = ["--out", "/nowhere", "--seeds", "2", "--advantage", "turn,gtpo:gamma=0.9", "--dry-run", "steps=1"]
    assert mod.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    # one warm start per seed, then cells x seeds x (train, training games, held-out games)
    assert len(lines) == 2 + 2 * 3 * 2 * 3
    assert lines[0].endswith("--output /nowhere/initial/s0 seed=0 live=false steps=1")
    held_out = "--held-out --episodes 20 --output /nowhere/eval-held-out/turn__turn-ppo-s0"
    assert any(held_out in x for x in lines)
    assert any(
        "advantage=gtpo:gamma=0.9 loss=st-ppo" in x and "seed=1" in x and "steps=1" in x for x in lines
    )
    assert any("/eval/gtpo_gamma=0.9__st-ppo-s1 --json" in x for x in lines)
    row = dict(advantage="turn", loss="token-ppo", game="tic_tac_toe", opponent="random", seat="first")
    row |= dict(n_paired=4, normalized=50.0, delta_normalized=0.0, ci_low=-1.0, ci_high=1.0, p_value=1.0)
    row |= dict(delta_per_seed={0: 0.0})
    table = mod.markdown([row], ("turn", "token-ppo"))
    assert (
        "| turn | token-ppo | tic_tac_toe | random | first | 4 | 50.0 | +0.0 | [-1.0, +1.0] | 1 | +0.0 |"
        in table
    )


def test_ablation_cells_start_from_their_seeds_one_warm_start(tmp_path, monkeypatch):
    """Every cell of a seed gets a copy of that seed's checkpoints/initial before it trains
    (and trains with --resume, which starts at step 0 from it); the warm start runs once a seed;
    a finished cell is not trained again."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "credit_ablation.py"
    spec = importlib.util.spec_from_file_location("credit_ablation", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = []

    def fake_run(cmd, log, env):
        out = Path(cmd[cmd.index("--output") + 1])
        calls.append((cmd, out))
        if "training.cli" in cmd:
            initial = out / "checkpoints" / "initial"
            if "--resume" in cmd and "initial" not in out.parts:  # a cell: its copy is in place
                assert (initial / "weights.bin").read_text() == f"seed {cmd[cmd.index('--output') + 2]}"
            else:
                initial.mkdir(parents=True)
                (initial / "weights.bin").write_text(f"seed seed={out.name[1:]}")
                (initial / "COMPLETE").write_text("")
            (out / "checkpoints" / "final").mkdir(parents=True, exist_ok=True)
            (out / "checkpoints" / "final" / "COMPLETE").write_text("")
            return ""
        return json.dumps({"run_dir": str(out / "run")})

    monkeypatch.setattr(mod, "_run", fake_run)
    argv = ["--out", str(tmp_path), "--seeds", "2", "--advantage", "turn,gtpo", "--loss", "token-ppo"]
    args = mod.parse_args(argv + ["--jobs", "2"])
    runs = mod.plan(args)
    mod.run_all(runs, args)
    trains = [c for c, _ in calls if "training.cli" in c]
    assert len(trains) == 2 + 4  # two warm starts, four cells
    assert all("--resume" in c for c in trains[2:]) and not any("--resume" in c for c in trains[:2])
    assert all(len(r["run_dirs"]) == 2 for r in runs)  # training games and held-out games
    calls.clear()
    mod.run_all(mod.plan(args), args)  # all finished: only the evaluations run again
    assert not any("training.cli" in c for c, _ in calls) and len(calls) == 4 * 2


def test_the_docs_example_estimator_runs(tmp_path):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "my_estimators.py").write_text(code)
    r = resolve_estimator(replace(CFG, advantage=f"{tmp_path}/my_estimators.py:Outcome:scale=0.5"))
    adv, stats = r.instance.compute(GAMES)
    assert adv == [[0.25] * 3, [-0.25] * 3] and stats == {"outcome_groups": 1.0}
    assert len(code.strip().splitlines()) <= 40
