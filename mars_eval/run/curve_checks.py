"""The checks of a transfer curve's settings, wherever they come from: a training run's
run_config.json, `mars-eval curve`'s flags and `--mas` TOML file, mars-train's own settings,
and each checkpoint's mars_eval.json.

Each value is checked by the declaration of the flag that takes it elsewhere (`Setting.check`:
`--limit`, `--samples`, `--seed`, `--max-tokens`, `--temperature`, `--thinking` of run.options,
`--episodes` of `games`), named where it was found ("run_config.json: mas_eval[1].limit must be
at least 1 (got -5)"), so a value the command line would refuse is refused here too, in one line
(ConfigError, exit 2), before any model loads or any call is sent. JSON's 1e400 (infinity) or a
string where a number goes is such a value.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.models.settings import Setting
from mars_eval.paths import path_problem, shown_path

MAX_TOML_BYTES = 1024 * 1024  # a `--mas` TOML file: a few tables

# Settings of run_config.json the curve reads that no run option declares.
_LIMIT_OF_ALL = Setting("mas_eval_limit", int, 0, "Problems of each SYSTEM:TASK entry (0: all)", low=0)


def checked(option: str | Setting, value: Any, where: str) -> Any:
    """`value` (None: not given) checked by the run option named `option` (or `option` itself),
    its message naming `where` in place of the flag."""
    if isinstance(option, str):
        from mars_eval.run.options import BY_NAME

        option = BY_NAME[option]
    return dataclasses.replace(option, flag=where).check(value, from_text=False)


def limit_of_all(value: Any, where: str) -> int | None:
    """`mas_eval_limit` (0: every problem) as None for all, else at least 1."""
    return checked(_LIMIT_OF_ALL, value, where) or None


def entry_limit(value: Any, where: str) -> int | None:
    """A MAS entry's `limit`: None or 0 for every problem, else as `--limit` (at least 1)."""
    return None if value in (None, 0) and not isinstance(value, bool) else checked("limit", value, where)


def names(value: Any, where: str) -> tuple[str, ...]:
    """Names given as comma-separated text or a list of texts (games)."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    if not isinstance(value, list | tuple) or not all(isinstance(n, str) for n in value):
        raise ConfigError(f"{where} must be names (text, or a list of texts), got {_shown(value)}")
    return tuple(n.strip() for n in value if n.strip())


def text(value: Any, where: str, *, path: bool = False) -> str | None:
    """None, or text (a path: one that can be a path on this system)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be text, got {_shown(value)}")
    if path and (problem := path_problem(value)) is not None:
        raise ConfigError(f"{where} {shown_path(value)} {problem}")
    return value


def options(value: Any, where: str) -> dict[str, Any]:
    """A MAS entry's system or task options: a table (None: none)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"{where} must be a table of options, got {_shown(value)}")
    return dict(value)


def checkpoint_settings(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A checkpoint's mars_eval.json, each setting it ships checked as the flag it stands for
    (thinking, temperature, max_tokens, prompts, prompt_style); other keys are kept as they are."""
    for name in ("thinking", "temperature", "max_tokens"):
        checked(name, data.get(name), f"{where}: {name}")
    text(data.get("prompts"), f"{where}: prompts", path=True)
    text(data.get("prompt_style"), f"{where}: prompt_style")
    return data


def read_toml(path: Path, flag: str) -> dict[str, Any]:
    """A `--mas` TOML file within bounds: at most `MAX_TOML_BYTES`, UTF-8, TOML."""
    import tomllib

    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_TOML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{flag} {shown_path(str(path))}: cannot read it ({exc.strerror or exc})") from None
    where = f"{flag} {shown_path(str(path))}"
    if len(raw) > MAX_TOML_BYTES:
        raise ConfigError(f"{where} is larger than {MAX_TOML_BYTES >> 20} MiB: not a settings file")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{where} is not UTF-8 text") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        reason = str(exc).splitlines()[0][:120] if isinstance(exc, ValueError) else "nested too deep"
        raise ConfigError(f"{where} does not parse: {reason}") from None


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def text_of(value: Any) -> str:
    """`value` as a short repr for a message."""
    return _shown(value)
