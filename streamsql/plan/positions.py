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
    if not isinstance(node, (exp.Literal, exp.Func)) or "line" not in node.meta:  # a function: its name's token
        return None
    meta = node.meta
    if "start" in meta and "end" in meta:
        length = meta["end"] - meta["start"]
    elif isinstance(node, exp.Literal):
        length = len(node.this) - 1
    else:
        return None
    return Position(meta["line"], max(1, meta["col"] - length))
