"""MASLab's LLM-judge prompt (xVerify-style), read from a checkout for the template `scoring.judge`.

MASLab scores with an LLM judge: `evaluations/evaluate_xverify.py` builds the judge's prompt in
`format_prompt(query, response, ground_truth)` (one f-string assigned to `prompt`) and reads the
verdict in `eval_func_xverify`: the reply stripped and lower-cased must be exactly "correct" or
"incorrect", anything else is an evaluation error (our `--judge-verdict maslab`, tasks.judge).
The f-string's fields map to our placeholders: `str(query)` -> {question}, `str(response)` ->
{response}, `str(ground_truth)` -> {gold}; another field stops the import in one line.

Checkouts from before that file existed (MASLab 4ecccf5 has no `evaluations/`) import without
it: the pack `maslab` then keeps ours' judge text, and its `source.imported` does not list
`scoring.judge` (`mars-eval prompts show maslab` says which).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from mars_eval.prompts.importers.reading import (
    ImportFailure,
    assigned,
    function_named,
    read_tree,
    template_of,
)

JUDGE_FILE = "evaluations/evaluate_xverify.py"
_FIELDS = {"str(query)": "question", "str(response)": "response", "str(ground_truth)": "gold"}
_BARE = {"query": "question", "response": "response", "ground_truth": "gold"}


def has_judge(root: Path) -> bool:
    """Whether the checkout holds MASLab's judge prompt file (a later MASLab than 4ecccf5)."""
    return (root / JUDGE_FILE).exists()


def maslab_judge(root: Path) -> dict[str, Any]:
    """{"scoring.judge": MASLab's judge prompt as our template}."""
    tree, where = read_tree(root, JUDGE_FILE)
    func = function_named(tree, "format_prompt", where)
    values = assigned(func, "prompt")
    if len(values) != 1 or not isinstance(values[0], ast.JoinedStr | ast.Constant):
        raise ImportFailure(f"{where}: expected format_prompt to build `prompt` from one f-string")
    text = template_of(values[0], {**_FIELDS, **_BARE}, where)
    if "{response}" not in text or "{gold}" not in text:
        raise ImportFailure(f"{where}: the judge prompt does not hold the response and the correct answer")
    return {"scoring.judge": text}
