"""The MASLab importer: the pack `maslab` from a local checkout of MASWorks/MASLab.

`import_maslab(path)` reads MAD's prompt constants (methods/mad/mad_prompt.py), AutoGen's
no-code assistant message (methods/autogen/prompt.py), llm_debate's messages
(methods/llm_debate/llm_debate_main.py), DyLAN's (methods/dylan: the math and the main variant),
AgentVerse's and MacNet's prompts, and the GPQA / AIME query format of
datasets/build_test_dataset.py, and where the checkout has it, the LLM judge's prompt
(evaluations/evaluate_xverify.py, `importers.maslab_judge`). Module constants have their
markers (`##debate_topic##`, `${query}`, ...) turned into our placeholders by the tables below;
a marker or constant missing stops the import with one line.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from mars_eval.prompts import PromptPack, YamlRefused, bounded_yaml_loader
from mars_eval.prompts.importers.maslab_judge import has_judge, maslab_judge
from mars_eval.prompts.importers.reading import (
    ImportFailure,
    assigned,
    augmented,
    escape,
    function_named,
    make_pack,
    read_tree,
    shielded,
    source_bytes,
    template_of,
)

MASLAB_REPO = "MASWorks/MASLab"


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
    tree, where = read_tree(root, "methods/mad/mad_prompt.py")
    strings = _module_strings(tree)
    out = {}
    for name, (key, markers) in _MAD_CONSTANTS.items():
        if name not in strings:
            raise ImportFailure(f"{where}: no {name}")
        text = escape(strings[name])
        for marker, placeholder in markers.items():
            text = text.replace(marker, "{" + placeholder + "}")
        out[f"mas.mad.{key}"] = text
    return out


def _maslab_autogen(root: Path) -> dict[str, Any]:
    tree, where = read_tree(root, "methods/autogen/prompt.py")
    strings = _module_strings(tree)
    if "ASSISTANT_AGENT_SYSTEM_MESSAGE" not in strings:
        raise ImportFailure(f"{where}: no ASSISTANT_AGENT_SYSTEM_MESSAGE")
    return {"mas.autogen.maslab_assistant_system": escape(strings["ASSISTANT_AGENT_SYSTEM_MESSAGE"])}


def _maslab_debate(root: Path) -> dict[str, Any]:
    tree, where = read_tree(root, "methods/llm_debate/llm_debate_main.py")
    out: dict[str, Any] = {}
    inference = function_named(tree, "inference", where)
    openings = [
        n
        for n in ast.walk(inference)
        if isinstance(n, ast.JoinedStr)
        and any(isinstance(v, ast.FormattedValue) and ast.unparse(v.value) == "query" for v in n.values)
    ]
    if len(openings) != 1:
        raise ImportFailure(f"{where}: expected one opening message built from the query")
    out["mas.debate.opening"] = template_of(openings[0], {"query": "prompt"}, where)

    construct = function_named(tree, "construct_message", where)
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
    prefix = assigned(construct, "prefix_string")
    # head, then "+ response" per other agent (in the loop), then "+ closing.format(question)"
    if len(prefix) != 3 or not all(isinstance(p, ast.BinOp) for p in prefix[1:]):
        raise ImportFailure(f"{where}: expected prefix_string built in three steps")
    tail = template_of(prefix[2].right, {"question": "question"}, where)
    out["mas.debate.revise"] = template_of(prefix[0], {}, where) + "{others}" + tail
    others = assigned(construct, "response")
    if len(others) != 1:
        raise ImportFailure(f"{where}: expected one text per other agent")
    out["mas.debate.other"] = template_of(others[0], {"agent_response": "text"}, where)

    aggregate = function_named(tree, "aggregate", where)
    head = assigned(aggregate, "aggregate_instruction")
    parts = augmented(aggregate, lambda t: isinstance(t, ast.Name) and t.id == "aggregate_instruction")
    if len(head) != 1 or len(parts) != 2:
        raise ImportFailure(f"{where}: expected the aggregate instruction in three parts")
    names = {"query": "question", "i + 1": "index", "answer": "text"}
    out["mas.debate.aggregate"] = (
        template_of(head[0], names, where) + "{solutions}" + template_of(parts[1], names, where)
    )
    out["mas.debate.aggregate_solution"] = template_of(parts[0], names, where)
    return out


def _maslab_tasks(root: Path) -> dict[str, Any]:
    tree, where = read_tree(root, "datasets/build_test_dataset.py")
    gpqa = function_named(tree, "format_gpqa_query", where)
    first = assigned(gpqa, "query")
    parts = augmented(gpqa, lambda t: isinstance(t, ast.Name) and t.id == "query")
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
    tree, where = read_tree(root, rel)
    strings = _module_strings(tree)
    out = {}
    for name, (key, markers) in table.items():
        if name not in strings:
            raise ImportFailure(f"{where}: no {name}")
        text = escape(strings[name])
        for marker, placeholder in markers.items():
            if escape(marker) not in text:
                raise ImportFailure(f"{where}: {name} has no {marker}")
            text = text.replace(escape(marker), "{" + placeholder + "}")
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
    tree, where = read_tree(root, "methods/agentverse/agentverse_main.py")
    out["mas.agentverse.no_advice"] = escape(
        _self_string(function_named(tree, "__init__", where), "advice", where)
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
    tree, where = read_tree(root, "methods/macnet/prompt_main.py")
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
    out["mas.macnet.personas"] = [escape(e.value) for e in personas[0].elts]  # type: ignore[attr-defined]
    main, where = read_tree(root, "methods/macnet/macnet_main.py")
    interact = function_named(main, "interact", where)
    out["mas.macnet.no_suggestions"] = escape(_self_string(interact, "suggestions", where))
    aggregate = augmented(
        function_named(main, "aggregate_answers", where),
        lambda t: isinstance(t, ast.Name) and t.id == "aggregation_prompt",
    )
    handed = augmented(
        function_named(main, "graph_inference", where),
        lambda t: isinstance(t, ast.Name) and t.id == "pre_answer",
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
    tree, where = read_tree(root, "methods/dylan/dylan_math.py")
    init = function_named(tree, "__init__", where)
    system = [
        n.value
        for n in ast.walk(init)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Attribute) and t.attr == "system_prompt" for t in n.targets)
    ]
    extra = augmented(init, lambda t: isinstance(t, ast.Attribute) and t.attr == "system_prompt")
    if len(system) != 1 or len(extra) != 1:
        raise ImportFailure(f"{where}: expected the system prompt and its 'complex' addition")
    out: dict[str, Any] = {
        "mas.dylan.system": template_of(system[0], {}, where) + template_of(extra[0], {}, where)
    }

    utils, uwhere = read_tree(root, "methods/dylan/utils_math.py")
    returns = [
        n.value
        for n in ast.walk(function_named(utils, "get_examples", uwhere))
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant)
    ]
    if len(returns) != 2 or not all(isinstance(r.value, str) for r in returns):  # type: ignore[attr-defined]
        raise ImportFailure(f"{uwhere}: expected the simple and the complex examples (two texts)")
    examples = escape(returns[1].value)  # type: ignore[attr-defined]  # the else branch: complex
    prepare = function_named(tree, "_prepare_question", where)
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
        body = function_named(tree, func, where)
        head = assigned(body, "prefix_string")
        closing = augmented(body, lambda t: isinstance(t, ast.Name) and t.id == "prefix_string")
        item = assigned(body, "response")
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
    raw = source_bytes(root, rel)  # bounded as the .py files are
    try:
        roles = (yaml.load(raw.decode("utf-8"), Loader=bounded_yaml_loader()) or {}).get("roles")  # noqa: S506
    except YamlRefused as exc:
        raise ImportFailure(f"{rel}: {exc}") from None
    except (UnicodeDecodeError, yaml.YAMLError, AttributeError, RecursionError):
        raise ImportFailure(f"{root} has no readable {rel}") from None
    if not isinstance(roles, list) or not roles or len(set(roles)) != 1 or not isinstance(roles[0], str):
        raise ImportFailure("methods/dylan/configs/config_main.yaml: expected one role for every agent")
    tree, where = read_tree(root, "methods/dylan/dylan_main.py")
    maps = [
        n.value for n in ast.walk(function_named(tree, "_get_role_map", where)) if isinstance(n, ast.Return)
    ]
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
        body = function_named(tree, func, where)
        steps = assigned(body, "prefix_string")
        item = assigned(body, "response")
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
        imported.update(shielded(step, root))
    if has_judge(root):  # a later MASLab than 4ecccf5: its LLM judge's prompt (importers.maslab_judge)
        imported.update(shielded(maslab_judge, root))
    return make_pack(
        "maslab",
        MASLAB_REPO,
        root,
        imported,
        "MASLab's prompt text (MAD, AutoGen, llm_debate, DyLAN, AgentVerse, MacNet, the GPQA/AIME "
        "queries, the LLM judge's prompt where the checkout has it), imported from a "
        "local checkout; every other template is the pack 'ours'.",
    )
