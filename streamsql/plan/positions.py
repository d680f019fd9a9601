"""Where an expression starts in the script, from the positions sqlglot recorded on its tokens."""

from __future__ import annotations

from sqlglot import exp

from streamsql.errors import Position
from streamsql.plan.objects import identifier_position


def start_position(node: exp.Expression | None) -> Position | None:
    """The earliest line and column of any identifier, literal or function name inside ``node``."""
    if node is None:
        return None
    added = {id(q) for column in node.find_all(exp.Column) for q in _added_qualifiers(column)}
    positions = [p for p in (_token_position(n) for n in node.walk() if id(n) not in added) if p is not None]
    return min(positions, key=lambda p: (p.line, p.col), default=None)


def _added_qualifiers(column: exp.Column) -> list[exp.Identifier]:
    """The table (or database) names qualifying a column that were not written before it:
    sqlglot's qualify copies them from where the table is named (``FROM t AS x``)."""
    name = identifier_position(column.this) if isinstance(column.this, exp.Identifier) else None
    if name is None:
        return []
    added, expected = [], name
    for part in reversed(column.parts[:-1]):
        at = identifier_position(part)
        written = at is not None and expected is not None and at.line == expected.line and at.col < expected.col \
            and expected.col - at.col <= len(part.name) + 3  # the name, its quotes and the dot
        if not written:
            added.append(part)
        expected = at if written else None
    return added


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
