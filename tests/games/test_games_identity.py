"""`games` run folders are named like `mas` ones (issue 16 item 1), through the CLI: one
checkpoint named three ways is one run; the same name served over HTTP is another (nothing
shared); a folder of an earlier version (model as given, no engine) resumes under its new name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mars_eval.run.store import config_hash, slug
from tests.games.test_games_cli import first_legal_policy
from tests.support.cli import run_cli
from tests.support.games_config import games_config

REPO = Path(__file__).resolve().parents[2]
COMMON = ["games", "--games", "tic_tac_toe", "--opponents", "random", "--episodes", "1", "--max-tokens", "8"]


def test_one_checkpoint_named_three_ways_is_one_games_run_and_http_is_another(tmp_path, scripted_server):
    tiny = (REPO / "results" / "tiny").resolve()
    out = ["--output", str(tmp_path), "--json"]
    dirs = []
    for named in ([], ["--model", "results/tiny"], ["--model", str(tiny)]):
        res = run_cli([*COMMON, *named, *out], timeout=600)
        assert res.returncode == 0, res.describe()
        dirs.append(res.summary["run_dir"])
    assert len(set(dirs)) == 1, [Path(d, "config.json").read_text() for d in dict.fromkeys(dirs)]
    config = json.loads(Path(dirs[0], "config.json").read_text())
    assert config["model"] == str(tiny) and config["engine"] != "http" and config["fingerprint"]

    srv = scripted_server(first_legal_policy, model=str(tiny))  # an endpoint serving the same name
    http = run_cli([*COMMON, "--model", str(tiny), "--base-url", srv.base_url, *out])
    assert http.returncode == 0, http.describe()
    assert http.summary["run_dir"] != dirs[0]
    assert http.summary["calls_sent"] > 0 and srv.stats()["calls"] == http.summary["calls_sent"]


def test_a_games_folder_of_an_earlier_version_resumes(tmp_path, scripted_server):
    srv = scripted_server(first_legal_policy, model="scripted-model")
    args = [
        *COMMON,
        "--model",
        "scripted-model",
        "--base-url",
        srv.base_url,
        "--output",
        str(tmp_path),
        "--json",
    ]
    first = run_cli(args)
    assert first.returncode == 0, first.describe()
    new = Path(first.summary["run_dir"])
    # Make it what an earlier version wrote: identity with the model as given, no engine.
    cfg = games_config(
        tmp_path,
        games="tic_tac_toe",
        opponents="random",
        episodes=1,
        model="scripted-model",
        base_url=[srv.base_url],
        max_tokens=8,
    )
    old_identity = cfg.identity("scripted-model")
    legacy = tmp_path / f"games-{slug('scripted-model')}-{config_hash(old_identity)}"
    assert legacy != new
    shutil.move(new, legacy)
    (legacy / "config.json").write_text(json.dumps(old_identity))
    sent = srv.stats()["calls"]

    again = run_cli(args)
    assert again.returncode == 0, again.describe()
    assert again.summary["run_dir"] == str(new) and not legacy.exists()
    assert f"resuming {legacy.name} (made by an earlier version) as {new.name}" in again.stderr
    assert again.summary["calls_sent"] == 0 and srv.stats()["calls"] == sent  # episodes reused
    assert again.summary["results"] == first.summary["results"]


def test_an_earlier_folder_of_an_ambiguous_name_is_named_not_resumed(tmp_path, scripted_server):
    """A served name that is also a local folder: the earlier folder may hold in-process episodes."""
    name = str(tmp_path / "ckpt")
    Path(name).mkdir()
    srv = scripted_server(first_legal_policy, model=name)
    out = tmp_path / "runs"
    cfg = games_config(
        out,
        games="tic_tac_toe",
        opponents="random",
        episodes=1,
        model=name,
        base_url=[srv.base_url],
        max_tokens=8,
    )
    legacy = out / f"games-{slug(name)}-{config_hash(cfg.identity(name))}"
    legacy.mkdir(parents=True)
    (legacy / "config.json").write_text(json.dumps(cfg.identity(name)))
    res = run_cli([*COMMON, "--model", name, "--base-url", srv.base_url, "--output", str(out), "--json"])
    assert res.returncode == 0, res.describe()
    assert legacy.is_dir() and res.summary["run_dir"] != str(legacy)
    assert f"{legacy.name} (made by an earlier version) may hold the other engine's episodes" in res.stderr
    assert res.summary["calls_sent"] > 0
