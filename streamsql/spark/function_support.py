"""What the Spark translations of Flink's built-ins share: their errors and NULL handling."""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.functions import FlinkCall
from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position

_NAMES = {"flinkdateformat": "DATE_FORMAT", "similarto": "SIMILAR TO", "currenttime": "CURRENT_TIME"}


def unsupported(e: exp.Expression, why: str) -> ValidationError:
    """The plan-time error for a form of a built-in that cannot run as Flink runs it."""
    return ValidationError(f"{call_name(e)}: {why}", start_position(e))


def call_name(e: exp.Expression) -> str:
    return e.name if isinstance(e, FlinkCall) else _NAMES.get(e.key, e.key.upper())


def null_if_any_null(args: list[str], sql: str) -> str:
    """``sql``, or NULL when any argument is NULL (Flink's rule for most functions)."""
    return f"CASE WHEN {' OR '.join(f'{a} IS NULL' for a in args)} THEN NULL ELSE {sql} END"
