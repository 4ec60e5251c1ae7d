"""Atomic checkpoints: a failure mid-write never leaves a folder that looks whole."""

import json

import pytest
import torch

from training import checkpoint as ckpt


def test_atomic_write_replaces_whole(tmp_path):
    target = tmp_path / "ck" / "step-1"
    ckpt.atomic_dir_write(target, lambda d: (d / "a.txt").write_text("one"))
    assert (target / "a.txt").read_text() == "one" and ckpt.is_complete(target)
    ckpt.atomic_dir_write(target, lambda d: (d / "b.txt").write_text("two"))
    assert not (target / "a.txt").exists() and (target / "b.txt").read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["step-1"]  # no temp or old folders left


def test_failed_write_leaves_previous_state(tmp_path):
    target = tmp_path / "step-2"
    ckpt.atomic_dir_write(target, lambda d: (d / "good").write_text("ok"))

    def boom(d):
        (d / "half").write_text("partial")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        ckpt.atomic_dir_write(target, boom)
    assert (target / "good").exists() and not (target / "half").exists()
    # the next save cleans the stale temp folder
    ckpt.atomic_dir_write(tmp_path / "step-3", lambda d: None)
    ckpt.atomic_dir_write(target, lambda d: (d / "x").write_text("1"))
    assert not list(tmp_path.glob(".step-2.tmp-*"))


def test_latest_ignores_incomplete(tmp_path):
    for n in (1, 2):
        ckpt.atomic_dir_write(
            tmp_path / f"step-{n}",
            lambda d: ((d / ckpt.STATE_DIR).mkdir(), torch.save({}, d / ckpt.STATE_DIR / "state.pt")),
        )
    half = tmp_path / "step-3"  # looks like a checkpoint but has no COMPLETE marker
    (half / ckpt.STATE_DIR).mkdir(parents=True)
    torch.save({}, half / ckpt.STATE_DIR / "state.pt")
    assert ckpt.latest_step_checkpoint(tmp_path)[0] == 2


def test_save_checkpoint_is_loadable(tmp_path, micro_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    out = ckpt.save_checkpoint(
        tmp_path / "final",
        state_dict=model.state_dict(),
        model=model,
        tokenizer=tok,
        eval_meta={"prompt_style": "compact", "temperature": 0.7, "max_tokens": 16},
        train_state={"step": 3},
    )
    assert json.loads((out / "mars_eval.json").read_text())["prompt_style"] == "compact"
    again = AutoModelForCausalLM.from_pretrained(out)
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert ckpt.load_train_state(out)["step"] == 3


def test_shared_folder_token_tells_ranks_apart(tmp_path):
    from training.distributed import shared_folder_token

    shared, other_node = tmp_path / "shared", tmp_path / "local"
    shared.mkdir()
    other_node.mkdir()
    assert shared_folder_token(shared, "abc", write=True)  # rank 0 writes
    assert shared_folder_token(shared, "abc", write=False)  # a rank on the same filesystem sees it
    assert not shared_folder_token(other_node, "abc", write=False)  # a node with its own disk does not
    assert not shared_folder_token(shared, "stale", write=False)  # an old marker does not count


def _fake_step(folder, step):
    (folder / ckpt.STATE_DIR).mkdir(parents=True)
    torch.save({"step": step}, folder / ckpt.STATE_DIR / "state.pt")
    (folder / ckpt.MARKER).write_text("ok\n")


def test_keep_last_prunes_old_steps_and_final_counts_as_latest(tmp_path):
    for n in (5, 10, 15):
        _fake_step(tmp_path / f"step-{n}", n)
    (tmp_path / "initial").mkdir()
    removed = ckpt.prune_step_checkpoints(tmp_path, keep_last=2)
    assert [p.name for p in removed] == ["step-5"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["initial", "step-10", "step-15"]
    assert ckpt.prune_step_checkpoints(tmp_path, keep_last=0) == []  # 0: keep all
    assert ckpt.latest_step_checkpoint(tmp_path) == (15, tmp_path / "step-15")
    _fake_step(tmp_path / "final", 20)  # the end of a run: final only, at its step (from state.pt)
    assert ckpt.latest_step_checkpoint(tmp_path) == (20, tmp_path / "final")
    ckpt.prune_step_checkpoints(tmp_path, keep_last=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final", "initial", "step-15"]


def test_a_checkpoint_save_draws_no_shard_bar(tmp_path, micro_model_dir, capfd):
    """Issue 31: transformers' "Writing model shards" bar showed inside mars-train's progress.
    The bar is off while a checkpoint is written, and as it was afterwards."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()  # as in a process that has not turned them off
    try:
        capfd.readouterr()
        ckpt.save_checkpoint(
            tmp_path / "step-1", state_dict=model.state_dict(), model=model, tokenizer=tok, eval_meta={}
        )
        captured = capfd.readouterr()
        assert "Writing model shards" not in captured.err + captured.out
        assert hf_logging.is_progress_bar_enabled()
    finally:
        if not was_on:
            hf_logging.disable_progress_bar()
