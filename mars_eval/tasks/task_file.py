"""`--task FILE.yaml`: a task file, the file form of `--task custom`'s flags.

    # capitals.yaml
    data_files: capitals.jsonl     # relative to this file's folder
    question_field: q              # or question_template: "Name the capital of {country}."
    answer_field: gold
    id_field: qid
    answer_type: exact             # math (default), choice (with choices_field) or exact

Keys are the flags' names with underscores (`data_files`, `question_field`, `answer_field`,
`id_field`, `choices_field`, `answer_type`) plus `question_template`, the question built from a
row's columns (`tasks.custom`). A run of a task file is the run of the same flags: task `custom`,
the same identity (the data hash, the answer type), hence the same run folder, so either form
resumes the other's runs. `--data-files` fills in a file without `data_files`.

A task file is small and flat: at most 64 KiB, one mapping of text values, each key once, no
anchors or aliases (no expansion bombs); anything else (a repeated key too, named with its line)
is refused in one line (exit 2) before any work.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from mars_eval.models.base import ConfigError

if TYPE_CHECKING:
    from mars_eval.tasks.custom import CustomTask
    from mars_eval.tasks.prompting import TaskPrompts

MAX_BYTES = 64 * 1024
MAX_DEPTH = 2  # the mapping and its values
SUFFIXES = (".yaml", ".yml")
TASK_OPTIONS = (
    "question_field",
    "answer_field",
    "id_field",
    "choices_field",
    "answer_type",
    "question_template",
)
KEYS = ("data_files", *TASK_OPTIONS)


def is_task_file(name: str) -> bool:
    """A `--task` value naming a task file rather than a task (no task name ends so)."""
    return name.strip().lower().endswith(SUFFIXES)


class _Refused(Exception):
    pass


class _BoundedLoader(yaml.SafeLoader):
    """safe_load's loader, refusing anchors, aliases and nesting deeper than MAX_DEPTH while it
    composes (before anything is built from them)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused("anchors and aliases (& and *) are not allowed")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused("values must be text (no nested lists or mappings)")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """The mapping, refusing a key given twice (else the last one would silently win)."""
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    repeated = key in seen
                except TypeError:  # an unhashable key: refused as such by the constructor
                    continue
                if repeated:
                    raise _Refused(f"key {str(key)!r} is repeated on line {line} (first on line {seen[key]})")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class TaskFile:
    """A read and checked task file."""

    path: Path
    data_files: str | None  # resolved against the file's folder
    options: dict[str, str] = field(default_factory=dict)  # the custom task's, as make_task takes them


def read_task_file(name: str) -> TaskFile:
    """The task file `name`, checked (ConfigError, one line, for anything amiss)."""
    path = Path(name.strip()).expanduser()
    where = f"task file {name}"
    if not path.is_file():
        raise ConfigError(f"{where}: no such file" if not path.exists() else f"{where}: not a file")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read it as UTF-8 text ({type(exc).__name__})") from None
    if len(raw) > MAX_BYTES:
        limit = MAX_BYTES // 1024
        raise ConfigError(f"{where}: larger than {limit} KiB; a task file holds settings, not data")
    try:
        data = yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 (a SafeLoader, bounded)
    except _Refused as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise ConfigError(f"{where}: not valid YAML ({detail})") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{where}: must be a mapping of keys ({', '.join(KEYS)})")
    for key, value in data.items():
        if key not in KEYS:
            near = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(f"{where}: unknown key {str(key)!r}{hint}; keys: {', '.join(KEYS)}")
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {key} must be non-empty text (quote it if it looks like a number)")
    data_files = data.get("data_files")
    if data_files is not None:
        found = Path(data_files.strip()).expanduser()
        data_files = str(found if found.is_absolute() else (path.parent / found).resolve())
    options = {k: data[k] if k == "question_template" else data[k].strip() for k in TASK_OPTIONS if k in data}
    return TaskFile(path, data_files, options)


def _as_keys(message: str) -> str:
    """A custom-task message in the file's terms: its keys where it names flags."""
    for key in KEYS:
        message = message.replace("--" + key.replace("_", "-"), key)
    return message


def _refuse_flags(name: str, given: dict[str, Any]) -> None:
    if given:
        key = next(iter(given))
        raise ConfigError(f"--{key.replace('_', '-')}: {name} is a task file; set {key} in it instead")


def task_from_file(name: str, prompts: TaskPrompts, given: dict[str, Any]) -> CustomTask:
    """The custom task a task file describes (`given`: custom-task flags, refused with a file)."""
    _refuse_flags(name, given)
    return _build(name, read_task_file(name), prompts)


def _build(name: str, spec: TaskFile, prompts: TaskPrompts | None = None) -> CustomTask:
    from mars_eval.tasks.custom import CustomTask
    from mars_eval.tasks.prompting import TaskPrompts

    try:
        return CustomTask(**spec.options, prompts=prompts or TaskPrompts(), data_files=spec.data_files)
    except ConfigError as exc:
        raise ConfigError(f"task file {name}: {_as_keys(str(exc))}") from None


def as_custom(
    task: str, data_files: str | None, task_options: dict[str, Any] | None
) -> tuple[str, str | None, dict[str, Any] | None]:
    """(task, data files, custom-task options) with a task file replaced by the `--task custom`
    flags it stands for; a task name comes back unchanged. Flags that the file sets are refused."""
    if not is_task_file(task):
        return task, data_files, task_options
    _refuse_flags(task, dict(task_options or {}))
    spec = read_task_file(task)
    _build(task, spec)  # a bad setting is named in the file's terms
    if spec.data_files is not None and data_files is not None:
        raise ConfigError(f"--data-files: task file {task} names its data_files; give one of the two")
    if spec.data_files is None and data_files is None:
        raise ConfigError(f"task file {task} names no data_files; add it or give --data-files")
    return "custom", spec.data_files or data_files, dict(spec.options) or None


def expand_suite_tasks(
    tasks: list[str], data_files: list[str] | None, task_options: dict[str, Any] | None
) -> tuple[list[str], list[str] | None, dict[str, Any] | None]:
    """`suite --task` values with a task file turned into `custom`, its data files into a
    `custom=PATH` value and its settings into the custom-task options (one task file at most:
    it runs as the task custom, as the flags would)."""
    files = [t for t in tasks if is_task_file(t)]
    if not files:
        return tasks, data_files, task_options
    from mars_eval.tasks.registry import canonical

    if len(files) > 1 or any(canonical(t) == "custom" for t in tasks if not is_task_file(t)):
        raise ConfigError("a suite takes one custom task: one task file, or --task custom with its flags")
    _refuse_flags(files[0], dict(task_options or {}))
    spec = read_task_file(files[0])
    _build(files[0], spec)  # a bad setting: one line before any work
    values = list(data_files or [])
    if spec.data_files is not None:
        values.append(f"custom={spec.data_files}")
    return [("custom" if is_task_file(t) else t) for t in tasks], values or None, dict(spec.options) or None
