"""Record the parts of vLLM's API that mars-eval and mars-train call, from a vLLM wheel's sources.

    python scripts/record_vllm_api.py vllm-0.33.0-...whl > tests/data/vllm_api.json

Reads the sources inside the wheel (a zip) with `ast`, imports nothing, so it runs on a machine
without a GPU: for each method we call, whether it is `def` or `async def` and whether it yields
(an async generator), its parameter names, how many of them can be passed by position and which
have no default; for each record we build or read (EngineArgs, SamplingParams, TokensPrompt,
RequestOutput, CompletionOutput, ModelConfig), its field names (inherited ones and those `__init__`
assigns to `self` included); for each enum we use (RequestOutputKind), its members and module; for
each attribute we follow (`LLM.llm_engine`, `LLMEngine.model_config`, `VllmConfig.model_config`),
the expression `__init__` assigns it (or the field's annotation), which names its class. The
table is what tests/models/test_vllm_api.py checks our calls against when vllm is not installed;
where it is, the test reads the installed package instead (`table` on its sources, and `inspect`).
`pip download vllm==X --no-deps` fetches a wheel.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from collections.abc import Callable
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
    # `LLM.llm_engine` (rollout_schedule=async streams through it, as `LLM.generate` does)
    ("vllm/v1/engine/llm_engine.py", "LLMEngine", "add_request"),
    ("vllm/v1/engine/llm_engine.py", "LLMEngine", "step"),
    ("vllm/v1/engine/llm_engine.py", "LLMEngine", "has_unfinished_requests"),
    ("vllm/v1/engine/llm_engine.py", "LLMEngine", "abort_request"),
)
# (file, class, its base in the same file or None): the records whose fields we pass or read by name
RECORDS = (
    ("vllm/engine/arg_utils.py", "EngineArgs", None),
    ("vllm/engine/arg_utils.py", "AsyncEngineArgs", "EngineArgs"),
    ("vllm/sampling_params.py", "SamplingParams", None),
    ("vllm/inputs/llm.py", "TokensPrompt", "_PromptOptions"),
    # the outputs we read (`LLM.generate`, `LLMEngine.step`, `AsyncLLM.generate`)
    ("vllm/outputs.py", "RequestOutput", None),
    ("vllm/outputs.py", "CompletionOutput", None),
    ("vllm/logprobs.py", "Logprob", None),
    ("vllm/config/model.py", "ModelConfig", None),  # `max_model_len` (training/curve_engine.py)
)
# (file, enum): the enums whose members we use (`SamplingParams.output_kind = FINAL_ONLY`)
ENUMS = (("vllm/sampling_params.py", "RequestOutputKind"),)
# (file, class, attribute): what `__init__` assigns `self.attribute` (or a field's annotation)
ATTRIBUTES = (
    ("vllm/entrypoints/llm.py", "LLM", "llm_engine"),
    ("vllm/v1/engine/llm_engine.py", "LLMEngine", "model_config"),
    ("vllm/config/vllm.py", "VllmConfig", "model_config"),
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
            positional = [*args.posonlyargs, *args.args]
            defaulted = positional[len(positional) - len(args.defaults) :] + [
                a for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
            ]
            required = [a.arg for a in (*positional[1:], *args.kwonlyargs) if a not in defaulted]
            return {
                "kind": kind,
                "params": names,
                "positional": len(positional),  # self / cls included, as in `params`
                "required": required,  # besides self / cls
                "varkw": args.kwarg is not None,
            }
    raise KeyError(f"{cls.name}.{name} not found")


def _self_assigned(cls: ast.ClassDef) -> dict[str, str]:
    """Attribute -> the expression `__init__` assigns `self.attribute` (its first assignment)."""
    out: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for n in ast.walk(node):
                pairs = (
                    [(t, n.value) for t in n.targets]
                    if isinstance(n, ast.Assign)
                    else [(n.target, n.value)]
                    if isinstance(n, ast.AnnAssign) and n.value is not None
                    else []
                )
                for target, value in pairs:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        out.setdefault(target.attr, ast.unparse(value))
    return out


def _annotated(cls: ast.ClassDef) -> dict[str, str]:
    """Field -> its annotation, for the class-level annotated fields."""
    return {
        n.target.id: ast.unparse(n.annotation)
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }


def _fields(cls: ast.ClassDef) -> list[str]:
    return [*_annotated(cls), *_self_assigned(cls)]


def _members(cls: ast.ClassDef) -> list[str]:
    return [t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]


def table(read: Callable[[str], str]) -> dict[str, Any]:
    """Methods, records, enums and attributes from the sources `read(path in the wheel)` gives
    (a wheel's or an installed package's)."""
    out: dict[str, Any] = {"methods": {}, "records": {}, "enums": {}, "attributes": {}}
    trees: dict[str, ast.Module] = {}

    def classes(path: str) -> dict[str, ast.ClassDef]:
        if path not in trees:
            trees[path] = ast.parse(read(path))
        return _classes(trees[path])

    for path, cls, method in METHODS:
        out["methods"][f"{cls}.{method}"] = _method(classes(path)[cls], method)
    for path, cls, base in RECORDS:
        found = classes(path)
        fields = _fields(found[cls]) + (_fields(found[base]) if base else [])
        out["records"][cls] = sorted(set(fields))
    for path, cls in ENUMS:
        module = path.removesuffix(".py").replace("/", ".")
        out["enums"][cls] = {"module": module, "members": _members(classes(path)[cls])}
    for path, cls, attr in ATTRIBUTES:
        found = classes(path)[cls]
        assigned = {**_annotated(found), **_self_assigned(found)}
        out["attributes"][f"{cls}.{attr}"] = assigned[attr]
    return out


def record(wheel: str) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as z:
        out = table(lambda path: z.read(path).decode("utf-8"))
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
    return out


if __name__ == "__main__":
    json.dump(record(sys.argv[1]), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
