"""A run's scorer and, for one that calls a model (the judge), its client: made here, cached there.

`prepare_scoring` builds the scorer a run names (`--scorer`, tasks.scorers) and, for the judge,
the judge's model client: the run's own client when neither `--judge-model` nor
`--judge-base-url` is given, else an endpoint or an in-process model made with the run's
connection settings (concurrency, timeouts, attempts, engine, dtype). An endpoint is checked
before any work, and the judge's model identity (the id it serves, or a checkpoint's resolved
path and fingerprint) is bound to the scorer, so the run's identity names the judge.

`Scoring.cached(store)` wraps that client in the run store's `CachedClient`: the judge's calls
are stored in calls.sqlite beside the system's, so a rerun (after a kill) sends no finished
judge call again. Its counters say how many judge calls were sent and reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mars_eval.models import make_client
from mars_eval.models.base import ConfigError, ModelClient
from mars_eval.models.http import HTTPClient
from mars_eval.run.cached_client import CachedClient
from mars_eval.run.identity import engine_kind, model_identity
from mars_eval.run.store import RunStore
from mars_eval.tasks.scorers import DEFAULT_SCORER, ScoreInput, Scorer, Verdict, make_scorer


@dataclass
class Scoring:
    """The scorer of a run and its judge client (None for a scorer without a model)."""

    scorer: Scorer
    inner: ModelClient | None = None  # the judge's own client (or the run's, shared)
    owned: bool = False  # made here, so closed here
    client: CachedClient | None = None  # `inner` answered from the run store (`cached`)
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def default(self) -> bool:
        return self.scorer.name == DEFAULT_SCORER

    def cached(self, store: RunStore) -> None:
        if self.inner is not None:
            key_model = (getattr(self.scorer, "model_identity", None) or {}).get("model") or self.inner.model
            lazy = not isinstance(self.inner, HTTPClient)
            self.client = CachedClient(self.inner, store, lazy_check=lazy, key_model=str(key_model))

    async def score(self, task: Any, item: ScoreInput) -> Verdict:
        return await self.scorer.score(task, item, self.client)

    def summary(self) -> dict[str, Any]:
        """What a run's summary says of a scorer other than the default (nothing for it)."""
        if self.default:
            return {}
        out: dict[str, Any] = {"scorer": self.scorer.identity()}
        if self.client is not None:
            out["judge_calls_sent"] = self.client.sent
            out["judge_calls_reused"] = self.client.reused
        return out

    async def aclose(self) -> None:
        if self.owned and self.inner is not None:
            await self.inner.aclose()


def judge_client(
    cfg: Any, options: dict[str, Any], run_client: ModelClient | None
) -> tuple[ModelClient | None, bool]:
    """(the judge's client, whether it was made here): the run's own client when the judge names
    no model and no endpoint, else a new one with the run's connection settings."""
    model, url = options.get("judge_model"), options.get("judge_base_url")
    if model is None and url is None:
        return run_client, False
    if model is None and not cfg.base_urls:
        model = cfg.model  # an endpoint for the judge, the run's in-process model named
    client = make_client(
        model,
        [url] if url else None,
        concurrency=cfg.concurrency,
        timeout=cfg.request_timeout,
        max_attempts=cfg.max_attempts,
        engine=cfg.engine,
        http_client=cfg.http_client,
        dtype=cfg.dtype,
    )
    return client, True


async def prepare_scoring(cfg: Any, run_client: ModelClient | None = None) -> Scoring:
    """The run's scorer (ConfigError, one line, before any work) with its judge client checked
    (an endpoint) and its model identity bound; sets `cfg.scoring` (the run identity's part)."""
    scorer = make_scorer(cfg.scorer, cfg.scorer_options, cfg.pack())
    scoring = Scoring(scorer)
    if scorer.uses_model:
        inner, owned = judge_client(cfg, scorer.options, run_client)
        if inner is None:  # rescore: the source's endpoints are not recorded
            raise ConfigError(
                f"--scorer {scorer.name}: name the judge with --judge-model or --judge-base-url"
            )
        scoring.inner, scoring.owned = inner, owned
        try:
            if isinstance(inner, HTTPClient) and inner is not run_client:
                await inner.check()  # the run's own endpoint is checked by the run
            name = inner.model or scorer.options.get("judge_model")  # in-process: the resolved folder
            bind = getattr(scorer, "bind", None)
            if bind is not None:
                bind(model_identity(str(name), engine_kind(inner)))
        except BaseException:
            await scoring.aclose()
            raise
    if not scoring.default:
        cfg.scoring = scorer.identity()
    return scoring
