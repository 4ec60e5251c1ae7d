"""A `mas` run's configuration (`EvalConfig`), its identity and its run folder.

The identity is what decides results (`run.identity` says what it holds); the system's part of
it comes from the system's declaration (`System.identity_of`: every option with its default
filled in, and the protocol version), so a new option is in the identity without a line here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mars_eval.mas import default_match_system, default_system, options_for, system_class
from mars_eval.mas.system import option_specs
from mars_eval.models.base import DEFAULT_HTTP_CLIENT, SamplingParams
from mars_eval.prompts import PromptPack, load_pack
from mars_eval.run.identity import (
    IDENTITY_VERSION,
    command_hash,
    data_hash,
    model_identity,
    read_config,
    run_name,
    siblings,
    stored_differences,
)
from mars_eval.run.options import RUN_OPTIONS, later_identity
from mars_eval.run.store import LOCK_NAME, RunStore, held_lock
from mars_eval.tasks import make_task
from mars_eval.tasks.base import Problem, Task
from mars_eval.tasks.scorers import DEFAULT_SCORER
from mars_eval.tasks.task_file import as_custom


@dataclass
class EvalConfig:
    task: str
    system: str = field(default_factory=default_system)  # the system declaring `run_by_default`
    model: str | None = None
    base_urls: list[str] = field(default_factory=list)
    data_files: str | None = None
    limit: int | None = None
    samples: int = 1
    concurrency: int | None = None
    seed: int = 0
    params: SamplingParams = field(default_factory=SamplingParams)
    output: str = "results/runs"
    fresh: bool = False
    # The system options as given, by name (None or absent: the system's default). A run of
    # several systems (suite) carries them all; each system reads those it declares.
    system_options: dict[str, Any] = field(default_factory=dict)
    request_timeout: float | None = None
    max_attempts: int | None = None
    engine: str = "auto"
    dtype: str = "auto"  # --dtype (models.dtypes): what an in-process engine computes in
    kv_cache_mib: float | None = None  # --kv-cache-mib: the in-process KV budget (None: by device)
    http_client: str = DEFAULT_HTTP_CLIENT  # --http-client (models.base.HTTP_CLIENTS): how, not what
    task_options: dict[str, Any] | None = None  # the custom task's fields and answer type (tasks.custom)
    problem_ids: list[str] | None = None  # only these problems (like --limit, not in the identity)
    prompts: str | None = None  # the prompt pack: a name or a YAML file (None: "ours")
    task_prompt: str = (
        "ours"  # ours (question + answer format) or bare (the question as the references send it)
    )
    errors: str = "ours"  # --errors (run.options): ours, or maslab (MASLab's failures not scored)
    sampling: str = "qwen3"  # the sampling preset `params` was resolved from (informative; params decide)
    # a matched option left unset: the system whose finished run sets it (None: the system that
    # declares `matched_by_default`, mas.default_match_system)
    match_system: str | None = None
    match_run: str | None = None  # ... or that run's folder, named outright
    matched: dict[str, Any] | None = None  # the run this one was matched to (run.matching)
    scorer: str = "task"  # --scorer (tasks.scorers): a name or FILE.py:CLASS
    scorer_options: dict[str, Any] = field(default_factory=dict)  # its settings as given, by name
    # the scorer's identity as the run resolved it (the judge's model, prompt, sampling: set by
    # run.scoring before the folder is named); None: from `scorer` and `scorer_options`
    scoring: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.match_system is None:
            self.match_system = default_match_system()
        # A task file (FILE.yaml) is a custom task under its name (task_options["name"]).
        self.task, self.data_files, self.task_options = as_custom(
            self.task, self.data_files, self.task_options
        )

    @property
    def custom(self) -> bool:
        """A custom task: the flags' (`custom`) or a task file's (its own name)."""
        return self.task == "custom" or bool((self.task_options or {}).get("name"))

    def pack(self) -> PromptPack:
        return load_pack(self.prompts)

    def make_task(self) -> Task:
        """The task with this run's prompt pack and task prompt style."""
        return make_task(
            self.task, prompts=self.pack(), task_prompt=self.task_prompt, **(self.task_options or {})
        )

    def options_of(self, system: str) -> dict[str, Any]:
        """The options given that `system` declares (the rest are other systems')."""
        return options_for(system, self.system_options)

    def system_identity(self, system: str | None = None, *, every_option: bool = False) -> dict[str, Any]:
        """The system's part of the identity, from its declaration (`every_option`: each option
        at its value, defaults included, as versions before the identity baseline recorded the
        options of systems outside it)."""
        cls = system_class(system or self.system)
        options = cls.make_options(**self.options_of(system or self.system))
        own = cls.identity_of(options)
        if every_option:
            protocol = {"protocol": own["protocol"]} if "protocol" in own else {}
            own = {**dataclasses.asdict(options), **protocol}
        return own

    def identity(
        self,
        model: dict[str, Any],
        data: str,
        system: str | None = None,
        *,
        every_option: bool = False,
        every_run_option: bool = True,
    ) -> dict[str, Any]:
        """What decides results, hence the run folder's hash (see `run.identity`): `model` is
        `identity.model_identity(...)`, `data` the hash of the loaded problems. Limit and samples
        are left out on purpose: a larger --limit or --samples reuses finished samples.
        `every_option`: every sampling field and system option at its value, defaults included
        (what config.json records, and what versions before the identity baselines hashed), and
        with `every_run_option` the run options declared after their baseline too (those
        versions had none of them: `every_run_option=False` leaves out the ones at default)."""
        name = system or self.system
        later = later_identity(
            {o.name: getattr(self, o.name) for o in RUN_OPTIONS if o.where == "run"},
            every_option=every_option and every_run_option,
        )
        if self.scorer != DEFAULT_SCORER:  # the scorer with its settings, not the name as given
            later["scorer"] = self.scoring or {"name": self.scorer, **self.scorer_options}
        out = {
            "identity": IDENTITY_VERSION,
            "task": self.task,
            "data": data,
            **self._task_identity(),
            "system": name,
            **model,
            "seed": self.seed,
            "params": self.params.to_dict(every_field=every_option),
            "prompts": self.pack().identity(),
            "task_prompt": self.task_prompt,
            **self.system_identity(name, every_option=every_option),
            **later,
        }
        if self.matched:
            out["matched_to"] = self.matched["run"]
            out["matched_system"] = self.matched.get("system", self.match_system)
        return out

    def _task_identity(self) -> dict[str, Any]:
        """The custom task's scoring (its fields are in the data hash, through the prompts and
        golds); nothing for the built-in tasks, whose scoring the task name fixes. A task file's
        name is the identity's `task`. A task's declared settings (tasks.registry, e.g.
        arith_steps) count when they differ from their defaults, so a setting added later keeps
        every folder's name at its default."""
        if not self.custom:
            from mars_eval.tasks.registry import lookup

            given = self.task_options or {}
            return {
                s.name: given[s.name]
                for s in lookup(self.task).settings
                if given.get(s.name) is not None and given[s.name] != s.default
            }
        return {"answer_type": (self.task_options or {}).get("answer_type") or "math"}

    def legacy_identity(self, model_name: str, system: str | None = None) -> dict[str, Any]:
        """The identity of versions before `identity` 2 (the shared counts as given, the data path
        instead of the data): recomputed to find and resume a folder such a version made. Its
        shape is frozen: the options those versions did not record are left out."""
        name = system or self.system
        given = self.system_options
        cls = system_class(name)
        own = {k: v for k, v in self.system_identity(name).items() if k not in _LEGACY_AS_GIVEN}
        for spec in option_specs(cls.Options):  # recorded at their defaults, whatever was given
            if spec.name in _LEGACY_AT_DEFAULT:
                own[spec.name] = spec.default
        return {
            "task": self.task,
            "system": name,
            "model": model_name,
            "data_files": self.data_files,
            "seed": self.seed,
            "params": self.params.to_dict(),
            "rounds": given.get("rounds"),
            "agents": given.get("agents"),
            "votes": given.get("votes"),
            "autogen_client": self.system_identity(name).get("autogen_client"),
            **own,
            **({"matched_to": self.matched["run"]} if self.matched else {}),
        }


# Identity 1 recorded these options as given (None when not given) for every system ...
_LEGACY_AS_GIVEN = ("rounds", "agents", "votes", "autogen_client")
# ... and these, which came later, at their defaults.
_LEGACY_AT_DEFAULT = ("mad_stop", "debate_style")


def run_folder(
    cfg: EvalConfig, system: str, model_name: str, engine: str, data: str
) -> tuple[Path, dict[str, Any]]:
    """(the run folder, its identity) of a run: the one place `mas` and `suite` name folders."""
    identity = cfg.identity(model_identity(model_name, engine), data, system)
    return Path(cfg.output) / run_name(cfg.task, system, model_name, identity), identity


def open_run(
    cfg: EvalConfig,
    system: str,
    model_name: str,
    engine: str,
    problems: list[Problem],
    say: Callable[[str], None],
) -> RunStore:
    """The run store of this configuration, with one line said when the folder is not the one
    the user may expect: an older version's folder resumed under its new name, or a new run
    because the data changed (old and new records are never mixed)."""
    path, identity = run_folder(cfg, system, model_name, engine, data_hash(problems))
    # config.json records every option at its value (what readers show); the folder's hash and
    # `command` cover the identity, where options added after the baseline count only when set.
    recorded = cfg.identity(model_identity(model_name, engine), identity["data"], system, every_option=True)
    config = {**recorded, "command": command_hash(identity)}
    output = Path(cfg.output)
    if not path.exists() and not cfg.fresh:
        legacy = output / run_name(cfg.task, system, model_name, cfg.legacy_identity(model_name, system))
        older = [p for p in siblings(output, path.name) if "identity" not in read_config(p)]
        if legacy in older:
            older.remove(legacy)
            with held_lock(legacy / LOCK_NAME, f"run folder {legacy}"):
                differ = stored_differences(legacy, problems)
                if not differ:
                    legacy.rename(path)
            if differ:
                say(
                    f"{legacy.name} (made by an earlier version) holds {differ} samples of other "
                    f"problems or golds than the data now loaded: starting a new run {path.name}"
                )
            else:
                config["call_model"] = model_name  # its stored calls were keyed by the name as given
                say(f"resuming {legacy.name} (made by an earlier version) as {path.name}")
        if not path.exists():
            _resume_before_baseline(cfg, system, model_name, engine, problems, path, say)
        if not path.exists():
            _resume_before_names(cfg, system, model_name, engine, problems, path, say)
        if not path.exists():
            for other in siblings(output, path.name):
                stored = read_config(other)
                if stored.get("command") == config["command"] and stored.get("data") != identity["data"]:
                    say(
                        f"the data changed: {other.name} holds other problems or golds than the data "
                        f"now loaded; starting a new run {path.name} (the old folder is kept)"
                    )
                    break
        if older:
            names = ", ".join(p.name for p in older)
            say(
                f"{len(older)} run folder(s) of this task, system and model were made by an "
                f"earlier version whose settings cannot be recomputed, so they are not resumed: {names}"
            )
    elif path.exists():
        config["call_model"] = read_config(path).get("call_model", identity["model"])
    config.setdefault("call_model", identity["model"])
    return RunStore(path, config, fresh=cfg.fresh)


def _resume_before_baseline(
    cfg: EvalConfig,
    system: str,
    model_name: str,
    engine: str,
    problems: list[Problem],
    path: Path,
    say: Callable[[str], None],
) -> None:
    """A folder of a system outside the identity baseline (a system file's) made before it,
    when every option was recorded at its default too: renamed to its name now (said)."""
    # run options declared later (dtype, errors, scorer, ...) did not exist then: at their
    # defaults they are left out, as the folder's version never had them; set, they count
    identity = cfg.identity(
        model_identity(model_name, engine),
        data_hash(problems),
        system,
        every_option=True,
        every_run_option=False,
    )
    older = path.parent / run_name(cfg.task, system, model_name, identity)
    if older == path or not older.is_dir() or read_config(older).get("command") != command_hash(identity):
        return
    with held_lock(older / LOCK_NAME, f"run folder {older}"):
        older.rename(path)
    say(f"resuming {older.name} (named by an earlier version) as {path.name}")


def _resume_before_names(
    cfg: EvalConfig,
    system: str,
    model_name: str,
    engine: str,
    problems: list[Problem],
    path: Path,
    say: Callable[[str], None],
) -> None:
    """A task file's run made before task files had names: the same settings and data ran as the
    task `custom` (so the same command, or the same `--task custom` flags, made it). Renamed to
    the named folder (said); the flags then start a run of their own."""
    options = dict(cfg.task_options or {})
    if not options.pop("name", None):
        return
    unnamed = dataclasses.replace(cfg, task="custom", task_options=options or None)
    identity = unnamed.identity(model_identity(model_name, engine), data_hash(problems), system)
    older = path.parent / run_name("custom", system, model_name, identity)
    if not older.is_dir() or read_config(older).get("command") != command_hash(identity):
        return
    with held_lock(older / LOCK_NAME, f"run folder {older}"):
        older.rename(path)
    say(f"resuming {older.name} (made before task files had names) as {path.name}")
