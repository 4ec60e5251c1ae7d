"""The transfer curve: every checkpoint of a mars-train run evaluated on games and inside
multi-agent systems, each evaluation an ordinary run folder named by the checkpoint's step.

    TRAIN_RUN_DIR/checkpoints/initial            step 0
    TRAIN_RUN_DIR/checkpoints/step-N             step N (those the trainer kept for the curve)
    TRAIN_RUN_DIR/checkpoints/final              the last step (train_state/step.json)
    TRAIN_RUN_DIR/evals/step-000010/<run>/       a `games` or `mas` run folder of step 10

The evaluations are what `mars-eval games --model CKPT` and `mars-eval mas --model CKPT` run
(the same configuration, identity, run store and resume), with the checkpoint's own sampling
settings (mars_eval.json): so report, compare and export read them unchanged, and running the
curve again (`mars-eval curve`, or a resumed training run) re-sends no finished call.

What is evaluated (`CurveSpec`) is in the training run's run_config.json (`curve_games`,
`curve_opponents`, `curve_episodes`, `mas_eval`, `mas_eval_limit`); `mars-eval curve` can
override it. A MAS evaluation is "system:task" or a table with `system`, `task` and optionally
`data_files`, `limit`, `samples`, `max_tokens`, `seed`, the system's options (`options`) and
the task's settings (`task_options`, e.g. `{ arith_steps = 1 }` for `--arith-steps 1`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.models.settings import Setting
from mars_eval.run import curve_checks as checks
from mars_eval.run.json_files import read_object
from mars_eval.run.loop import run as run_loop

EVALS = "evals"  # TRAIN_RUN_DIR/evals/step-NNNNNN/
RUN_CONFIG = "run_config.json"  # written by mars-train: the resolved settings of the run
_STEP_DIR = re.compile(r"step-(\d+)$")
_STEP = Setting("step", int, 0, "The training step a final checkpoint was saved at", low=0)
_MAS_KEYS = (
    "system",
    "task",
    "data_files",
    "limit",
    "samples",
    "max_tokens",
    "seed",
    "options",
    "task_options",
)


@dataclass(frozen=True)
class MasEval:
    """One multi-agent evaluation of every checkpoint."""

    system: str
    task: str
    data_files: str | None = None
    limit: int | None = None  # problems (None: all)
    samples: int = 1
    max_tokens: int | None = None  # None: the checkpoint's eval max_tokens
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)  # the system's options (rounds=...)
    # the task's declared settings, as `mars-eval mas` flags give them ({"arith_steps": 1}:
    # --arith-steps 1)
    task_options: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.system}:{self.task}"


@dataclass(frozen=True)
class CurveSpec:
    games: tuple[str, ...] = ()
    opponents: str | None = None  # mars-eval games --opponents (None: each game's fixed ones)
    episodes: int = 50  # per game, opponent and seat
    mas: tuple[MasEval, ...] = ()
    seed: int = 0

    @property
    def empty(self) -> bool:
        return not self.games and not self.mas


def parse_mas(items: Any, default_limit: int | None = None, where: str = "") -> tuple[MasEval, ...]:
    """`mas_eval` as given: a comma-separated string, or a list of "system:task" strings and
    tables (TOML), each value checked as the flag it stands for (`curve_checks`). ConfigError
    (one line, naming `where`: the file it came from) on anything else."""
    at = f"{where}: mas_eval" if where else "mas_eval"
    if items is None or items == "":
        return ()
    if isinstance(items, str):
        items = [s for s in items.split(",") if s.strip()]
    if not isinstance(items, list | tuple):
        raise ConfigError(f"{at}: expected a list, got {type(items).__name__}")
    out = []
    for n, item in enumerate(items):
        if isinstance(item, str):
            system, sep, task = item.strip().partition(":")
            if not sep or not system or not task:
                raise ConfigError(f"{at}: {item!r} is not SYSTEM:TASK (e.g. single:arith)")
            out.append(MasEval(system, task, limit=default_limit))
            continue
        if not isinstance(item, dict) or "system" not in item or "task" not in item:
            raise ConfigError(f"{at}: {checks.text_of(item)} needs a system and a task")
        unknown = [k for k in item if k not in _MAS_KEYS]
        if unknown:
            raise ConfigError(f"{at}: unknown key {unknown[0]!r} (known: {', '.join(_MAS_KEYS)})")
        key = f"{at}[{n}]"
        limit = item.get("limit", default_limit)
        out.append(
            MasEval(
                system=checks.text(item["system"], f"{key}.system") or "",
                task=checks.text(item["task"], f"{key}.task") or "",
                data_files=checks.text(item.get("data_files"), f"{key}.data_files", path=True),
                limit=checks.entry_limit(limit, f"{key}.limit"),
                samples=checks.checked("samples", item.get("samples", 1), f"{key}.samples"),
                max_tokens=checks.checked("max_tokens", item.get("max_tokens"), f"{key}.max_tokens"),
                seed=checks.checked("seed", item.get("seed", 0), f"{key}.seed"),
                options=checks.options(item.get("options"), f"{key}.options"),
                task_options=checks.options(item.get("task_options"), f"{key}.task_options"),
            )
        )
    return tuple(out)


def expand_games(names: Any, train_games: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Game names, with "train" (the run's training games) and "held_out" (the paper's held-out
    games) expanded; unknown names are ConfigError."""
    from mars_eval.games import ALL_GAMES, GAMES_HELD_OUT

    if isinstance(names, str):
        names = [n for n in names.split(",") if n.strip()]
    out: list[str] = []
    for name in names or ():
        name = str(name).strip()
        if name == "train":
            out += list(train_games)
        elif name in ("held_out", "held-out"):
            out += list(GAMES_HELD_OUT)
        elif name in ALL_GAMES:
            out.append(name)
        else:
            raise ConfigError(
                f"curve games: unknown game {name!r} (train, held_out or {', '.join(ALL_GAMES)})"
            )
    return tuple(dict.fromkeys(out))


def spec_of(settings: dict[str, Any], where: str = "") -> CurveSpec:
    """The curve a training run's settings ask for (run_config.json, or TrainConfig.to_dict()),
    each value checked as the flag it stands for; `where` (the file) names it in a message."""

    from mars_eval.run.games_config import check_episodes

    def at(key: str) -> str:
        return f"{where}: {key}" if where else key

    limit = checks.limit_of_all(settings.get("mas_eval_limit"), at("mas_eval_limit"))
    episodes = check_episodes(settings.get("curve_episodes"), at("curve_episodes"))
    games = checks.names(settings.get("curve_games"), at("curve_games"))
    return CurveSpec(
        games=expand_games(games, checks.names(settings.get("games"), at("games"))),
        opponents=checks.text(settings.get("curve_opponents"), at("curve_opponents")) or None,
        episodes=50 if episodes is None else episodes,
        mas=parse_mas(settings.get("mas_eval"), limit, where),
        seed=checks.checked("seed", settings.get("seed"), at("seed")) or 0,
    )


def read_settings(train_dir: Path) -> dict[str, Any]:
    """run_config.json of a training run, read within bounds (`json_files.read_object`)."""
    path = Path(train_dir) / RUN_CONFIG
    if not path.exists():
        raise ConfigError(f"{train_dir} is not a mars-train run folder (no {RUN_CONFIG})")
    return read_object(path)


def checkpoint_steps(train_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every complete checkpoint of a training run, by step: initial (0),
    step-N, final (its saved step, from train_state/step.json; it wins over a step-N of the same
    step). A final checkpoint whose step.json is damaged: ConfigError naming it."""
    ckpts = Path(train_dir).resolve() / "checkpoints"  # absolute: one run folder name from anywhere
    found: dict[int, Path] = {}
    if not ckpts.is_dir():
        return []
    for folder in sorted(ckpts.iterdir()):
        if not (folder / "COMPLETE").is_file():
            continue
        m = _STEP_DIR.match(folder.name)
        if folder.name == "initial":
            found.setdefault(0, folder)
        elif m:
            found.setdefault(int(m.group(1)), folder)
    final = ckpts / "final"
    step_file = final / "train_state" / "step.json"
    if (final / "COMPLETE").is_file() and step_file.exists():
        step = checks.checked(_STEP, read_object(step_file).get("step"), f"{step_file}: step")
        if step is None:
            raise ConfigError(f"{step_file} names no step")
        found[step] = final
    return sorted(found.items())


def eval_dir(train_dir: Path, step: int) -> Path:
    return Path(train_dir) / EVALS / f"step-{step:06d}"


def step_of_eval_dir(path: Path) -> int | None:
    """The step of a run folder under TRAIN_RUN_DIR/evals/step-N/ (else None)."""
    parent = Path(path).parent
    m = _STEP_DIR.match(parent.name)
    return int(m.group(1)) if m and parent.parent.name == EVALS else None


def _checkpoint_meta(ckpt: Path) -> dict[str, Any]:
    """The checkpoint's mars_eval.json, checked (as `games --model CKPT` reads it); {} without one."""
    from mars_eval.run.games_config import checkpoint_settings

    return checkpoint_settings(str(ckpt))


def mas_config(
    m: MasEval,
    ckpt: Path,
    output: Path,
    engine: str = "auto",
    dtype: str = "auto",
    kv_cache_mib: float | None = None,
) -> Any:
    """The EvalConfig `mars-eval mas --model CKPT` would build, at the checkpoint's sampling."""
    from mars_eval.mas import check_unused, options_for, system_class
    from mars_eval.models.base import SamplingParams
    from mars_eval.run.config import EvalConfig

    meta = _checkpoint_meta(ckpt)
    cls = system_class(m.system)
    check_unused([cls.name], dict(m.options))
    cls.check(cls.make_options(**options_for(cls.name, dict(m.options))), served=False)
    params = SamplingParams.for_mode(
        bool(meta.get("thinking", True)),
        temperature=meta.get("temperature"),
        max_tokens=m.max_tokens or meta.get("max_tokens"),
    )
    return EvalConfig(
        task=m.task,
        system=cls.name,
        model=str(ckpt),
        data_files=m.data_files,
        limit=m.limit,
        samples=m.samples,
        seed=m.seed,
        params=params,
        output=str(output),
        system_options=dict(m.options),
        task_options=dict(m.task_options) or None,
        engine=engine,
        dtype=dtype,
        kv_cache_mib=kv_cache_mib,
        prompts=meta.get("prompts"),
    )


def games_config(spec: CurveSpec, ckpt: Path, output: Path) -> Any:
    from mars_eval.run.games_config import build_config

    return build_config(
        games=",".join(spec.games),
        model=str(ckpt),
        opponents=spec.opponents,
        episodes=spec.episodes,
        seed=spec.seed,
        output=str(output),
    )


def check_spec(spec: CurveSpec, ckpts: list[Path]) -> None:
    """Every configuration of the curve built for each checkpoint (its own mars_eval.json), so
    bad input is found before any work."""
    out = Path("/nonexistent-curve-check")  # only built, never written
    for ckpt in ckpts:
        for m in spec.mas:
            cfg = mas_config(m, ckpt, out)
            if m.task_options:  # a setting the task does not declare, or out of its range: one line
                cfg.make_task()
        if spec.games:
            games_config(spec, ckpt, out)


async def evaluate_checkpoint_async(
    spec: CurveSpec,
    ckpt: Path,
    step: int,
    train_dir: Path,
    *,
    engine: str = "auto",
    progress: bool = False,
    dtype: str = "auto",
    kv_cache_mib: float | None = None,
    client: Any = None,
) -> list[dict[str, Any]]:
    """Every evaluation of `spec` for one checkpoint; their summaries (each with run_dir and
    calls_sent). One in-process model client serves them all, loaded at the first call the run
    stores cannot answer (a finished evaluation never loads it). `client`: one made by the caller
    that answers as backend `engine` (mars-train's, through the trainer's own vLLM engine:
    training/curve_engine.py); closed here like the one made here."""
    from mars_eval.models import make_client
    from mars_eval.run.games_runner import run_games
    from mars_eval.run.runner import run_eval

    out_dir = eval_dir(train_dir, step)
    ckpt = Path(ckpt).resolve()  # the model's name in the run folder's name: the same from anywhere
    if client is None:
        client = make_client(str(ckpt), engine=engine, dtype=dtype, kv_cache_mib=kv_cache_mib)
    summaries = []
    try:
        for m in spec.mas:
            cfg = mas_config(m, ckpt, out_dir, engine, dtype, kv_cache_mib)
            summaries.append(await run_eval(cfg, client=client, progress=progress, close_client=False))
        if spec.games:
            games = dataclasses.replace(
                games_config(spec, ckpt, out_dir), dtype=dtype, kv_cache_mib=kv_cache_mib
            )
            summary = await run_games(games, client=client, progress=progress)
            client = None  # run_games closes the client it is given
            summaries.append(summary)
    finally:
        if client is not None:
            await client.aclose()
    return summaries


def evaluate_checkpoint(
    spec: CurveSpec, ckpt: Path, step: int, train_dir: Path, **options: Any
) -> list[dict[str, Any]]:
    """`evaluate_checkpoint_async` run to its end (`options`: its engine, progress, dtype,
    kv_cache_mib, client)."""
    return run_loop(evaluate_checkpoint_async(spec, ckpt, step, train_dir, **options))


def run_curve(
    train_dir: Path,
    spec: CurveSpec,
    say: Callable[[str], None],
    *,
    steps: list[int] | None = None,
    engine: str = "auto",
    progress: bool = False,
    dtype: str = "auto",
    kv_cache_mib: float | None = None,
) -> tuple[int, int]:
    """Evaluate every checkpoint (or those of `steps`); (evaluations, errored samples)."""
    if spec.empty:
        raise ConfigError("nothing to evaluate: give --games and/or --mas (or set them in the training run)")
    points = checkpoint_steps(train_dir)
    if steps is not None:
        points = [(s, c) for s, c in points if s in set(steps)]
    if not points:
        raise ConfigError(f"no complete checkpoint under {Path(train_dir) / 'checkpoints'}")
    check_spec(spec, [ckpt for _, ckpt in points])
    done = errored = 0
    options = dict(engine=engine, progress=progress, dtype=dtype, kv_cache_mib=kv_cache_mib)
    for step, ckpt in points:
        for summary in evaluate_checkpoint(spec, ckpt, step, train_dir, **options):
            done += 1
            errored += int(summary.get("errors") or 0)
            say(
                f"step {step}: {Path(summary['run_dir']).name} "
                f"({int(summary.get('calls_sent') or 0)} call(s) sent)"
            )
    return done, errored
