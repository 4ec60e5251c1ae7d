"""A rich live view of training on a terminal: the latest step's key numbers, refreshed per step."""

from __future__ import annotations

import sys
from typing import Any

_SHOWN = (
    ("loss", "loss"),
    ("reward", "mean turn reward"),
    ("invalid_rate", "invalid turns"),
    ("adv_std", "advantage std"),
    ("kl", "KL (k3) to reference"),
    ("clip_frac", "clip fraction"),
    ("entropy", "entropy"),
    ("grad_norm", "grad norm"),
    ("lr", "learning rate"),
    ("rollout_tokens_per_s", "rollout tokens/s"),
    ("update_tokens_per_s", "update tokens/s"),
    ("step_s", "step time (s)"),
)


class LiveView:
    def __init__(self, enabled: bool, total: int):
        self.enabled = enabled and sys.stdout.isatty()
        self.total = total
        self._live = None
        self._last_eval: dict[str, float] = {}

    def __enter__(self) -> LiveView:
        if self.enabled:
            from rich.live import Live

            self._live = Live(self._render({"step": 0}), refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def _render(self, row: dict[str, Any]):
        from rich.table import Table

        table = Table(title=f"mars-train  step {row.get('step', 0)}/{self.total}", show_header=False)
        table.add_column("metric")
        table.add_column("value", justify="right")
        for key, label in _SHOWN:
            if key in row:
                table.add_row(label, f"{row[key]:.4g}")
        for key in sorted(k for k in row if k.startswith(("return/", "win/", "invalid/"))):
            table.add_row(key, f"{row[key]:.3f}")
        for key in sorted(self._last_eval):
            table.add_row(key, f"{self._last_eval[key]:.2f}")
        return table

    def update(self, row: dict[str, Any]) -> None:
        self._last_eval.update(
            {k: v for k, v in row.items() if k.startswith("eval/") and k.endswith("normalized")}
        )
        if self._live is not None:
            self._live.update(self._render(row))


_LINE_KEYS = (
    "loss",
    "return/tic_tac_toe/p0",
    "return/tic_tac_toe/p1",
    "invalid_rate",
    "kl",
    "clip_frac",
    "entropy",
)


def one_line(row: dict[str, Any]) -> str:
    """A step's key numbers in one log line (when the live view is off)."""
    parts = [f"step {row['step']}"]
    parts += [f"{k.split('/')[-1] if '/' in k else k}={row[k]:.3f}" for k in _LINE_KEYS if k in row]
    if "eval/mean_normalized" in row:
        parts.append(f"eval={row['eval/mean_normalized']:.1f}")
    parts.append(f"{row.get('step_s', 0):.1f}s")
    return " ".join(parts)
