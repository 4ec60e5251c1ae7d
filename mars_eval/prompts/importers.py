"""Build prompt packs from local checkouts of the reference repositories.

`import_mars(path)` reads thu-nics/MARS: each game environment's `_get_prefix_prompt`
(roll/agentic/env/<game>/env.py) and the turn texts of `_format_messages`
(roll/agentic/rollout/env_manager.py). `import_maslab(path)` reads MASWorks/MASLab: MAD's prompt
constants (methods/mad/mad_prompt.py), AutoGen's no-code assistant message
(methods/autogen/prompt.py), llm_debate's messages (methods/llm_debate/llm_debate_main.py),
DyLAN's (methods/dylan: the math and the main variant), AgentVerse's, MacNet's and
the GPQA / AIME query format of datasets/build_test_dataset.py.

The files are parsed (`ast`), never run: string literals and f-strings are turned into our
`str.format` templates, each f-string expression mapped to one of our placeholders by the
table of its source file (an expression not in the table stops the import with one line, so a
changed reference is noticed instead of imported wrongly). Templates the reference has no
counterpart for (our answer formats, the solver-reviewer AutoGen) are taken from `ours`, and
the pack's `source` lists which keys came from the checkout and its commit.

Reading is bounded (docs/prompts.md): a file must be a regular file inside the checkout (a
symlink leading out of it, a FIFO or a device is refused unread), at most `MAX_SOURCE_BYTES`
are read, and a syntax tree nested past `MAX_SOURCE_DEPTH` levels (a `+` chain of 30,000 terms)
is refused before anything recurses over it. Whatever the importer cannot read is one line
(`ImportFailure`, exit 2).
"""

from __future__ import annotations

import ast
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.prompts import PromptPack, YamlRefused, bounded_yaml_loader, check_templates, load_pack

MAX_SOURCE_BYTES = 2 * 1024 * 1024  # the largest file read is some 20 KB
MAX_SOURCE_DEPTH = 200  # syntax-tree levels; real files stay under 30
MARS_REPO = "thu-nics/MARS"
MASLAB_REPO = "MASWorks/MASLab"
MARS_GAMES = {  # folder under roll/agentic/env -> our game family
    "tictactoe": "tic_tac_toe",
    "connect_four": "connect_four",
    "kuhn_poker": "kuhn_poker",
    "leduc_poker": "leduc_poker",
    "hanabi": "hanabi",
}
# _get_prefix_prompt's local names -> our template names (games.<family>.<name>)
_MARS_LOCALS = {
    "system_prompt": "system",
    "rules": "rules",
    "information": "information",
    "FORMAT_PROMPT": "format",
    "FORMAT_PROMPT_EXAMPLE": "example",
    "instructions": "instructions",
    "user_prompt": "user",
}
# f-string expressions (as ast.unparse writes them) -> our placeholders
_MARS_PREFIX_VARS = {
    "mark": "mark",
    "opponent_mark": "other_mark",
    "player_id": "player",
    "1 - player_id": "other_player",
    "c": "colors",
    "r": "ranks",
    "per_color": "per_color",
    "total_cards": "total_cards",
    "color_names": "color_names",
    "rank_range_str": "rank_counts",
    "self.hand_size": "hand_size",
    "self.max_information_tokens": "max_information_tokens",
    "self.max_life_tokens": "max_life_tokens",
    "r * c": "max_score",
    "FORMAT_PROMPT": "format",
    "FORMAT_PROMPT_EXAMPLE": "example",
    "rules": "rules",
    "information": "information",
    "instructions": "instructions",
}
_MARS_TURN_VARS = {
    "turn_idx": "n",
    "content['state']": "state",
    "', '.join(content['legal_actions'].values())": "legal",
    "content['actions']": "action",
}


class ImportFailure(ConfigError):
    """The checkout does not hold what the importer reads (one line, exit 2)."""


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def template_of(node: ast.AST, names: dict[str, str], where: str, positional: tuple[str, ...] = ()) -> str:
    """A string expression as a template: literals escaped, f-string fields and `.format()`
    arguments mapped through `names` (source text -> placeholder)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _escape(node.value)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(_escape(str(part.value)))
            elif isinstance(part, ast.FormattedValue):
                source = ast.unparse(part.value)
                if part.conversion != -1 or part.format_spec is not None or source not in names:
                    raise ImportFailure(f"{where}: unexpected f-string field {{{source}}}")
                out.append("{" + names[source] + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template_of(node.left, names, where) + template_of(node.right, names, where)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        args = [ast.unparse(a) for a in node.args]
        if node.keywords or any(a not in names for a in args):
            raise ImportFailure(f"{where}: unexpected .format() arguments {args}")
        pieces = str(node.func.value.value).split("{}")
        if len(pieces) != len(args) + 1:
            raise ImportFailure(f"{where}: .format() text does not match its arguments")
        out = _escape(pieces[0])
        for arg, piece in zip(args, pieces[1:], strict=True):
            out += "{" + names[arg] + "}" + _escape(piece)
        return out
    if isinstance(node, ast.Name) and node.id in names:
        return "{" + names[node.id] + "}"
    if isinstance(node, ast.Call) and ast.unparse(node) in names:  # str(aid), as a whole
        return "{" + names[ast.unparse(node)] + "}"
    raise ImportFailure(f"{where}: cannot read a prompt text from {ast.unparse(node)[:60]!r}")


def _depth(tree: ast.AST) -> int:
    """How deep the syntax tree nests (iteratively: no recursion over a hostile tree)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_SOURCE_DEPTH:
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _source_text(root: Path, rel: str) -> bytes:
    """The bytes of `root/rel`: a regular file inside the checkout, at most MAX_SOURCE_BYTES."""
    path = root / rel
    try:
        real = path.resolve(strict=True)
        inside = real.is_relative_to(root.resolve(strict=True))
    except FileNotFoundError:
        raise ImportFailure(f"{root} has no {rel}: is it a checkout of the right repository?") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise ImportFailure(f"{rel}: cannot be read ({type(exc).__name__})") from None
    if not inside:
        raise ImportFailure(f"{rel}: a symlink leading out of the checkout (to {real}); refused")
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; fstat then refuses it
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ImportFailure(f"{rel}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ImportFailure(f"{rel}: not a regular file (a FIFO, a device or a folder); refused")
        try:
            raw = f.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            raise ImportFailure(f"{rel}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(raw) > MAX_SOURCE_BYTES:
        raise ImportFailure(f"{rel}: larger than {MAX_SOURCE_BYTES // (1024 * 1024)} MiB; refused")
    return raw


def _read(root: Path, rel: str) -> tuple[ast.Module, str]:
    raw = _source_text(root, rel)
    try:
        tree = ast.parse(raw.decode("utf-8"), filename=rel)
    except (UnicodeDecodeError, SyntaxError, ValueError) as exc:  # ValueError: a NUL byte
        raise ImportFailure(f"{rel}: cannot be read ({type(exc).__name__})") from None
    except (RecursionError, MemoryError):
        raise ImportFailure(f"{rel}: nested too deeply to read (over {MAX_SOURCE_DEPTH} levels)") from None
    if _depth(tree) > MAX_SOURCE_DEPTH:
        raise ImportFailure(f"{rel}: nested too deeply to read (over {MAX_SOURCE_DEPTH} levels)")
    return tree, rel


def _function(tree: ast.AST, name: str, where: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise ImportFailure(f"{where}: no function {name}")


def _assigned(func: ast.AST, target: str) -> list[ast.expr]:
    """Values assigned (=) to a plain local name, in source order."""
    found = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == target for t in node.targets
        ):
            found.append(node)
    return [n.value for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def _augmented(func: ast.AST, target: Callable[[ast.expr], bool]) -> list[ast.expr]:
    found = [n for n in ast.walk(func) if isinstance(n, ast.AugAssign) and target(n.target)]
    return [n.value for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def source_commit(root: Path) -> str | None:
    """The checkout's commit, when it is a git work tree (None otherwise)."""
    try:
        done = subprocess.run(
            # no fsmonitor: the checkout's own git config must not name a program to run
            ["git", "-c", "core.fsmonitor=false", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) == 40 else None


def _pack(name: str, repo: str, root: Path, imported: dict[str, Any], description: str) -> PromptPack:
    base = load_pack("ours")
    templates = {**base.templates, **imported}
    source = {"repository": repo, "commit": source_commit(root), "imported": sorted(imported)}
    check_templates(templates, name)
    return PromptPack(name, templates, description, source, origin=str(root))


def _shielded(step: Callable[..., dict[str, Any]], root: Path, *args: str) -> dict[str, Any]:
    """One reading step; a shape it does not expect (a value of another type where it looks for
    text or a list, an expression too deep to unparse) is one line naming the step, not a
    traceback: the checkout is the user's input."""
    try:
        return step(root, *args)
    except ImportFailure:
        raise
    except (AttributeError, TypeError, ValueError, IndexError, KeyError, RecursionError) as exc:
        what = step.__name__.lstrip("_").replace("_", " ")
        detail = " ".join(str(exc).split())[:120]
        raise ImportFailure(f"{root}: cannot read the {what} text ({type(exc).__name__}: {detail})") from None


# --- MARS -----------------------------------------------------------------------------------
def _mars_prefix(root: Path, folder: str, family: str) -> dict[str, Any]:
    tree, where = _read(root, f"roll/agentic/env/{folder}/env.py")
    func = _function(tree, "_get_prefix_prompt", where)
    out: dict[str, Any] = {}
    for local, key in _MARS_LOCALS.items():
        values = _assigned(func, local)
        if len(values) != 1:
            raise ImportFailure(f"{where}: expected one assignment to {local}, found {len(values)}")
        out[f"games.{family}.{key}"] = template_of(values[0], _MARS_PREFIX_VARS, where)
    if family == "hanabi":
        colors = _assigned(func, "color_set")
        if len(colors) != 1 or not isinstance(colors[0], ast.List):
            raise ImportFailure(f"{where}: expected the list color_set")
        if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in colors[0].elts):
            raise ImportFailure(f"{where}: color_set is not a list of texts")
        out["games.hanabi.colors"] = [e.value for e in colors[0].elts]  # type: ignore[attr-defined]
        for node in ast.walk(func):  # `if r == N: rank_range_str = ...`
            if (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Compare)
                and ast.unparse(node.test.left) == "r"
                and isinstance(node.test.comparators[0], ast.Constant)
            ):
                rank = node.test.comparators[0].value
                if type(rank) is not int or not 2 <= rank <= 5:
                    raise ImportFailure(f"{where}: unexpected rank test r == {str(rank)[:20]!r}")
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and ast.unparse(stmt.targets[0]) == "rank_range_str":
                        out[f"games.hanabi.rank_counts.{rank}"] = template_of(
                            stmt.value, _MARS_PREFIX_VARS, where
                        )
    return out


def _mars_turns(root: Path) -> dict[str, Any]:
    tree, where = _read(root, "roll/agentic/rollout/env_manager.py")
    func = _function(tree, "_format_messages", where)
    out: dict[str, Any] = {}
    for node in ast.walk(func):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        in_body = [
            s
            for s in node.body
            if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "turn_idx_content"
        ]
        in_else = [
            s
            for s in node.orelse
            if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "turn_idx_content"
        ]
        if isinstance(test, ast.Compare) and isinstance(test.comparators[0], ast.Constant):
            mode = test.comparators[0].value
            if mode in ("full", "action") and in_body:
                out[f"games.turn.other_{mode}"] = template_of(in_body[0].value, _MARS_TURN_VARS, where)
        if isinstance(test, ast.Name) and test.id == "is_opponent_turn" and in_else:
            out["games.turn.own"] = template_of(in_else[0].value, _MARS_TURN_VARS, where)
    added = _augmented(func, lambda t: ast.unparse(t) == "messages[-1]['content']")
    texts = [template_of(v, _MARS_TURN_VARS, where) for v in added if not isinstance(v, ast.Name)]
    states = {t for t in texts if "{state}" in t}
    chosen = {t for t in texts if "{action}" in t}
    if len(states) != 1 or len(chosen) != 1:
        raise ImportFailure(f"{where}: expected one GAME STATE block and one CHOSEN ACTION block")
    out["games.turn.state"] = states.pop()
    out["games.turn.chosen"] = chosen.pop()
    for key in ("games.turn.own", "games.turn.other_full", "games.turn.other_action"):
        if key not in out:
            raise ImportFailure(f"{where}: no turn text for {key}")
    return out


def import_mars(path: str | Path) -> PromptPack:
    """The pack `mars`: the MARS game environments' prompt text, from a checkout at `path`."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ImportFailure(f"{path} is not a folder")
    imported: dict[str, Any] = {}
    for folder, family in MARS_GAMES.items():
        imported.update(_shielded(_mars_prefix, root, folder, family))
    imported.update(_shielded(_mars_turns, root))
    return _pack(
        "mars",
        MARS_REPO,
        root,
        imported,
        "The MARS game environments' prompt text, imported from a local checkout (games.*); "
        "every other template is the pack 'ours'.",
    )


# --- MASLab ---------------------------------------------------------------------------------
_MAD_CONSTANTS = {  # mad_prompt.py name -> (our key, {marker: placeholder})
    "PLAYER_META_PROMPT": ("debater_system", {"##debate_topic##": "question"}),
    "MODERATOR_META_PROMPT": ("moderator_system", {"##debate_topic##": "question"}),
    "AFFIRMATIVE_PROMPT": ("affirmative_opening", {"##debate_topic##": "question"}),
    "NEGATIVE_PROMPT": ("negative_opening", {"##aff_ans##": "argument"}),
    "MODERATOR_PROMPT": (
        "moderator_round",
        {"##round##": "ordinal", "##aff_ans##": "affirmative", "##neg_ans##": "negative"},
    ),
    "JUDGE_PROMPT_LAST1": ("judge_candidates", {"##aff_ans##": "affirmative", "##neg_ans##": "negative"}),
    "JUDGE_PROMPT_LAST2": ("judge_pick", {"##debate_topic##": "question"}),
    "DEBATE_PROMPT": ("rebuttal", {"##oppo_ans##": "argument"}),
}


def _module_strings(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out[node.targets[0].id] = node.value.value
    return out


def _maslab_mad(root: Path) -> dict[str, Any]:
    tree, where = _read(root, "methods/mad/mad_prompt.py")
    strings = _module_strings(tree)
    out = {}
    for name, (key, markers) in _MAD_CONSTANTS.items():
        if name not in strings:
            raise ImportFailure(f"{where}: no {name}")
        text = _escape(strings[name])
        for marker, placeholder in markers.items():
            text = text.replace(marker, "{" + placeholder + "}")
        out[f"mas.mad.{key}"] = text
    return out


def _maslab_autogen(root: Path) -> dict[str, Any]:
    tree, where = _read(root, "methods/autogen/prompt.py")
    strings = _module_strings(tree)
    if "ASSISTANT_AGENT_SYSTEM_MESSAGE" not in strings:
        raise ImportFailure(f"{where}: no ASSISTANT_AGENT_SYSTEM_MESSAGE")
    return {"mas.autogen.maslab_assistant_system": _escape(strings["ASSISTANT_AGENT_SYSTEM_MESSAGE"])}


def _maslab_debate(root: Path) -> dict[str, Any]:
    tree, where = _read(root, "methods/llm_debate/llm_debate_main.py")
    out: dict[str, Any] = {}
    inference = _function(tree, "inference", where)
    openings = [
        n
        for n in ast.walk(inference)
        if isinstance(n, ast.JoinedStr)
        and any(isinstance(v, ast.FormattedValue) and ast.unparse(v.value) == "query" for v in n.values)
    ]
    if len(openings) != 1:
        raise ImportFailure(f"{where}: expected one opening message built from the query")
    out["mas.debate.opening"] = template_of(openings[0], {"query": "prompt"}, where)

    construct = _function(tree, "construct_message", where)
    alone = [
        n.value.values[1]
        for n in ast.walk(construct)
        if isinstance(n, ast.Return)
        and isinstance(n.value, ast.Dict)
        and len(n.value.values) == 2
        and isinstance(n.value.values[1], ast.Constant)
    ]
    if len(alone) != 1:
        raise ImportFailure(f"{where}: expected one message for an agent alone")
    out["mas.debate.alone"] = template_of(alone[0], {}, where)
    prefix = _assigned(construct, "prefix_string")
    # head, then "+ response" per other agent (in the loop), then "+ closing.format(question)"
    if len(prefix) != 3 or not all(isinstance(p, ast.BinOp) for p in prefix[1:]):
        raise ImportFailure(f"{where}: expected prefix_string built in three steps")
    tail = template_of(prefix[2].right, {"question": "question"}, where)
    out["mas.debate.revise"] = template_of(prefix[0], {}, where) + "{others}" + tail
    others = _assigned(construct, "response")
    if len(others) != 1:
        raise ImportFailure(f"{where}: expected one text per other agent")
    out["mas.debate.other"] = template_of(others[0], {"agent_response": "text"}, where)

    aggregate = _function(tree, "aggregate", where)
    head = _assigned(aggregate, "aggregate_instruction")
    parts = _augmented(aggregate, lambda t: isinstance(t, ast.Name) and t.id == "aggregate_instruction")
    if len(head) != 1 or len(parts) != 2:
        raise ImportFailure(f"{where}: expected the aggregate instruction in three parts")
    names = {"query": "question", "i + 1": "index", "answer": "text"}
    out["mas.debate.aggregate"] = (
        template_of(head[0], names, where) + "{solutions}" + template_of(parts[1], names, where)
    )
    out["mas.debate.aggregate_solution"] = template_of(parts[0], names, where)
    return out


def _maslab_tasks(root: Path) -> dict[str, Any]:
    tree, where = _read(root, "datasets/build_test_dataset.py")
    gpqa = _function(tree, "format_gpqa_query", where)
    first = _assigned(gpqa, "query")
    parts = _augmented(gpqa, lambda t: isinstance(t, ast.Name) and t.id == "query")
    if len(first) != 1 or ast.unparse(first[0]) != "example['Question']" or len(parts) != 5:
        raise ImportFailure(f"{where}: format_gpqa_query is not the question, an intro and four options")
    intro = template_of(parts[0], {}, where)
    lines = []
    for letter, node in zip("ABCD", parts[1:], strict=True):
        fields = [v for v in getattr(node, "values", []) if isinstance(v, ast.FormattedValue)]
        if not isinstance(node, ast.JoinedStr) or len(fields) != 1:
            raise ImportFailure(f"{where}: option {letter} is not an f-string with one field")
        text = template_of(node, {ast.unparse(fields[0].value): "option"}, where)
        if not text.startswith("\n") or f"({letter})" not in text:
            raise ImportFailure(f"{where}: option {letter} is not a '({letter}) ...' line")
        lines.append(text[1:].replace(f"({letter})", "({letter})", 1))
    if len(set(lines)) != 1:
        raise ImportFailure(f"{where}: the four option lines differ in form")
    aime = [n for n in ast.walk(tree) if isinstance(n, ast.Dict)]
    raw_problem = any(
        isinstance(k, ast.Constant) and k.value == "query" and ast.unparse(v) == "example['Problem']"
        for d in aime
        for k, v in zip(d.keys, d.values, strict=True)
    )
    if not raw_problem:
        raise ImportFailure(f"{where}: no AIME query built from the bare problem")
    return {
        "tasks.gpqa.bare": "{question}" + intro + "\n{options}",
        "tasks.gpqa.bare_option": lines[0],
        "tasks.math.bare": "{question}",
    }


_AGENTVERSE_CONSTANTS = {  # prompt_main.py name -> (our key, {marker: placeholder})
    "ROLE_ASSIGNER_PREPEND_PROMPT": (
        "recruit_system",
        {"${query}": "question", "${cnt_agents}": "n", "${advice}": "advice"},
    ),
    "ROLE_ASSIGNER_APPEND_PROMPT": ("recruit", {"${cnt_agents}": "n"}),
    "SOLVER_PREPEND_PROMPT": ("solver_system", {"${query}": "question"}),
    "SOLVER_APPEND_PROMPT": ("solver", {"${role_description}": "role"}),
    "CRITIC_PREPEND_PROMPT": ("critic_system", {"${role_description}": "role", "${query}": "question"}),
    "CRITIC_APPEND_PROMPT": ("critic", {}),
    "EVALUATOR_PREPEND_PROMPT": (
        "evaluator_system",
        {"${all_role_description}": "roles", "${query}": "question", "${solution}": "solution"},
    ),
    "EVALUATOR_APPEND_PROMPT": ("evaluator", {}),
}


def _constants(
    root: Path, rel: str, table: dict[str, tuple[str, dict[str, str]]], prefix: str
) -> dict[str, Any]:
    """Module-level string constants with their markers turned into placeholders."""
    tree, where = _read(root, rel)
    strings = _module_strings(tree)
    out = {}
    for name, (key, markers) in table.items():
        if name not in strings:
            raise ImportFailure(f"{where}: no {name}")
        text = _escape(strings[name])
        for marker, placeholder in markers.items():
            if _escape(marker) not in text:
                raise ImportFailure(f"{where}: {name} has no {marker}")
            text = text.replace(_escape(marker), "{" + placeholder + "}")
        out[f"{prefix}.{key}"] = text
    return out


def _self_string(func: ast.AST, attr: str, where: str) -> str:
    """The string first assigned to `self.<attr>` in a function."""
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    raise ImportFailure(f"{where}: no string assigned to self.{attr}")


def _maslab_agentverse(root: Path) -> dict[str, Any]:
    out = _constants(root, "methods/agentverse/prompt_main.py", _AGENTVERSE_CONSTANTS, "mas.agentverse")
    tree, where = _read(root, "methods/agentverse/agentverse_main.py")
    out["mas.agentverse.no_advice"] = _escape(
        _self_string(_function(tree, "__init__", where), "advice", where)
    )
    return out


_MACNET_CONSTANTS = {  # prompt_main.py name -> (our key, {.format field: placeholder})
    "INSTRUCTOR_PROMPT": ("review", {"{query}": "question", "{previous_answer}": "previous"}),
    "ASSISTANT_PROMPT": (
        "improve",
        {"{query}": "question", "{previous_answer}": "previous", "{suggestions}": "suggestions"},
    ),
    "CC_PROMPT": ("aggregate", {}),
}


def _maslab_macnet(root: Path) -> dict[str, Any]:
    tree, where = _read(root, "methods/macnet/prompt_main.py")
    strings = _module_strings(tree)
    out: dict[str, Any] = {}
    for name, (key, fields) in _MACNET_CONSTANTS.items():
        if name not in strings:
            raise ImportFailure(f"{where}: no {name}")
        text = strings[name]  # already str.format text: its fields are renamed, its braces kept
        for field_text, placeholder in fields.items():
            if field_text not in text:
                raise ImportFailure(f"{where}: {name} has no {field_text}")
            text = text.replace(field_text, "{" + placeholder + "}")
        out[f"mas.macnet.{key}"] = text
    personas = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "SYSTEM_PROMPT" for t in n.targets)
        and isinstance(n.value, ast.List)
    ]
    if len(personas) != 1 or not all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in personas[0].elts
    ):
        raise ImportFailure(f"{where}: SYSTEM_PROMPT is not one list of texts")
    out["mas.macnet.personas"] = [_escape(e.value) for e in personas[0].elts]  # type: ignore[attr-defined]
    main, where = _read(root, "methods/macnet/macnet_main.py")
    interact = _function(main, "interact", where)
    out["mas.macnet.no_suggestions"] = _escape(_self_string(interact, "suggestions", where))
    aggregate = _augmented(
        _function(main, "aggregate_answers", where),
        lambda t: isinstance(t, ast.Name) and t.id == "aggregation_prompt",
    )
    handed = _augmented(
        _function(main, "graph_inference", where), lambda t: isinstance(t, ast.Name) and t.id == "pre_answer"
    )
    if len(aggregate) != 1 or len(handed) != 1:
        raise ImportFailure(f"{where}: expected one candidate line and one handed-over line")
    names = {"node_id": "node", "answer": "text"}
    out["mas.macnet.candidate"] = template_of(aggregate[0], names, where)
    out["mas.macnet.handed"] = template_of(handed[0], names, where)
    return out


def _maslab_dylan(root: Path) -> dict[str, Any]:
    """DyLAN's math variant in its default ("complex") mode: the few-shot examples lead the
    opening, and the update and ranking messages repeat that opening."""
    tree, where = _read(root, "methods/dylan/dylan_math.py")
    init = _function(tree, "__init__", where)
    system = [
        n.value
        for n in ast.walk(init)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Attribute) and t.attr == "system_prompt" for t in n.targets)
    ]
    extra = _augmented(init, lambda t: isinstance(t, ast.Attribute) and t.attr == "system_prompt")
    if len(system) != 1 or len(extra) != 1:
        raise ImportFailure(f"{where}: expected the system prompt and its 'complex' addition")
    out: dict[str, Any] = {
        "mas.dylan.system": template_of(system[0], {}, where) + template_of(extra[0], {}, where)
    }

    utils, uwhere = _read(root, "methods/dylan/utils_math.py")
    returns = [
        n.value
        for n in ast.walk(_function(utils, "get_examples", uwhere))
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant)
    ]
    if len(returns) != 2 or not all(isinstance(r.value, str) for r in returns):  # type: ignore[attr-defined]
        raise ImportFailure(f"{uwhere}: expected the simple and the complex examples (two texts)")
    examples = _escape(returns[1].value)  # type: ignore[attr-defined]  # the else branch: complex
    prepare = _function(tree, "_prepare_question", where)
    tails = [
        n.right for n in ast.walk(prepare) if isinstance(n, ast.BinOp) and isinstance(n.right, ast.JoinedStr)
    ]
    if not tails:
        raise ImportFailure(f"{where}: _prepare_question adds no problem text")
    opening = examples + template_of(tails[-1], {"query": "question"}, where)
    out["mas.dylan.opening"] = opening

    for func, key, item_key, names in (
        ("_construct_message", "update", "solution", {"agent_response": "text"}),
        ("_construct_ranking_message", "rank", "numbered", {"agent_response": "text", "aid": "index"}),
    ):
        body = _function(tree, func, where)
        head = _assigned(body, "prefix_string")
        closing = _augmented(body, lambda t: isinstance(t, ast.Name) and t.id == "prefix_string")
        item = _assigned(body, "response")
        if len(head) != 1 or len(closing) != 2 or len(item) != 1:
            raise ImportFailure(f"{where}: {func} is not a head, one line per agent and a closing")
        text = template_of(head[0], {"question": "question"}, where).replace("{question}", opening)
        out[f"mas.dylan.{key}"] = text + "{solutions}" + template_of(closing[1], {}, where)
        out[f"mas.dylan.{item_key}"] = template_of(item[0], names, where)
    return out


def _maslab_dylan_main(root: Path) -> dict[str, Any]:
    """DyLAN's main variant: the system prompt of config_main.yaml's role (every agent has the
    same one), and the update and ranking messages (the question, one line per reply, a closing)."""
    import yaml

    rel = "methods/dylan/configs/config_main.yaml"
    raw = _source_text(root, rel)  # bounded as the .py files are
    try:
        roles = (yaml.load(raw.decode("utf-8"), Loader=bounded_yaml_loader()) or {}).get("roles")  # noqa: S506
    except YamlRefused as exc:
        raise ImportFailure(f"{rel}: {exc}") from None
    except (UnicodeDecodeError, yaml.YAMLError, AttributeError, RecursionError):
        raise ImportFailure(f"{root} has no readable {rel}") from None
    if not isinstance(roles, list) or not roles or len(set(roles)) != 1 or not isinstance(roles[0], str):
        raise ImportFailure("methods/dylan/configs/config_main.yaml: expected one role for every agent")
    tree, where = _read(root, "methods/dylan/dylan_main.py")
    maps = [n.value for n in ast.walk(_function(tree, "_get_role_map", where)) if isinstance(n, ast.Return)]
    if len(maps) != 1 or not isinstance(maps[0], ast.Dict):
        raise ImportFailure(f"{where}: _get_role_map returns no mapping")
    texts = {
        k.value: v
        for k, v in zip(maps[0].keys, maps[0].values, strict=True)
        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str)
    }
    if roles[0] not in texts:
        raise ImportFailure(f"{where}: _get_role_map has no text for the role {roles[0]!r}")
    # _activate_node adds a newline to the role's text
    out: dict[str, Any] = {"mas.dylan.main_system": template_of(texts[roles[0]], {}, where) + "\n"}
    items = set()
    for func, key in (("_construct_message", "main_update"), ("_construct_ranking_message", "main_rank")):
        body = _function(tree, func, where)
        steps = _assigned(body, "prefix_string")
        item = _assigned(body, "response")
        shape = [ast.unparse(x.left) if isinstance(x, ast.BinOp) else "" for x in steps]
        if shape != ["question", "prefix_string", "prefix_string"] or len(item) != 1:
            raise ImportFailure(f"{where}: {func} is not a head, one line per reply and a closing")
        head, closing = steps[0].right, steps[2].right  # type: ignore[attr-defined]
        out[f"mas.dylan.{key}"] = (
            "{question}"
            + template_of(head, {}, where)
            + "{responses}"
            + template_of(closing, {"len(responses)": "count"}, where)
        )
        items.add(template_of(item[0], {"str(aid)": "index", "aresponse": "text"}, where))
    if len(items) != 1:
        raise ImportFailure(f"{where}: the update and ranking messages list replies differently")
    out["mas.dylan.main_response"] = items.pop()
    return out


def import_maslab(path: str | Path) -> PromptPack:
    """The pack `maslab`: MASLab's MAD, AutoGen, llm_debate, DyLAN (main, math), AgentVerse and MacNet
    prompts and its GPQA/AIME query format, from a checkout at `path`."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ImportFailure(f"{path} is not a folder")
    imported: dict[str, Any] = {}
    for step in (
        _maslab_mad,
        _maslab_autogen,
        _maslab_debate,
        _maslab_tasks,
        _maslab_agentverse,
        _maslab_dylan,
        _maslab_dylan_main,
        _maslab_macnet,
    ):
        imported.update(_shielded(step, root))
    return _pack(
        "maslab",
        MASLAB_REPO,
        root,
        imported,
        "MASLab's prompt text (MAD, AutoGen, llm_debate, DyLAN, AgentVerse, MacNet, the GPQA/AIME "
        "queries), imported from a "
        "local checkout; every other template is the pack 'ours'.",
    )
