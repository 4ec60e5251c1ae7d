"""Acceptance (issue 29 item 2 and item 12's directory): hostile prompt pack files.

An alias bomb (a few KB expanding to billions of nodes, as lists or as nested mappings under
`templates:`) hung `prompts show` and `mas --prompts` past 120 s and 3 GB; a pack nested 100k
levels deep ended in a 3000-line RecursionError. Every file here is written for the test; each
is refused in one line with exit code 2, in seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from mars_eval.models.base import ConfigError
from mars_eval.prompts import MAX_DEPTH, MAX_PACK_BYTES, load_pack
from tests.support.cli import cli_env, run_cli


def _list_bomb() -> str:
    """Nine levels of ten aliases: 10^9 leaves from about 1 KB, as a valid pack's description."""
    lines = ['l0: &l0 "lol"']
    for level in range(1, 10):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 10)}]")
    ours = load_pack().to_yaml().replace("name: ours\n", "name: bomb\ndescription: *l9\n", 1)
    return "\n".join(lines) + "\n" + ours


def _mapping_bomb() -> str:
    """The same as nested mappings under `templates:` (flattened, 10^10 dotted keys)."""
    lines = ["name: bomb", "m0: &m0 {" + ", ".join(f"k{i}: t" for i in range(10)) + "}"]
    for level in range(1, 10):
        lines.append(f"m{level}: &m{level} {{" + ", ".join(f"k{i}: *m{level - 1}" for i in range(10)) + "}")
    lines.append("templates: {mas: *m9}")
    return "\n".join(lines) + "\n"


def _deep_block(levels: int) -> str:
    """Block style: `- - - x` is a list in a list in a list."""
    return "name: deep\ntemplates:\n  " + "- " * levels + "x\n"


def _deep_flow(levels: int) -> str:
    return "name: deep\ntemplates: " + "[" * levels + "]" * levels + "\n"


def _huge() -> str:
    return "name: huge\n# " + "x" * (MAX_PACK_BYTES + 10) + "\ntemplates: {}\n"


HOSTILE = {
    "list-bomb.yaml": (_list_bomb, "anchors and aliases"),
    "mapping-bomb.yaml": (_mapping_bomb, "anchors and aliases"),
    "deep-flow.yaml": (lambda: _deep_flow(100_000), "nested deeper"),
    "deep-block.yaml": (lambda: _deep_block(100_000), "nested deeper"),
    "huge.yaml": (_huge, "larger than"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_pack_is_refused_in_one_line(tmp_path, name) -> None:
    make, message = HOSTILE[name]
    path = tmp_path / name
    path.write_text(make())
    with pytest.raises(ConfigError, match=message) as caught:
        load_pack(str(path))
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300


@pytest.mark.parametrize("name", ["list-bomb.yaml", "mapping-bomb.yaml", "deep-flow.yaml"])
def test_show_and_mas_refuse_a_hostile_pack_with_exit_2(tmp_path, scripted_server, name) -> None:
    """Through the CLI as a user runs it: one error line, exit 2, no call sent."""
    from tests.support.scripted_policy import AnswerPolicy

    make, message = HOSTILE[name]
    path = tmp_path / name
    path.write_text(make())
    shown = run_cli(["prompts", "show", str(path)], timeout=60)
    srv = scripted_server(AnswerPolicy([]))
    data = tmp_path / "one.jsonl"
    data.write_text('{"id": "p1", "question": "1+1?", "answer": "2"}\n')
    args = ["mas", "--task", "custom", "--data-files", str(data), "--model", "scripted-model"]
    ran = run_cli(
        [*args, "--base-url", srv.base_url, "--prompts", str(path), "--output", str(tmp_path / "runs")],
        timeout=60,
    )
    for done in (shown, ran):
        assert done.returncode == 2, done.describe()
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], done.describe()
    assert not srv.app.log


def test_an_alias_free_pack_with_every_bound_in_use_loads(tmp_path) -> None:
    """The bounds leave room: `ours` written out (depth 6 of MAX_DEPTH) loads, also from a name."""
    text = load_pack().to_yaml()
    assert "&" not in text.split("templates:")[0] and len(text) < MAX_PACK_BYTES // 10
    depth = max(len(line) - len(line.lstrip()) for line in text.splitlines() if line.strip()) // 2
    assert depth + 2 <= MAX_DEPTH
    path = tmp_path / "copy.yaml"
    path.write_text(text)
    assert load_pack(str(path)).hash == load_pack().hash


def test_show_writes_no_aliases_when_a_list_is_shared() -> None:
    """A pack whose two keys hold one list object is written out in full (no &id001 / *id001),
    so `prompts show`'s output loads back under the no-alias rule."""
    pack = load_pack()
    shared = list(pack.templates["mas.macnet.personas"])
    copy = type(pack)(
        "shared", {**pack.templates, "mas.macnet.personas": shared, "games.hanabi.colors": shared * 3}
    )
    text = copy.to_yaml()
    assert "&id" not in text and "*id" not in text
    assert yaml.safe_load(text)["templates"]["games"]["hanabi"]["colors"] == shared * 3


@pytest.mark.skipif(not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"), reason="POSIX only")
def test_a_pack_that_is_dev_zero_or_a_fifo_is_refused_without_reading(tmp_path) -> None:
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in (zero, fifo):
        done = run_cli(["prompts", "show", str(path)], timeout=30)
        assert done.returncode == 2 and "not a regular file" in done.stderr, done.describe()
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_directory_named_as_a_pack_is_called_a_directory(tmp_path) -> None:
    """`--prompts mypacks` (a folder in the working directory, no slash) was "no prompt pack"."""
    (tmp_path / "mypacks").mkdir()
    env = cli_env(XDG_DATA_HOME=str(tmp_path / "data"))
    import subprocess

    from tests.support.cli import mars_eval_command

    done = subprocess.run(
        [*mars_eval_command(), "prompts", "show", "mypacks"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2 and "mypacks is a directory" in done.stderr, done.stderr
    assert Path(tmp_path / "mypacks").is_dir()
