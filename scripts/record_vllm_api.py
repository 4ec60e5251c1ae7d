"""Record the parts of vLLM's API that mars-eval and mars-train call, from a vLLM wheel's sources.

    python scripts/record_vllm_api.py vllm-0.33.0-...whl > tests/data/vllm_api.json

Reads the sources inside the wheel (a zip) with `ast`, imports nothing, so it runs on a machine
without a GPU: for each method we call, whether it is `def` or `async def` and whether it yields
(an async generator), and its parameter names; for each record we build (EngineArgs,
SamplingParams, TokensPrompt), its field names (inherited ones included). The table is what
tests/models/test_vllm_api.py checks our calls against when vllm is not installed; where it is,
the test inspects the installed package instead. `pip download vllm==X --no-deps` fetches a wheel.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from typing import Any

# (file in the wheel, class, method): the methods we call
METHODS = (
    ("vllm/v1/engine/async_llm.py", "AsyncLLM", "from_engine_args"),
    ("vllm/v1/engine/async_llm.py", "AsyncLLM", "get_tokenizer"),
    ("vllm/v1/engine/async_llm.py", "AsyncLLM", "generate"),
    ("vllm/v1/engine/async_llm.py", "AsyncLLM", "shutdown"),
    ("vllm/entrypoints/llm.py", "LLM", "__init__"),
    ("vllm/entrypoints/llm.py", "LLM", "generate"),
    ("vllm/entrypoints/llm.py", "LLM", "collective_rpc"),
    ("vllm/entrypoints/llm.py", "LLM", "reset_prefix_cache"),
    ("vllm/entrypoints/llm.py", "LLM", "sleep"),
    ("vllm/entrypoints/llm.py", "LLM", "wake_up"),
)
# (file, class, its base in the same file or None): the records whose fields we pass by name
RECORDS = (
    ("vllm/engine/arg_utils.py", "EngineArgs", None),
    ("vllm/engine/arg_utils.py", "AsyncEngineArgs", "EngineArgs"),
    ("vllm/sampling_params.py", "SamplingParams", None),
    ("vllm/inputs/llm.py", "TokensPrompt", "_PromptOptions"),
)


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _method(cls: ast.ClassDef, name: str) -> dict[str, Any]:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            args = node.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            yields = any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(node))
            kind = "async" if isinstance(node, ast.AsyncFunctionDef) else "sync"
            if kind == "async" and yields:
                kind = "asyncgen"
            return {"kind": kind, "params": names, "varkw": args.kwarg is not None}
    raise KeyError(f"{cls.name}.{name} not found")


def _fields(cls: ast.ClassDef) -> list[str]:
    return [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def record(wheel: str) -> dict[str, Any]:
    out: dict[str, Any] = {"methods": {}, "records": {}}
    with zipfile.ZipFile(wheel) as z:
        trees: dict[str, ast.Module] = {}

        def tree(path: str) -> ast.Module:
            if path not in trees:
                trees[path] = ast.parse(z.read(path).decode("utf-8"))
            return trees[path]

        metadata = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(metadata).decode("utf-8").splitlines()
        out["version"] = next(ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Version:"))
        # what `pip install vllm==VERSION` pins of the packages we depend on too
        out["requires"] = sorted(
            ln.split(":", 1)[1].strip()
            for ln in lines
            if ln.startswith("Requires-Dist:")
            and ln.split(":", 1)[1].strip().startswith(("torch", "transformers"))
            and "extra ==" not in ln
        )
        for path, cls, method in METHODS:
            out["methods"][f"{cls}.{method}"] = _method(_classes(tree(path))[cls], method)
        for path, cls, base in RECORDS:
            classes = _classes(tree(path))
            fields = _fields(classes[cls]) + (_fields(classes[base]) if base else [])
            out["records"][cls] = sorted(set(fields))
    return out


if __name__ == "__main__":
    json.dump(record(sys.argv[1]), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
