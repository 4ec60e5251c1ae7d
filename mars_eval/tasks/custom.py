"""`custom`: a task from the user's own file, with the built-in tasks' prompts and scorers.

    mars-eval mas --task custom --data-files F [--question-field Q] [--answer-field A]
      [--id-field I] [--choices-field C] [--answer-type math|choice|exact]

The file is read as `--data-files` always is (JSON, JSONL, CSV, Parquet). Fields: the question
(default `question`, else `problem`), the gold answer (`answer`), the problem id (`id`; a row
without one gets a hash of its question), and for multiple choice the options (no default).

A task file (`--task FILE.yaml`, `mars_eval.tasks.task_file`) gives the same settings as keys,
plus `question_template`: the question built from a row's columns (`{column}` placeholders,
lm-eval's doc_to_text), in place of the question column.

Prompts come from the prompt pack (`--prompts`: tasks.math for math, tasks.custom for exact and
choice) in the `--task-prompt` style: `ours` adds the answer format, `bare` sends the question (with
its lettered options for choice) alone.

Answer types, each the same prompt, extraction and scoring as a built-in task:
- math (default): the math tasks' prompt and `\\boxed{}` answer, scored by math-verify;
- choice: options shown as lettered lines and a final "Answer: X" line, as GPQA; the gold may
  be the letter or the correct option's text; options are a list, a JSON list, or text with one
  option per line; shown in the file's order (no shuffle);
- exact: the final answer within `\\boxed{}` (or after "the answer is"), compared with the gold
  as text, ignoring case, surrounding spaces, a final period and surrounding quotes ("Madrid"
  or 'Madrid' is Madrid).
"""

from __future__ import annotations

import json
import math
import re
import string
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.tasks.base import Problem
from mars_eval.tasks.choice import extract_choice_letter
from mars_eval.tasks.extract import extract_math_answer
from mars_eval.tasks.loading import HubDataset, load_rows
from mars_eval.tasks.math_scoring import MAX_INT_DIGITS, MathScorer, canonical_math, default_scorer
from mars_eval.tasks.math_tasks import text_id
from mars_eval.tasks.prompting import TaskPrompts
from mars_eval.tasks.registry import ANSWER_TYPES, register_task

ALL_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
FIELDS = ("question_field", "answer_field", "id_field", "choices_field", "answer_type")
OPTIONS = (*FIELDS, "question_template", "name")  # what make_task("custom", ...) takes
NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,47}")
NAME_RULE = "1 to 48 lower-case letters, digits, '-' or '_', starting with a letter"


def check_task_name(name: str) -> str:
    """A custom task's name (a task file's `name`): what its run folders, identity, report
    columns and suite cells are called. ConfigError (one line) for a name that is not
    identifier-like, or that a built-in task or alias already has."""
    from mars_eval.tasks.registry import canonical, task_names

    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ConfigError(f"name {name!r} is not a task name ({NAME_RULE})")
    if name in task_names() or canonical(name) != name:
        raise ConfigError(f"name {name!r} is a built-in task's name or alias; choose another")
    return name


def template_columns(template: str) -> list[str]:
    """The columns a question template names, in order; ConfigError for a malformed template
    or a placeholder that is not a plain column name ("{a.b}", "{0}", "{x!r}", "{}")."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(f"question_template: {exc}") from None
    columns: list[str] = []
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if not name.strip() or name.isdigit() or any(c in name for c in ".[]") or spec or conversion:
            raise ConfigError(
                f"question_template: placeholder {{{name}}} is not a column name "
                "(write {column}; {{ and }} are literal braces)"
            )
        columns.append(name)
    if not columns:
        raise ConfigError("question_template names no column (write {column} where its text goes)")
    return list(dict.fromkeys(columns))


def _options(value: Any) -> list[str] | None:
    """A row's options: a list, a JSON list in text, or text with one option per line."""
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value]
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):
                return [str(v).strip() for v in parsed]
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return lines or None
    return None


def _cell_text(value: Any, column: str, what: str, place: str) -> str:
    """A row's cell as the text sent or scored; ConfigError (naming the file and row) for a
    null, a nested value (a JSON object or list) or an empty text, which would otherwise be sent
    as the text "None" or "{'a': 1}", or scored against it."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(f"{place}: the {what} ({column!r}) is missing or null")
    if isinstance(value, dict | list | tuple | set):
        kind = "an object" if isinstance(value, dict) else "a list"
        raise ConfigError(f"{place}: the {what} ({column!r}) is {kind}, not text: {str(value)[:40]!r}")
    text = str(value).strip()
    if not text:
        raise ConfigError(f"{place}: the {what} ({column!r}) is empty")
    return text


# Quote pairs that may surround an exact answer ("Madrid", 'Madrid', “Madrid”, `Madrid`).
_QUOTES = (('"', '"'), ("'", "'"), ("\u201c", "\u201d"), ("\u2018", "\u2019"), ("`", "`"))


def _exact_key(text: str) -> str:
    """An exact answer as compared: surrounding spaces, a final period and surrounding quotes
    (a matching pair, any number of times, in any order) dropped, spaces collapsed, case folded."""
    key = text.strip()
    while True:
        before = key
        key = key.rstrip(".").strip()
        for left, right in _QUOTES:
            if len(key) >= 2 and key.startswith(left) and key.endswith(right):
                key = key[1:-1].strip()
        if key == before:
            break
    return re.sub(r"\s+", " ", key).casefold()


class CustomTask:
    """A task over a user's file (see the module docstring); `name` is "custom" for the flags,
    a task file's own name for a task file."""

    name = "custom"

    def __init__(
        self,
        question_field: str | None = None,
        answer_field: str | None = None,
        id_field: str | None = None,
        choices_field: str | None = None,
        answer_type: str | None = None,
        question_template: str | None = None,
        scorer: MathScorer | None = None,
        prompts: TaskPrompts | None = None,
        data_files: str | None = None,
        name: str | None = None,
    ) -> None:
        # "custom" (the flags) or a task file's own name: what its runs are called
        self.name = check_task_name(name) if name is not None else "custom"
        self.prompts = prompts or TaskPrompts()
        self.answer_type = answer_type or "math"
        if self.answer_type not in ANSWER_TYPES:
            allowed = ", ".join(ANSWER_TYPES)
            raise ConfigError(f"--answer-type must be one of: {allowed} (got {answer_type!r})")
        if self.answer_type == "choice" and not choices_field:
            raise ConfigError("--answer-type choice needs --choices-field (the column holding the options)")
        if choices_field and self.answer_type != "choice":
            raise ConfigError("--choices-field is used with --answer-type choice only")
        if question_template is not None and question_field:
            raise ConfigError("give question_template or --question-field, not both")
        self.template_columns = template_columns(question_template) if question_template is not None else []
        self.question_template = question_template
        self.question_field = question_field
        self.data_files = data_files  # read when `load` is given none (a task file's own)
        self.answer_field = answer_field or "answer"
        self.id_field = id_field or "id"
        self.choices_field = choices_field
        self.letters = "ABCD"
        self._scorer = scorer

    @property
    def options(self) -> dict[str, Any]:
        """What of the task's settings decides results (part of a run's identity)."""
        return {"answer_type": self.answer_type}

    @property
    def answer_format(self) -> str:
        """The format instruction a prompt ends with ("" under `--task-prompt bare`)."""
        if self.answer_type == "math":
            return self.prompts.math_format()
        if self.prompts.bare:
            return ""
        if self.answer_type == "exact":
            return self.prompts.pack.render("tasks.custom.exact_format")
        letters = self.letters
        listed = ", ".join(letters[:-1]) + f" or {letters[-1]}" if len(letters) > 1 else letters
        return self.prompts.pack.render("tasks.custom.choice_format", letters=listed)

    @property
    def choices(self) -> str | None:
        """Letters of a multiple-choice task (the summary reports their spread), else None."""
        return self.letters if self.answer_type == "choice" else None

    def load(self, data_files: str | None = None, seed: int = 0) -> list[Problem]:
        if data_files is None:
            data_files = self.data_files
        if data_files is None:
            raise ConfigError("--task custom needs --data-files FILE (JSON, JSONL, CSV or Parquet)")
        rows = load_rows(HubDataset(repo="", split="", columns=()), self.name, data_files)
        found = list(rows[0])
        question = self.question_field or next((c for c in ("question", "problem") if c in found), None)
        needed: list[tuple[str, str | None]] = [("--answer-field", self.answer_field)]
        if self.template_columns:
            needed += [("question_template", c) for c in self.template_columns]
        else:
            needed.append(("--question-field", question))
        if self.choices_field:
            needed.append(("--choices-field", self.choices_field))
        for flag, column in needed:
            if column is None or column not in found:
                what = column or "question or problem"
                raise ConfigError(
                    f"--data-files {data_files}: no column {what!r} ({flag}); found {', '.join(found)}"
                )
        problems = [self._problem(row, question, i, data_files) for i, row in enumerate(rows, 1)]
        if self.answer_type == "choice":
            most = max(len(p.meta["options"]) for p in problems)
            self.letters = ALL_LETTERS[:most]
            if not self.prompts.bare:  # every prompt ends with the same instruction (all letters in use)
                for p in problems:
                    p.prompt = self.prompts.pack.render(
                        "tasks.custom.choice", body=p.question, format=self.answer_format
                    )
        return problems

    def _question(self, row: dict[str, Any], question_field: str | None, place: str) -> str:
        if self.question_template is None:
            return _cell_text(row.get(question_field or ""), question_field or "", "question", place)
        values = {
            c: _cell_text(row.get(c), c, "question_template column", place) for c in self.template_columns
        }
        return self.question_template.format_map(values).strip()

    def _problem(self, row: dict[str, Any], question_field: str | None, number: int, where: str) -> Problem:
        raw_id = row.get(self.id_field)
        if isinstance(raw_id, dict | list | tuple | set):
            raise ConfigError(f"--data-files {where}: row {number}: the id ({self.id_field!r}) is not text")
        pid = str(raw_id).strip() if raw_id is not None else ""
        place = f"--data-files {where}: row {number}" + (f" ({pid[:60]})" if pid else "")
        question = self._question(row, question_field, place)
        pid = pid or text_id("custom", question)
        gold = _cell_text(row.get(self.answer_field), self.answer_field, "answer", place)
        if self.answer_type == "math":
            if re.search(rf"\d{{{MAX_INT_DIGITS + 1},}}", gold):
                # the math checker (sympy) converts numbers with int(), which refuses longer ones
                raise ConfigError(
                    f"--data-files {where}: row {number} ({pid}): the answer has a number over "
                    f"{MAX_INT_DIGITS} digits (the longest a math answer may hold)"
                )
            return Problem(pid, self.prompts.math(question), gold, question)
        if self.answer_type == "exact":
            if self.prompts.bare:
                return Problem(
                    pid,
                    self.prompts.pack.render("tasks.custom.exact_bare", question=question),
                    gold,
                    question,
                )
            prompt = self.prompts.pack.render(
                "tasks.custom.exact", question=question, format=self.answer_format
            )
            return Problem(pid, prompt, gold, question)
        cell = row.get(self.choices_field)
        if isinstance(cell, list | tuple) and not all(
            isinstance(v, str | int | float) and not isinstance(v, bool) and str(v).strip() for v in cell
        ):
            raise ConfigError(f"{place}: every option in {self.choices_field!r} must be a non-empty text")
        options = _options(cell)
        if not options or len(options) < 2 or len(options) > len(ALL_LETTERS):
            raise ConfigError(
                f"--data-files {where}: row {number} ({pid}) needs 2 to 26 options in {self.choices_field!r}"
            )
        letters = ALL_LETTERS[: len(options)]
        if len(gold) == 1 and gold.upper() in letters:
            letter = gold.upper()
        elif gold in options:
            letter = letters[options.index(gold)]
        else:
            raise ConfigError(
                f"--data-files {where}: row {number} ({pid}): the answer {gold[:40]!r} is neither a "
                f"letter {letters[0]}-{letters[-1]} nor one of the options"
            )
        pack = self.prompts.pack
        lines = "\n".join(
            pack.render("tasks.custom.choice_option", letter=letters[i], option=o)
            for i, o in enumerate(options)
        )
        body = pack.render("tasks.custom.choice_body", question=question, options=lines)
        return Problem(pid, body, letter, body, meta={"options": options})

    @property
    def scorer(self) -> MathScorer:
        return self._scorer if self._scorer is not None else default_scorer()

    def extract(self, text: str) -> str | None:
        if self.answer_type == "choice":
            return extract_choice_letter(text, self.letters)
        return extract_math_answer(text)

    def canonical(self, answer: str) -> str:
        if self.answer_type == "math":
            return canonical_math(answer)
        if self.answer_type == "exact":
            return _exact_key(answer)
        letter = extract_choice_letter(answer, self.letters)
        return letter if letter is not None else answer.strip().upper()

    def score(self, answer: str | None, gold: str) -> bool:
        if answer is None or not answer.strip():
            return False
        if self.answer_type == "math":
            return self.scorer.equivalent(gold, answer)
        want = gold.strip().upper() if self.answer_type == "choice" else _exact_key(gold)
        return self.canonical(answer) == want

    def quick_score(self, answer: str | None, gold: str) -> bool | None:
        if answer is None or not answer.strip():
            return False
        if self.answer_type == "math":
            return MathScorer.quick_equivalent(gold, answer)
        return self.score(answer, gold)  # text comparisons: never block


@register_task(
    "custom",
    source="--data-files",
    answer_type="math/choice/exact",
    help="your own file: --data-files F [--question-field Q --answer-field A --answer-type T], "
    "or --task FILE.yaml",
    options=OPTIONS,
)
def custom_task(prompts: TaskPrompts | None = None, **options: Any) -> CustomTask:
    return CustomTask(**options, prompts=prompts)


def scoring_task(name: str, answer_type: str | None) -> CustomTask:
    """The custom task a finished run is read with (`report`: extraction, agreement, scoring),
    from what its config.json records: the task's name and answer type; it loads no data."""
    kind = answer_type if answer_type in ANSWER_TYPES else "math"
    choices = "options" if kind == "choice" else None  # a choice task's options column: never read here
    task = CustomTask(answer_type=kind, choices_field=choices)
    task.name = name  # as recorded
    return task
