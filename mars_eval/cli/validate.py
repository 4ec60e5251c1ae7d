"""Checks of command-line input that run before any work (no model load, no dataset, no call).

Every check raises `ConfigError` with one line naming the flag, which the CLIs print and turn
into exit code 2. They exist so that a typo costs a second, not a model load followed by a
traceback (an `--output` that is a file), or a hang (`--concurrency -1`). Values that came from
outside (paths, URLs, model names) are quoted with `repr`, so escape codes in them cannot reach
the terminal.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from mars_eval.models.base import ConfigError
from mars_eval.paths import check_path, path_problem, shown_path

# Files that make a folder a Hugging Face checkpoint (transformers and vLLM read these).
_WEIGHT_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "*.pt", "*.gguf")

# What `mars-train` leaves in its --output folder (any one of them marks a run it made).
TRAIN_MARKERS = ("checkpoints", "metrics.jsonl", "warmstart.json", "base")


def at_least(flag: str, value: int | float | None, minimum: int | float) -> None:
    """`value` (None: not given) must be >= minimum."""
    if value is not None and value < minimum:
        raise ConfigError(f"{flag} must be at least {minimum} (got {value})")


def check_base_url(url: str) -> None:
    """An http(s) URL with a host and no user:password (keys go in OPENAI_API_KEY, and a URL is
    printed and stored in run folders)."""
    try:
        parts = urlsplit(url.strip())
        _ = parts.port  # raises ValueError on a port that is not a number
    except ValueError:
        raise ConfigError(f"--base-url {url!r} is not a valid URL") from None
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            "--base-url must not hold user:password (it would be printed and stored); "
            "put the API key in OPENAI_API_KEY"
        )
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--base-url {url!r} is not an http(s) URL, e.g. http://127.0.0.1:8000/v1")


def check_base_urls(urls: list[str] | None) -> None:
    for url in urls or []:
        check_base_url(url)


def check_output_dir(path: str, flag: str = "--output") -> None:
    """`path` is a folder we can write in, or one we can create: a file in the way, or a parent
    that is a file or read-only, is found here rather than after the model has loaded."""
    check_path(path, flag, "output_dir")


def check_train_output(path: str) -> None:
    """mars-train's --output: creatable, and either new, empty, or a folder mars-train made (it
    writes checkpoints there and, with --resume, continues what it finds)."""
    check_output_dir(path)
    target = Path(path).expanduser()
    if not target.is_dir():
        return
    entries = {p.name for p in target.iterdir()}
    if entries and not entries.intersection(TRAIN_MARKERS):
        raise ConfigError(
            f"--output {path!r} is an existing folder that mars-train did not make "
            "(no checkpoints/ or metrics.jsonl); choose a new or empty folder"
        )


def looks_like_path(model: str) -> bool:
    """Is `--model` meant as a local folder rather than a hub id ("org/name", or a bare legacy
    name such as "gpt2")?"""
    if model.startswith((".", "/", "~")) or model.endswith("/") or model.count("/") > 1:
        return True
    if "/" not in model:
        return False
    first = model.split("/", 1)[0]
    return Path(first).is_dir()  # "results/tinyy": a folder under an existing local one


def check_model_folder(model: str | None) -> None:
    """An in-process `--model` that names a local folder must exist and hold a checkpoint.

    Without this, a missing folder is taken for a hub id (tens of seconds offline, then a hub
    error) and a folder without config.json fails inside transformers with a half message.
    """
    if not model:
        return
    from mars_eval.models.pull import resolve_model

    problem = path_problem(model)
    if problem is not None:
        raise ConfigError(f"--model {shown_path(model)} {problem}")
    model = resolve_model(model)  # a registry name: its pulled folder (unpulled: names the pull command)
    path = Path(model).expanduser()
    if not path.exists():
        if looks_like_path(model):
            raise ConfigError(f"--model {model!r}: no such model folder")
        from mars_eval.models.hub import check_hub_model, model_cached
        from mars_eval.models.pull import did_you_mean

        hint = did_you_mean(model) if "/" not in model else ""
        if hint and not model_cached(model):  # a typo of a named model, not a hub id
            raise ConfigError(f"--model {model!r} is no named model, local folder or hub id{hint}")

        check_hub_model(model)  # a hub id: cached, or the hub reachable (else one line now)
        return
    if not path.is_dir():
        raise ConfigError(f"--model {model!r} is a file; give the checkpoint folder")
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"--model {model!r}: folder holds no model (no config.json; a Hugging Face checkpoint "
            "folder has config.json, tokenizer files and weights)"
        )
    if not any(next(path.glob(pattern), None) for pattern in _WEIGHT_PATTERNS):
        raise ConfigError(
            f"--model {model!r}: folder holds no model weights (no *.safetensors or pytorch_model*.bin)"
        )


def check_model_and_output(base_urls: list[str] | None, model: str | None, output: str) -> None:
    """--base-url values, the in-process --model folder (not checked when served: then it is a
    served name) and --output."""
    check_base_urls(base_urls)
    if not base_urls:
        check_model_folder(model)
    check_output_dir(output)


def check_task_paths(task: str, data_files: str | None) -> None:
    """A task file (`--task FILE.yaml`) is a readable file; `--data-files` can be a path at all
    (its reader says whether it is a file, `tasks.loading`)."""
    from mars_eval.tasks.task_file import is_task_file

    if is_task_file(task):
        check_path(task, "--task", "file")
    if data_files is not None and (problem := path_problem(data_files)) is not None:
        raise ConfigError(f"--data-files {shown_path(data_files)} {problem}")


def check_choice(flag: str, value: str, choices: tuple[str, ...]) -> None:
    """A flag that takes one of a few names (a typo must not silently pick the default path)."""
    if value not in choices:
        raise ConfigError(f"unknown {flag} {value!r}; choose one of: {', '.join(choices)}")
