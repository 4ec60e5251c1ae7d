"""The MARS importer: the pack `mars` from a local checkout of thu-nics/MARS.

`import_mars(path)` reads each game environment's `_get_prefix_prompt`
(roll/agentic/env/<game>/env.py: the system, rules, information, format, example, instructions
and user texts, and Hanabi's colors and rank counts) and the turn texts of `_format_messages`
(roll/agentic/rollout/env_manager.py: the own and opponent turns, the GAME STATE and CHOSEN
ACTION blocks). Each f-string field is mapped to one of our placeholders by the tables below; a
field not in them stops the import with one line, so a changed reference is noticed instead of
imported wrongly.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from mars_eval.prompts import PromptPack
from mars_eval.prompts.importers.reading import (
    ImportFailure,
    assigned,
    augmented,
    function_named,
    make_pack,
    read_tree,
    shielded,
    template_of,
)

MARS_REPO = "thu-nics/MARS"
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


def _mars_prefix(root: Path, folder: str, family: str) -> dict[str, Any]:
    tree, where = read_tree(root, f"roll/agentic/env/{folder}/env.py")
    func = function_named(tree, "_get_prefix_prompt", where)
    out: dict[str, Any] = {}
    for local, key in _MARS_LOCALS.items():
        values = assigned(func, local)
        if len(values) != 1:
            raise ImportFailure(f"{where}: expected one assignment to {local}, found {len(values)}")
        out[f"games.{family}.{key}"] = template_of(values[0], _MARS_PREFIX_VARS, where)
    if family == "hanabi":
        colors = assigned(func, "color_set")
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
    tree, where = read_tree(root, "roll/agentic/rollout/env_manager.py")
    func = function_named(tree, "_format_messages", where)
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
    added = augmented(func, lambda t: ast.unparse(t) == "messages[-1]['content']")
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
        imported.update(shielded(_mars_prefix, root, folder, family))
    imported.update(shielded(_mars_turns, root))
    return make_pack(
        "mars",
        MARS_REPO,
        root,
        imported,
        "The MARS game environments' prompt text, imported from a local checkout (games.*); "
        "every other template is the pack 'ours'.",
    )
