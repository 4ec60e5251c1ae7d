"""How a task words its prompts: the templates of a prompt pack, in one of two styles.

`ours` (default): the question followed by the task's answer format (math: reason step by step
and box the answer; GPQA: the options as "A) ..." lines, then a final "Answer: X" line).
`bare` (`--task-prompt bare`): the question as the references send it, with no answer format
(GPQA: the options as "(A) ..." lines, as MASLab's dataset builder writes them); the task's
`answer_format` is then empty, so the systems add none either, and scoring relies on the
answer extraction rules alone (mars_eval.tasks.extract, mars_eval.tasks.choice).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mars_eval.models.base import ConfigError
from mars_eval.prompts import PromptPack, load_pack

TASK_PROMPTS = ("ours", "bare")  # the first is the default


def check_task_prompt(style: str) -> str:
    if style not in TASK_PROMPTS:
        raise ConfigError(f"unknown --task-prompt {style!r}; choose one of: {', '.join(TASK_PROMPTS)}")
    return style


def is_bare(task: object) -> bool:
    """Whether a task words its prompts `bare` (the question as the references send it)."""
    prompts = getattr(task, "prompts", None)
    return isinstance(prompts, TaskPrompts) and prompts.bare


@dataclass
class TaskPrompts:
    """A pack's task templates in one style."""

    pack: PromptPack = field(default_factory=load_pack)
    style: str = "ours"

    def __post_init__(self) -> None:
        check_task_prompt(self.style)

    @property
    def bare(self) -> bool:
        return self.style == "bare"

    def math_format(self) -> str:
        return "" if self.bare else self.pack.render("tasks.math.format")

    def math(self, question: str) -> str:
        """The prompt of a math problem (its bare text under `bare`, whitespace as the data holds
        it: MASLab sends the query as is)."""
        if self.bare:
            return self.pack.render("tasks.math.bare", question=question)
        return self.pack.render("tasks.math.prompt", question=question.strip(), format=self.math_format())

    def gpqa_format(self) -> str:
        return "" if self.bare else self.pack.render("tasks.gpqa.format")

    def gpqa(self, question: str, options: list[str], letters: str) -> tuple[str, str]:
        """(the prompt, the question with its options and no answer format) of a GPQA item."""
        question = question if self.bare else question.strip()  # bare: as the data holds it
        key = "tasks.gpqa.bare_option" if self.bare else "tasks.gpqa.option"
        lines = "\n".join(self.pack.render(key, letter=letters[i], option=o) for i, o in enumerate(options))
        if self.bare:
            body = self.pack.render("tasks.gpqa.bare", question=question, options=lines)
            return body, body
        body = self.pack.render("tasks.gpqa.body", question=question, options=lines)
        return self.pack.render("tasks.gpqa.prompt", body=body, format=self.gpqa_format()), body
