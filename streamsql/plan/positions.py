"""Where an expression starts in the script, from the positions sqlglot recorded on its tokens."""

from __future__ import annotations

from sqlglot import exp

from streamsql.errors import Position
from streamsql.plan.objects import identifier_position


def start_position(node: exp.Expression | None) -> Position | None:
    """The earliest line and column of any identifier, literal or function name inside ``node``."""
    if node is None:
        return None
    positions = [p for p in (_token_position(n) for n in node.walk()) if p is not None]
    return min(positions, key=lambda p: (p.line, p.col), default=None)


def _token_position(node: exp.Expression) -> Position | None:
    if isinstance(node, exp.Identifier):
        return identifier_position(node)
    if isinstance(node, exp.Func) and {"line", "col", "start", "end"} <= node.meta.keys():  # its name
        return Position(node.meta["line"], max(1, node.meta["col"] - (node.meta["end"] - node.meta["start"])))
    if isinstance(node, exp.Literal) and "line" in node.meta:
        meta = node.meta
        length = meta["end"] - meta["start"] if "start" in meta and "end" in meta else len(node.this) - 1
        return Position(meta["line"], max(1, meta["col"] - length))
    return None
