"""`--task FILE.yaml`: a task file, the file form of `--task custom`'s flags.

    # capitals.yaml
    name: capitals                 # optional: the file's stem by default
    data_files: capitals.jsonl     # relative to this file's folder
    question_field: q              # or question_template: "Name the capital of {country}."
    answer_field: gold
    id_field: qid
    answer_type: exact             # math (default), choice (with choices_field) or exact

Keys are the flags' names with underscores (`data_files`, `question_field`, `answer_field`,
`id_field`, `choices_field`, `answer_type`) plus `question_template`, the question built from a
row's columns (`tasks.custom`), and `name`. `--data-files` fills in a file without `data_files`.

The task's name (`name`, default the file's stem; `custom.check_task_name`) is what its runs are
called: the task in the run's identity and folder name, the report's column, the suite's cell,
so two task files are two tasks. A run folder made before names by the same settings (task
`custom`) is renamed to the named one on its first run (`run.config.open_run`).

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
KEYS = ("name", "data_files", *TASK_OPTIONS)


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
    name: str = "custom"  # the task's name (`name`, else the file's stem): also options["name"]


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
    from mars_eval.tasks.custom import check_task_name

    name = data["name"].strip() if "name" in data else path.stem
    try:
        check_task_name(name)
    except ConfigError as exc:
        hint = "" if "name" in data else " (the file's name; set `name:` in it)"
        raise ConfigError(f"{where}: {exc}{hint}") from None
    return TaskFile(path, data_files, {**options, "name": name}, name)


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
    """(task, data files, custom-task options) with a task file replaced by its name, its data
    and its settings (the name among them); a task name comes back unchanged. Flags that the
    file sets are refused."""
    if not is_task_file(task):
        return task, data_files, task_options
    _refuse_flags(task, dict(task_options or {}))
    spec = read_task_file(task)
    _build(task, spec)  # a bad setting is named in the file's terms
    if spec.data_files is not None and data_files is not None:
        raise ConfigError(f"--data-files: task file {task} names its data_files; give one of the two")
    if spec.data_files is None and data_files is None:
        raise ConfigError(f"task file {task} names no data_files; add it or give --data-files")
    return spec.name, spec.data_files or data_files, dict(spec.options)


@dataclass(frozen=True)
class SuiteTasks:
    """`suite --task` values with each task file replaced by its name."""

    tasks: list[str]  # in the order given, duplicates kept (the caller makes names canonical)
    named: tuple[str, ...] = ()  # the task files' names
    data_files: dict[str, str | None] = field(default_factory=dict)  # a task file's own data, by name
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom tasks' settings, by name


def expand_suite_tasks(tasks: list[str], task_options: dict[str, Any] | None) -> SuiteTasks:
    """The suite's tasks, each task file by its name with its settings and data; the custom-task
    flags (`task_options`) are `--task custom`'s, refused when only task files would take them.
    Two different task files of one name are refused (one line: give one a `name:`)."""
    files = [t for t in tasks if is_task_file(t)]
    flags = dict(task_options or {})
    if not files:
        return SuiteTasks(list(tasks), options={"custom": flags} if flags else {})
    from mars_eval.tasks.registry import canonical

    if flags and not any(canonical(t) == "custom" for t in tasks if not is_task_file(t)):
        _refuse_flags(files[0], flags)
    specs: dict[str, TaskFile] = {}
    out = []
    for value in tasks:
        if not is_task_file(value):
            out.append(value)
            continue
        spec = read_task_file(value)
        _build(value, spec)  # a bad setting: one line before any work
        other = specs.get(spec.name)
        if other is not None and other.path.resolve() != spec.path.resolve():
            raise ConfigError(
                f"task files {other.path} and {spec.path} are both named {spec.name!r}; "
                "give one of them another `name:`"
            )
        specs[spec.name] = spec
        out.append(spec.name)
    options: dict[str, dict[str, Any]] = {name: dict(spec.options) for name, spec in specs.items()}
    if flags:
        options["custom"] = flags
    data = {name: spec.data_files for name, spec in specs.items()}
    return SuiteTasks(out, tuple(specs), data, options)
