"""The command synopses of docs/cli.md (the command reference the README links to) match
`--help`: the same flags, and an option shown without brackets exactly when the command requires
it (documentation claims against the code, issue 22; moved from the README by issue 31)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

CLI_DOC = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
FLAG = re.compile(r"--[a-z][a-z0-9-]*|-[A-Z]\b")  # long flags and one-letter ones (-S)


def synopsis(command: str) -> str:
    """The synopsis of `command` (e.g. "mars-eval suite"): its first code line that shows
    optional parts ("[...]"), with the indented lines that continue it."""
    lines = CLI_DOC.splitlines()
    for i, line in enumerate(lines):
        continued = i + 1 < len(lines) and lines[i + 1].startswith("  ")
        if line.startswith(command + " ") and ("[" in line or continued):
            block = [line]
            for more in lines[i + 1 :]:
                if not more.startswith("  "):
                    break
                block.append(more)
            return "\n".join(block)
    raise AssertionError(f"no synopsis of {command} in docs/cli.md")


def flags_by_depth(text: str) -> dict[str, bool]:
    """flag -> whether it appears outside every [ ] and ( ) (i.e. as required; a parenthesised
    group lists alternatives, none of them required on its own)."""
    out: dict[str, bool] = {}
    depth = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        m = FLAG.match(text, i) if ch == "-" and (i == 0 or text[i - 1] in " [|/") else None
        if m:
            out[m.group(0)] = out.get(m.group(0), False) or depth == 0
            i = m.end()
            continue
        i += 1
    return out


def cli_options(name: str) -> tuple[dict[str, bool], set[str]]:
    """(flag -> required, the negative twins of boolean flags) of a `mars-eval` command. An
    option is required when click requires it or its help says so (checked by the command)."""
    from mars_eval.cli.application import app

    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    out, twins = {}, set()
    for p in command.params:
        if getattr(p, "param_type_name", "") != "option" or "--help" in p.opts:
            continue
        required = bool(p.required) or "required" in str(getattr(p, "show_default", "") or "")
        for flag in p.opts:
            out[flag] = required
        twins.update(getattr(p, "secondary_opts", []))
    return out, twins


@pytest.mark.parametrize(
    "name",
    ["mas", "games", "compare", "plan", "suite", "report", "export", "serve", "curve", "view", "rescore"],
)
def test_mars_eval_synopsis_matches_help(name):
    text = synopsis(f"mars-eval {name}")
    shown = flags_by_depth(text)
    options, twins = cli_options(name)
    but = re.search(r"\[every mas option but ([^\]]*)\]", text)
    if but:  # the mas options, less those named
        left_out = set(FLAG.findall(but.group(1)))
        for flag in left_out:
            shown.pop(flag)
        shown.update({f: False for f in cli_options("mas")[0] if f not in left_out and f not in shown})
    for twin in twins:  # "--no-fresh" may be left out where "--fresh" is shown
        shown.pop(twin, None)
    assert set(shown) == set(options), (set(shown) ^ set(options), text)
    wrong = {f for f, required in options.items() if shown[f] != required}
    assert not wrong, f"shown as {'required' if shown[next(iter(wrong))] else 'optional'}: {wrong}"


def test_mars_train_synopses_match_help():
    from training.cli import make_parser

    parser = make_parser()
    flags = {f for a in parser._actions for f in a.option_strings if f.startswith("--")} - {"--help"}
    shown: set[str] = set()
    in_synopsis = False
    for line in CLI_DOC.splitlines():
        if line.startswith("mars-train "):  # a synopsis line, not an example with a comment
            in_synopsis = "#" not in line
        elif not line.startswith("  "):
            in_synopsis = False
        if in_synopsis:
            shown |= set(FLAG.findall(line))
    assert shown == flags, shown ^ flags
