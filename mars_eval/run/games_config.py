"""`mars-eval games` configuration: the command's options checked into a `GamesConfig`.

Model and prompts: without --model and --base-url the embedded tiny checkpoint (results/tiny)
plays, with the settings it ships in mars_eval.json (prompt style, sampling), exactly as
`--model results/tiny`. Other models default to the "reference" prompt style (the reference
environments' text, see reference_env.py); "full" and "compact" are our own named styles.

Defaults: the training games when no game is chosen; 1000 episodes per game, opponent and
seat; the opponents of the paper (see opponents.DEFAULT_OPPONENTS); up to 4096 new tokens
per move (the reference's limit: longer replies lose).

The identity (`GamesConfig.identity`, the run folder's hash) covers what decides results (agent,
or model and engine, prompt style, sampling, seed), not the game list, opponents or the episode
count, so a later, larger or different selection reuses the finished episodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mars_eval.games import ALL_GAMES, GAMES_HELD_OUT, GAMES_TRAIN, PROMPT_STYLES, make_game
from mars_eval.games.opponents import DEFAULT_OPPONENTS, make_opponent
from mars_eval.models.base import ConfigError, SamplingParams
from mars_eval.models.settings import Setting
from mars_eval.prompts import PromptPack, load_pack
from mars_eval.run.options import BY_NAME

DEFAULT_EPISODES = 1000  # the paper's tables use about 1000 episodes per game and seat
EPISODES = Setting("episodes", int, DEFAULT_EPISODES, "Episodes per game and seat", low=1)
DEFAULT_MAX_TOKENS = 4096
DEFAULT_CONCURRENCY = 256
CHECKPOINT_SETTINGS = "mars_eval.json"  # written by the trainer next to tiny checkpoints
BUILTIN_AGENTS = "random, mcts (= mcts100), mcts<N>, cfr (Kuhn), equilibrium (Leduc)"


@dataclass
class GamesConfig:
    games: list[str]
    opponents: dict[str, list[str]]  # per game, in order
    agent: str | None = None  # a built-in agent spec, or None for the LLM
    model: str | None = None
    base_urls: list[str] = field(default_factory=list)
    episodes: int = DEFAULT_EPISODES
    seed: int = 0
    output: str = "results/runs"
    concurrency: int = DEFAULT_CONCURRENCY
    params: SamplingParams | None = None  # None for built-in agents
    prompt_style: str = "reference"
    prompts: str | None = None  # the prompt pack (every style's prose): a name or a file (None: ours)
    fresh: bool = False
    request_timeout: float | None = None  # seconds per attempt (connect to last byte)
    max_attempts: int | None = None  # per call, over 429/5xx/timeouts/dropped connections
    dtype: str = "auto"  # --dtype (models.dtypes): what an in-process model computes in
    kv_cache_mib: float | None = None  # --kv-cache-mib: the in-process KV budget (not in the identity)

    def pack(self) -> PromptPack:
        return load_pack(self.prompts)

    def identity(self, model: str | dict[str, Any] | None) -> dict[str, Any]:
        """What decides results (the run folder's hash); see the module docstring. `model` is
        `identity.model_identity` (engine, model, fingerprint), or a bare name for the key of
        folders made before engines and fingerprints were part of it (`legacy_name`)."""
        params = self.params.to_dict() if self.params else None
        model_part = model if isinstance(model, dict) else {"model": model}
        return {
            "command": "games",
            "agent": self.agent,
            **model_part,
            "prompt_style": self.prompt_style if self.agent is None else None,
            # every style's prose comes from the pack (built-in agents send no text)
            **({"prompts": self.pack().identity()} if self.agent is None else {}),
            "params": params,
            "seed": self.seed,
            # given explicitly only: a folder made before --dtype keeps its name at auto
            **({"dtype": self.dtype} if self.dtype != "auto" and self.agent is None else {}),
        }


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def select_games(games: str | None, train: bool, held_out: bool) -> list[str]:
    chosen = _split(games)
    for name in chosen:
        if name not in ALL_GAMES:
            raise ConfigError(f"unknown game {name!r}; choose from: {', '.join(ALL_GAMES)}")
    if train or not (chosen or held_out):
        chosen += GAMES_TRAIN
    if held_out:
        chosen += GAMES_HELD_OUT
    return list(dict.fromkeys(chosen))


def select_opponents(games: list[str], opponents: str | None) -> dict[str, list[str]]:
    """Defaults per game, or the given specs: each applies to the games it fits (ConfigError if
    a spec fits none of the chosen games, or a game gets no opponent)."""
    specs = [s.lower() for s in _split(opponents)]
    if not specs:
        return {g: list(DEFAULT_OPPONENTS[g]) for g in games}
    chosen: dict[str, list[str]] = {g: [] for g in games}
    for spec in specs:
        count = re.fullmatch(r"mcts(\d+)", spec)
        if count and int(count.group(1)) < 1:  # a count out of range, not a spec for other games
            raise ConfigError(f"opponent {spec!r}: N of mcts<N> (simulations per move) must be at least 1")
        fits = []
        for g in games:
            try:
                make_opponent(spec, make_game(g), 0)
            except ConfigError:
                continue
            fits.append(g)
            chosen[g].append(spec)
        if not fits:
            raise ConfigError(f"opponent {spec!r} fits none of the chosen games ({', '.join(games)})")
    missing = [g for g, specs_for in chosen.items() if not specs_for]
    if missing:
        raise ConfigError(f"no opponent given for {', '.join(missing)}; add one that fits or drop the game")
    return chosen


def check_episodes(value: Any, where: str) -> int | None:
    """An episode count from a file (None: not given), checked as --episodes, naming `where`."""
    from mars_eval.run.curve_checks import checked

    return checked(EPISODES, value, where)


def checkpoint_settings(model: str | None) -> dict[str, Any]:
    """Settings a trained tiny checkpoint ships with (prompt_style, temperature, max_tokens, thinking)."""
    if not model:
        return {}
    path = Path(model) / CHECKPOINT_SETTINGS
    if not path.exists():
        return {}
    from mars_eval.run.curve_checks import checkpoint_settings as checked
    from mars_eval.run.json_files import read_object

    return checked(read_object(path), str(path))  # bounded, each setting checked as its flag


# The flags only an LLM player uses: a built-in --agent sends no text and makes no call.
LLM_ONLY = (
    "base_url",
    "temperature",
    "max_tokens",
    "thinking",
    "prompt_style",
    "prompts",
    "request_timeout",
    "max_attempts",
)


def check_agent_flags(agent: str | None, given: dict[str, Any]) -> None:
    """With a built-in --agent, an LLM-only flag given (`given`: by parameter name, None or an
    empty list = not given) is refused, as `mas` refuses a system option no chosen system uses."""
    if not agent:
        return
    used = [k for k in LLM_ONLY if given.get(k) not in (None, [])]
    if used:
        flags = ", ".join("--" + k.replace("_", "-") for k in used)
        raise ConfigError(f"{flags}: used by an LLM player only, not by --agent {agent!r}; drop it")


def build_config(
    *,
    games: str | None = None,
    train: bool = False,
    held_out: bool = False,
    model: str | None = None,
    base_url: list[str] | None = None,
    agent: str | None = None,
    opponents: str | None = None,
    episodes: int | None = None,
    seed: int = 0,
    output: str = "results/runs",
    concurrency: int | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    thinking: bool | None = None,
    prompt_style: str | None = None,
    fresh: bool = False,
    request_timeout: float | None = None,
    max_attempts: int | None = None,
    prompts: str | None = None,
    dtype: str = "auto",
    kv_cache_mib: float | None = None,
) -> GamesConfig:
    """Validate the command's options into a GamesConfig (ConfigError on bad input). The CLI
    and the Python API (`mars_eval.play`) both come through here, so a value of the wrong type
    is refused in one line whichever way it came (`check_options`)."""
    check_options(
        games=games, train=train, held_out=held_out, model=model, base_url=base_url, agent=agent,
        opponents=opponents, episodes=episodes, seed=seed, output=output, concurrency=concurrency,
        max_tokens=max_tokens, temperature=temperature, thinking=thinking, prompt_style=prompt_style,
        fresh=fresh, request_timeout=request_timeout, max_attempts=max_attempts, prompts=prompts,
        dtype=dtype, kv_cache_mib=kv_cache_mib,
    )  # fmt: skip
    if agent and model:
        raise ConfigError("give either --agent (a built-in player) or --model (an LLM), not both")
    episodes = DEFAULT_EPISODES if episodes is None else episodes
    if prompt_style is not None and prompt_style not in PROMPT_STYLES:  # with --agent too
        raise ConfigError(f"unknown prompt style {prompt_style!r}; choose one of: {', '.join(PROMPT_STYLES)}")
    if prompts is not None:  # with --agent too: a bad pack is bad input either way
        load_pack(prompts)
    given = dict(base_url=base_url, temperature=temperature, max_tokens=max_tokens, thinking=thinking)
    given.update(prompt_style=prompt_style, prompts=prompts)
    check_agent_flags(agent, {**given, "request_timeout": request_timeout, "max_attempts": max_attempts})
    chosen = select_games(games, train, held_out)
    cfg = GamesConfig(
        games=chosen,
        opponents=select_opponents(chosen, opponents),
        model=model,
        base_urls=list(base_url or []),
        episodes=episodes,
        seed=seed,
        output=output,
        concurrency=concurrency or DEFAULT_CONCURRENCY,
        fresh=fresh,
        request_timeout=request_timeout,
        max_attempts=max_attempts,
        dtype=dtype,
        kv_cache_mib=kv_cache_mib,
    )
    if agent:
        spec = agent.strip().lower()
        spec = "mcts100" if spec == "mcts" else spec
        if not (spec in ("random", "cfr", "equilibrium") or re.fullmatch(r"mcts[1-9]\d*", spec)):
            raise ConfigError(f"unknown agent {agent!r}; choose one of: {BUILTIN_AGENTS}")
        for g in chosen:
            try:
                if spec == "self":
                    raise ConfigError("'self' is an opponent, not an agent")
                make_opponent(spec, make_game(g), 0)
            except ConfigError as exc:
                raise ConfigError(f"agent {agent!r} cannot play {g}: {exc}") from None
        cfg.agent = spec
        return cfg
    if not model and not cfg.base_urls:
        from mars_eval.models import default_model

        model = cfg.model = default_model()  # the embedded checkpoint, with its mars_eval.json
    saved = checkpoint_settings(model)
    style = prompt_style or saved.get("prompt_style") or "reference"
    if style not in PROMPT_STYLES:
        raise ConfigError(f"unknown prompt style {style!r}; choose one of: {', '.join(PROMPT_STYLES)}")
    cfg.prompt_style = style
    cfg.prompts = prompts or saved.get("prompts")  # a trained checkpoint: the pack it was trained on
    cfg.pack()  # a bad pack is refused here, before any work
    think = thinking if thinking is not None else saved.get("thinking", True)
    cfg.params = SamplingParams.for_mode(
        bool(think),
        temperature=temperature if temperature is not None else saved.get("temperature"),
        max_tokens=max_tokens or saved.get("max_tokens") or DEFAULT_MAX_TOKENS,
    )
    return cfg


_TEXT_OPTIONS = ("games", "model", "agent", "opponents", "prompt_style", "prompts")
_SHARED_OPTIONS = ("seed", "concurrency", "temperature", "output", "max_tokens", "thinking", "fresh")
_SHARED_OPTIONS += ("request_timeout", "max_attempts", "dtype", "kv_cache_mib")


def check_options(**options: Any) -> None:
    """`build_config`'s options (None: not given) of the right type and in range: the run options
    `mas` shares by their declarations (run.options), the rest here. ConfigError (one line)."""
    for name in _TEXT_OPTIONS:
        value = options.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"--{name.replace('_', '-')} must be text, got {type(value).__name__}")
    urls = options.get("base_url")
    if urls is not None and (not isinstance(urls, list) or not all(isinstance(u, str) for u in urls)):
        raise ConfigError(f"--base-url must be a list of text, got {type(urls).__name__}")
    for name in _SHARED_OPTIONS:
        BY_NAME[name].check(options.get(name), from_text=False)
    for name in ("train", "held_out"):
        if not isinstance(options.get(name, False), bool):
            raise ConfigError(f"--{name.replace('_', '-')} must be true or false, got {options[name]!r}")
    EPISODES.check(options.get("episodes"), from_text=False)
