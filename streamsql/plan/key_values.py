"""``'key' = 'value'`` as Flink writes it: in a table's WITH (...), ALTER TABLE ... SET (...)
and SET, both sides quoted strings. sqlglot also reads ``'k' = 3``, ``'k' = v`` and
``'k' 'a' = 'b'`` (adjacent strings concatenated); Flink's parser refuses each."""

from __future__ import annotations

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position


def string_pair(key: exp.Expression | None, value: exp.Expression | None, form: str,
                at: exp.Expression | None = None) -> tuple[str, str]:
    """The key and the value, each a quoted string; ``form`` is the statement's shape for the
    message (e.g. "SET 'key' = 'value'"), ``at`` where to point when a side is missing."""
    for side, node in (("key", key), ("value", value)):
        if node is None:
            raise ValidationError(f"Expected {form}", start_position(at))
        if isinstance(node, exp.Concat):  # 'a' 'b'
            raise ValidationError(f"Expected {form}: the {side} must be one quoted string, found"
                                  f" {len(node.expressions)} strings side by side", start_position(node) or start_position(at))
        if not (isinstance(node, exp.Literal) and node.is_string):
            raise ValidationError(f"Expected {form}: the {side} must be a quoted string, found {node.sql()}"
                                  f" (write '{node.name or node.sql()}')", start_position(node) or start_position(at))
    return key.this, value.this
