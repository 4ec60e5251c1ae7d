"""A sample's system structure for its transcript page: DyLAN's layers, MacNet's graph,
AgentVerse's turns (read from the sample's `details`; other systems have none)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape


def structure_of(rec: dict[str, Any]) -> dict[str, Any] | None:
    details = rec.get("details") or {}
    if not isinstance(details, dict):
        return None
    if isinstance(details.get("graph"), dict):
        graph = details["graph"]
        return {
            "kind": "graph",
            "graph": graph,
            "svg": graph_svg(graph),
            "aggregated": details.get("aggregated", []),
        }
    if isinstance(details.get("layers"), list) and isinstance(details.get("importance"), dict):
        return {
            "kind": "layers",
            "layers": details["layers"],
            "picked": details.get("picked") or [],
            "importance": details["importance"],
        }
    if isinstance(details.get("turns"), list) and details["turns"] and "roles" in details["turns"][0]:
        return {"kind": "turns", "turns": details["turns"]}
    return None


def graph_svg(graph: dict[str, Any]) -> Markup:
    """The graph drawn layer by layer, left to right (an inline SVG; labels escaped)."""
    layers = [list(map(str, layer)) for layer in graph.get("layers") or []]
    pos: dict[str, tuple[int, int]] = {}
    for i, layer in enumerate(layers):
        for j, node in enumerate(layer):
            pos[node] = (50 + 120 * i, 30 + 60 * j)
    width = 100 + 120 * max(len(layers) - 1, 0)
    height = 60 + 60 * max((len(layer) for layer in layers), default=1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="agent graph"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        f'markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>'
    ]
    for u, v in graph.get("edges") or []:
        if str(u) in pos and str(v) in pos:
            (x1, y1), (x2, y2) = pos[str(u)], pos[str(v)]
            parts.append(
                f'<line x1="{x1 + 22}" y1="{y1}" x2="{x2 - 22}" y2="{y2}" stroke="#888" '
                f'marker-end="url(#arrow)"><title>{escape(u)} → {escape(v)}</title></line>'
            )
    for node, (x, y) in pos.items():
        parts.append(
            f'<g><circle cx="{x}" cy="{y}" r="20" fill="#eef" stroke="#446"/>'
            f'<text x="{x}" y="{y + 4}" text-anchor="middle" font-size="10">{escape(node)}</text></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
