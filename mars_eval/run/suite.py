"""`mars-eval suite`: every (model, system, task) cell of a table, side by side, from one command.

Each cell is an ordinary `mas` run folder under the output folder (same name, same resume and
--fresh), run by `run_eval`. What the suite adds:

- one endpoint pool for all cells: the endpoints, their in-flight counts and the concurrency
  limit are shared, so while one cell waits on its slowest samples the others keep the servers
  full (the suite takes about as long as its largest cell, not the sum of the cells);
- routing: every --base-url is asked for its /models once, and each model's calls go only to
  the endpoints that serve it (one vLLM server per checkpoint is the common set-up);
- a compute-matched cell (a system whose `matched_option` is left unset: vote without --votes)
  waits for the --match-system cell (mad) of its model and task, so its count is matched to that
  run's calls per sample (as `mas --system vote` does);
- one progress view for the whole suite and one table at the end.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
from rich.console import Console

from mars_eval.mas import system_class, system_for
from mars_eval.models import default_model, make_client
from mars_eval.models.access import AccessDenied
from mars_eval.models.balance import Endpoint
from mars_eval.models.base import ConfigError, ModelClient
from mars_eval.models.http import DEFAULT_CONCURRENCY, HTTPClient, list_models, normalize_base_url
from mars_eval.models.retry import RetryPolicy
from mars_eval.run.failures import BAD_INPUT, exit_code, exit_code_of
from mars_eval.run.identity import data_hash, engine_kind
from mars_eval.run.progress import progress_bar
from mars_eval.run.rundirs import read_records
from mars_eval.run.runner import EvalConfig, run_eval, run_folder, select
from mars_eval.run.store import slug
from mars_eval.run.units import run_all
from mars_eval.tasks import Problem, make_task
from mars_eval.tasks import load_problems as load_task_problems

SUITE_FILE = "suite.json"  # the models, systems and tasks as named: the report's order and base


@dataclass
class Cell:
    """One (model, system, task) run of the suite."""

    model: str
    system: str
    task: str  # the task's canonical name
    cfg: EvalConfig
    total: int = 0  # problems x samples
    done: int = 0
    summary: dict[str, Any] | None = None
    failure: str | None = None  # the run raised instead of returning a summary
    exit_code: int = 0  # what a `mas` run of this cell alone would exit with (run.failures)

    @property
    def label(self) -> str:
        return f"{self.task}/{self.system}/{slug(self.model)}"


@dataclass
class SuitePlan:
    models: list[str]
    systems: list[str]
    tasks: list[str]
    template: EvalConfig  # everything but model, system, task and data files
    data_files: dict[str, str | None] = field(default_factory=dict)
    # each custom task's settings by name (a task file's, its name among them; "custom": the
    # flags); a task absent here: the template's task_options for `custom`, none for the rest
    task_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the tasks' declared settings given (tasks.registry, --arith-steps): each to the task declaring it
    task_settings: dict[str, Any] = field(default_factory=dict)


def parse_data_files(
    values: list[str] | None, tasks: list[str], own: dict[str, str | None] | None = None
) -> dict[str, str | None]:
    """`--data-files PATH` (one task only) or `--data-files TASK=PATH` (repeatable), per task.
    `own`: the task files' tasks (by name) with the data each file names (None: none, so it
    needs a value here).

    A value is read as TASK=PATH only when the part before '=' names a task, so paths that
    contain '=' still work.
    """
    own = own or {}

    def task_name(value: str) -> str:
        return value if value in own else make_task(value).name

    canonical = [task_name(t) for t in tasks]
    out: dict[str, str | None] = dict.fromkeys(canonical)
    plain: list[str] = []
    for value in values or []:
        head, sep, tail = value.partition("=")
        name = None
        if sep:
            try:
                name = task_name(head)
            except ConfigError:
                name = None
        if name is None:
            plain.append(value)
            continue
        if name not in out:
            raise ConfigError(f"--data-files {value!r} names task {head!r}, which is not in --task")
        out[name] = tail
    if plain:
        if len(plain) > 1 or len(canonical) > 1:
            raise ConfigError("with several --task values give --data-files as TASK=PATH, one per task")
        out[canonical[0]] = plain[0]
    for name, path in own.items():  # a task file's own data_files, or a value here: one of the two
        if path is not None and out.get(name) is not None:
            raise ConfigError(f"--data-files: task file {name} names its data_files; give one of the two")
        if path is None and out.get(name) is None:
            raise ConfigError(
                f"task file {name} names no data_files; add it or give --data-files {name}=PATH"
            )
        out[name] = out.get(name) or path
    return out


async def served_models(base_urls: list[str], api_key: str | None = None) -> dict[str, list[str] | None]:
    """Each endpoint's model list from GET /models (None: it has no list, i.e. answered 404),
    asked as `mas` asks it (`list_models`: the retry policy, the API-key hint)."""
    policy = RetryPolicy(max_attempts=4, backoff_base=0.25)
    out: dict[str, list[str] | None] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10.0)) as session:
        for url in base_urls:
            base = normalize_base_url(url)
            cards = await list_models(session, base, api_key, policy)
            out[base] = None if cards is None else [str(card["id"]) for card in cards]
    return out


def route(models: list[str], served: dict[str, list[str] | None]) -> dict[str, list[str]]:
    """model -> the endpoints that list it (endpoints without a model list take any model).
    A model no endpoint serves is a ConfigError (one line, exit 2)."""
    routes: dict[str, list[str]] = {}
    for model in models:
        urls = [u for u, names in served.items() if names is None or model in names]
        if not urls:
            listed = "; ".join(f"{u}: {', '.join(n or []) or 'none'}" for u, n in served.items())
            raise ConfigError(f"model {model!r} is served by no --base-url ({listed})")
        routes[model] = urls
    return routes


class SharedPool:
    """One HTTPClient per model, all over one set of endpoints and one concurrency limit.

    Each client's EndpointPool is narrowed to the endpoints serving its model, but holds the
    same `Endpoint` objects (so least-in-flight sees every model's requests) and the same
    limit (so the suite as a whole never has more than `concurrency` calls in flight).
    """

    def __init__(self, routes: dict[str, list[str]], template: EvalConfig):
        concurrency = template.concurrency or DEFAULT_CONCURRENCY
        kwargs: dict[str, Any] = {
            "concurrency": concurrency,
            "api_key": os.environ.get("OPENAI_API_KEY"),
            "http_client": template.http_client,
        }
        if template.request_timeout:
            kwargs["timeout"] = template.request_timeout
        if template.max_attempts:
            kwargs["max_attempts"] = template.max_attempts
        self.limit = asyncio.Semaphore(concurrency)
        self.clients: dict[str, HTTPClient] = {}
        endpoints: dict[str, Endpoint] = {}
        for model, urls in routes.items():
            client = HTTPClient(model, urls, **kwargs)
            client.pool.balancer.share(endpoints, self.limit)
            self.clients[model] = client

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()


def plan_cells(plan: SuitePlan) -> list[Cell]:
    """Cells in table order (task, system, model); the runs themselves all start at once."""
    cells = []
    for task in plan.tasks:
        for system in plan.systems:
            for model in plan.models:
                cfg = replace(
                    plan.template,
                    task=task,
                    system=system,
                    model=model,
                    data_files=plan.data_files.get(task),
                    # the custom-task settings are the custom tasks' only (other tasks refuse them)
                    task_options=_task_options(plan, task),
                )
                cells.append(Cell(model, system, task, cfg))
    return cells


def _matched_later(cell: Cell) -> bool:
    """The cell's system has a matched option left unset: its run folder is known only once the
    run it is matched to has finished."""
    option = system_class(cell.system).matched_option
    return option is not None and cell.cfg.system_options.get(option) is None


def _task_options(plan: SuitePlan, task: str) -> dict[str, Any] | None:
    """The settings of a custom task of the suite (a task file's, or the flags'), else the
    declared settings given that `task` declares (None when none)."""
    if task in plan.task_options:
        return plan.task_options[task] or None
    built = make_task(task)
    if built.name == "custom":
        return plan.template.task_options
    from mars_eval.tasks.registry import lookup

    own = {s.name for s in lookup(built.name).settings}
    return {k: v for k, v in plan.task_settings.items() if k in own} or None


def load_problems(plan: SuitePlan) -> dict[str, list[Problem]]:
    """Each task's problems, loaded once for all its cells and before any call (bad data or a
    missing file is a ConfigError here, not in the middle of the suite). --problem-ids selects
    in every task, as `mas` does (`runner.select`): an id a task lacks is refused, naming it."""
    loaded = {}
    template = plan.template
    for task_name in plan.tasks:
        options = _task_options(plan, task_name)
        problems = load_task_problems(
            make_task(
                task_name, prompts=template.pack(), task_prompt=template.task_prompt, **(options or {})
            ),
            plan.data_files.get(task_name),
            template.seed,
        )
        try:
            select(problems, replace(template, task=task_name))
        except ConfigError as exc:
            if template.problem_ids:
                raise
            raise ConfigError(f"no problems to run for {task_name} (empty data or --limit 0)") from exc
        loaded[task_name] = problems
    return loaded


def _done_before(cell: Cell, engine: str, problems: list[Problem]) -> int:
    """Samples of this cell finished by an earlier run (resume), read without touching the file;
    the folder is named as `mas` names it (`runner.run_folder`)."""
    if cell.cfg.fresh or _matched_later(cell):
        return 0
    cfg = replace(cell.cfg, task=cell.cfg.make_task().name)
    path, _ = run_folder(cfg, cell.system, cell.model, engine, data_hash(problems))
    ok = sum(1 for r in read_records(path / "samples.jsonl").values() if not r.get("error"))
    return min(ok, cell.total)


class SuiteProgress:
    """One bar for the whole suite, with the number of cells finished and errors so far."""

    def __init__(self, console: Console, cells: list[Cell], enabled: bool):
        self.cells = cells
        self.errors = 0
        self._bar = progress_bar(console, "suite", enabled)
        total = sum(c.total for c in cells)
        self._task = self._bar.add_task("suite", total=total, completed=sum(c.done for c in cells), stats="")

    def __enter__(self) -> SuiteProgress:
        self._bar.__enter__()
        self._refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        self._refresh()
        self._bar.__exit__(*exc)

    def hook(self, cell: Cell) -> Callable[[dict[str, Any]], None]:
        def on_record(record: dict[str, Any]) -> None:
            cell.done += 1
            self.errors += bool(record.get("error"))
            self._refresh()

        return on_record

    def _refresh(self) -> None:
        finished = sum(c.summary is not None or c.failure is not None for c in self.cells)
        stats = f"cells {finished}/{len(self.cells)}"
        if self.errors:
            stats += f"  [red]{self.errors} errors[/red]"
        self._bar.update(self._task, completed=sum(min(c.done, c.total) for c in self.cells), stats=stats)


async def run_suite(plan: SuitePlan, console: Console | None = None, progress: bool = True) -> list[Cell]:
    """Run every cell (ConfigError before any call on bad input); returns the cells with their
    summaries, or the one-line failure of a cell that raised."""
    console = console or Console(stderr=True)
    template = plan.template
    if template.samples < 1:
        raise ConfigError("--samples must be at least 1")
    for system in plan.systems:  # unknown systems and bad system options: one line, exit 2
        system_for(system, template)
    loaded = load_problems(plan)
    counts = {t: len(select(p, replace(template, task=t))) for t, p in loaded.items()}
    pool: SharedPool | None = None
    local: dict[str, ModelClient] = {}
    if template.base_urls:
        served = await served_models(template.base_urls, os.environ.get("OPENAI_API_KEY"))
        if not plan.models:
            plan.models = list(dict.fromkeys(n for names in served.values() for n in names or []))
            if not plan.models:
                raise ConfigError("--model is required: no endpoint lists its models")
        pool = SharedPool(route(plan.models, served), template)
    else:
        for system in plan.systems:  # e.g. autogen's openai client without an endpoint
            cls = system_class(system)
            cls.check(cls.make_options(**template.options_of(system)), served=False)
        plan.models = plan.models or [default_model()]
    cells = plan_cells(plan)
    try:
        if pool is None:
            for model in plan.models:
                local[model] = make_client(
                    model,
                    [],
                    concurrency=template.concurrency,
                    engine=template.engine,
                    dtype=template.dtype,
                    kv_cache_mib=template.kv_cache_mib,
                )
        for cell in cells:
            cell.total = counts[cell.task] * template.samples
            engine = "http" if pool is not None else engine_kind(local[cell.model])
            cell.done = _done_before(cell, engine, loaded[cell.task])
        with SuiteProgress(console, cells, progress) as bar:
            await _run_cells(cells, pool, local, console, bar, loaded)
    finally:
        if pool is not None:
            await pool.aclose()
        for client in local.values():
            await client.aclose()
    return cells


async def _run_cells(
    cells: list[Cell],
    pool: SharedPool | None,
    local: dict[str, ModelClient],
    console: Console,
    bar: SuiteProgress,
    loaded: dict[str, list[Problem]],
) -> None:
    # A compute-matched cell waits for the cell it is matched to (same model and task).
    match_done = {(c.model, c.task): asyncio.Event() for c in cells if c.system == c.cfg.match_system}

    async def one(cell: Cell) -> None:
        if _matched_later(cell) and (cell.model, cell.task) in match_done:
            await match_done[(cell.model, cell.task)].wait()
        client = pool.clients[cell.model] if pool is not None else local[cell.model]
        try:
            cell.summary = await run_eval(
                cell.cfg,
                client=client,
                console=console,
                progress=False,
                close_client=False,
                on_record=bar.hook(cell),
                problems=loaded[cell.task],
            )
        except AccessDenied:
            raise  # the key is refused: no cell can run (the others are let end, exit 2)
        except Exception as exc:  # one broken cell must not take the others down
            cell.exit_code = exit_code_of(exc)  # classified as for every command (run.failures)
            bad_input = cell.exit_code == BAD_INPUT
            cell.failure = f"bad input: {exc}" if bad_input else f"internal: {type(exc).__name__}: {exc}"
        else:
            cell.exit_code = exit_code(cell.summary["error_kinds"])
        finally:
            if (cell.model, cell.task) in match_done and cell.system == cell.cfg.match_system:
                match_done[(cell.model, cell.task)].set()

    await run_all(one(c) for c in cells)
