"""Acceptance (issue 29 item 4): `prompts import` over a hostile checkout, and a data folder that
cannot take the pack.

The fake checkouts are the ones tests/test_prompt_packs.py writes; each test spoils one file
of it. Before the fix these ended in tracebacks (RecursionError, ValueError, AttributeError,
MemoryError after 18 s, OSError), hung (a FIFO), read a file outside the checkout, or left a
0-byte `.tmp` behind. Now each is one line on stderr, exit 2, and nothing is left in the data
folder.
"""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest

from mars_eval.prompts.importers import MAX_SOURCE_BYTES, MAX_SOURCE_DEPTH, import_maslab
from tests.support.cli import cli_env, mars_eval_command
from tests.test_prompt_packs import _fake_mars, _fake_maslab

TIC = "roll/agentic/env/tictactoe/env.py"
HANABI = "roll/agentic/env/hanabi/env.py"
GPQA = "datasets/build_test_dataset.py"
DYLAN_UTILS = "methods/dylan/utils_math.py"
DYLAN_CONFIG = "methods/dylan/configs/config_main.yaml"


def _config_fifo(root: Path) -> None:
    (root / DYLAN_CONFIG).unlink()
    os.mkfifo(root / DYLAN_CONFIG)


def _config_bomb(root: Path) -> None:
    lines = ["a0: &a0 Helper"] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    (root / DYLAN_CONFIG).write_text("\n".join(lines) + "\nroles: *a9\n")


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _chain(terms: int):
    def spoil(root: Path) -> None:
        chain = " + ".join(['"a"'] * terms)
        _edit(root / TIC, 'system_prompt = "SYS', f'system_prompt = {chain} + "SYS')

    return spoil


def _replace_with(target: str):
    def spoil(root: Path) -> None:
        path = root / TIC
        path.unlink()
        if target == "fifo":
            os.mkfifo(path)
        elif target == "outside":
            outside = root.parent / "elsewhere.py"
            outside.write_text("secret = 1\n")
            path.symlink_to(outside)
        elif target == "huge":
            path.write_text("x = 1\n" + "#" * (MAX_SOURCE_BYTES + 1))
        else:
            path.symlink_to(target)

    return spoil


MARS_CASES = {
    "plus-chain-30000": (_chain(30_000), "nested too deeply"),
    "plus-chain-300": (_chain(300), "nested too deeply"),
    "call-in-color-list": (lambda r: _edit(r / HANABI, '"Bb"]', 'open("/x")]'), "not a list of texts"),
    "number-for-color-list": (lambda r: _edit(r / HANABI, "color_set = [", "color_set = 5 or ["), "color_se"),
    "dev-zero": (_replace_with("/dev/zero"), "leading out of the checkout"),
    "fifo": (_replace_with("fifo"), "not a regular file"),
    "symlink-out-of-tree": (_replace_with("outside"), "leading out of the checkout"),
    "huge-file": (_replace_with("huge"), "larger than 2 MiB"),
    "rank-test-of-text": (lambda r: _edit(r / HANABI, "if r == 5:", 'if r == "five":'), "unexpected rank"),
}  # fmt: skip
MASLAB_CASES = {
    "dylan-config-a-fifo": (_config_fifo, "not a regular file"),
    "dylan-config-an-alias-bomb": (_config_bomb, "anchors and aliases"),
    "dylan-examples-a-number": (
        lambda r: _edit(r / DYLAN_UTILS, 'return """Easy examples."""', "return 5"),
        "two texts",
    ),
    "gpqa-option-with-two-fields": (
        lambda r: _edit(r / GPQA, "Correct Answer']}\"", "Correct Answer']}{example['x']}\""),
        "one field",
    ),
    "gpqa-option-not-an-f-string": (
        lambda r: _edit(r / GPQA, "f\"\\n(A) {example['Correct Answer']}\"", 'example["A"]'),
        "one field",
    ),
}


def _import(source: str, root: Path, data: Path, **popen: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*mars_eval_command(), "prompts", "import", source, str(root)],
        capture_output=True,
        text=True,
        timeout=90,
        env=cli_env(XDG_DATA_HOME=str(data)),
        stdin=subprocess.DEVNULL,
        **popen,  # type: ignore[arg-type]
    )


def _assert_refused(done: subprocess.CompletedProcess, message: str, data: Path) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1 and message in lines[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    left = [p.name for p in data.rglob("*") if p.is_file()] if data.exists() else []
    assert left == [], left


@pytest.mark.parametrize("case", sorted(MARS_CASES))
def test_a_hostile_mars_checkout_is_refused_in_one_line(tmp_path, case) -> None:
    spoil, message = MARS_CASES[case]
    root = _fake_mars(tmp_path / "MARS")
    spoil(root)
    _assert_refused(_import("mars", root, tmp_path / "data"), message, tmp_path / "data")


@pytest.mark.parametrize("case", sorted(MASLAB_CASES))
def test_a_hostile_maslab_checkout_is_refused_in_one_line(tmp_path, case) -> None:
    spoil, message = MASLAB_CASES[case]
    root = _fake_maslab(tmp_path / "MASLab")
    spoil(root)
    _assert_refused(_import("maslab", root, tmp_path / "data"), message, tmp_path / "data")


def test_the_depth_bound_leaves_room_for_real_files(tmp_path) -> None:
    """A 100-term chain (deeper than any real reference file) still imports."""
    root = _fake_mars(tmp_path / "MARS")
    _chain(MAX_SOURCE_DEPTH // 2)(root)
    done = _import("mars", root, tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "data/mars-eval/prompts/mars.yaml").is_file()


def test_a_gpqa_option_with_text_after_its_field_is_imported_as_written(tmp_path) -> None:
    """Was `AttributeError: 'str' object has no attribute '_fields'`: the field was taken to be last."""
    root = _fake_maslab(tmp_path / "MASLab")
    for letter, column in zip(
        "ABCD", ["Correct Answer", *(f"Incorrect Answer {i}" for i in (1, 2, 3))], strict=True
    ):
        _edit(root / GPQA, f"({letter}) {{example['{column}']}}\"", f"({letter}) {{example['{column}']}} .\"")
    pack = import_maslab(root)
    assert pack.templates["tasks.gpqa.bare_option"] == "({letter}) {option} ."


def _small_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))  # a disk with 2 KB left (EFBIG)


@pytest.mark.parametrize("folder", ["full", "not-a-folder", "target-is-a-folder"])
def test_a_data_folder_that_cannot_take_the_pack_leaves_nothing(tmp_path, folder) -> None:
    """A full or unwritable data folder was an OSError traceback and left a 0-byte mars.yaml.tmp."""
    root = _fake_mars(tmp_path / "MARS")
    data = tmp_path / "data"
    popen: dict[str, object] = {}
    if folder == "full":
        popen["preexec_fn"] = _small_file_limit
    elif folder == "not-a-folder":
        data.parent.mkdir(exist_ok=True)
        data.write_text("a file where the data folder should be\n")
    else:
        (data / "mars-eval/prompts/mars.yaml").mkdir(parents=True)
    done = _import("mars", root, data, **popen)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert "cannot write prompt pack" in lines[0] and "Traceback" not in done.stderr
    if data.is_dir():
        assert [p.name for p in data.rglob("*") if p.is_file()] == []
