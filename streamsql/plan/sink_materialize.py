"""Whether an INSERT's changes pass a sink upsert materializer, and how conflicts resolve.

When a query's upsert key differs from the sink's PRIMARY KEY, records of different upsert
keys map to one primary key: ``GROUP BY user_id, category`` into a table keyed by
``user_id`` writes two rows under one key, and a retraction of one would delete the other.
Flink 2.3 puts a materializer before such a sink and asks, at plan time, for the way it
resolves them (FlinkChangelogModeInferenceProgram, ``analyzeUpsertMaterializeStrategy``):

- ``ON CONFLICT DO DEDUPLICATE``: Flink's SinkUpsertMaterializer. It keeps every live row of
  the key in arrival order and writes the latest, going back to an earlier one when the
  latest is retracted (state: a key's whole history).
- ``ON CONFLICT DO NOTHING`` / ``DO ERROR``: Flink's WatermarkCompactingSinkMaterializer.
  A key's changes wait for the watermark; when it advances they are compacted (a retraction
  cancels its row), and one live row is written. Two or more: NOTHING keeps the first
  (the one written before, else the first to arrive), ERROR fails the job. Both need every
  source table to declare a watermark.

The rules, as Flink 2.3 applies them (checked against it on the same statements):

- the materializer runs when the sink takes updates, has a PRIMARY KEY, the query updates,
  and no upsert key of the query lies within the primary key;
- then an ON CONFLICT clause is required ('table.exec.sink.require-on-conflict' = 'false'
  restores the older behaviour: DEDUPLICATE without asking);
- ON CONFLICT on a sink that is given inserts only (an append-only sink, or an insert-only
  query) is refused;
- 'table.exec.sink.upsert-materialize': NONE never materializes (an ON CONFLICT is refused
  there: Flink ignores it silently, FLINK-41007), FORCE whenever the sink has a key and the
  query updates.

``materialization`` is pure: it reads the step and the operator plan, no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamsql.errors import ValidationError
from streamsql.plan.changelog_checks import INSERTS, accepted_kinds
from streamsql.plan.operators import Operator

REQUIRE = "table.exec.sink.require-on-conflict"
MATERIALIZE = "table.exec.sink.upsert-materialize"
WAITS_FOR_WATERMARK = ("NOTHING", "ERROR")  # they compact on the watermark


@dataclass(frozen=True)
class Materialization:
    """The materializer in front of a sink: its conflict strategy, the sink's primary key and
    the query's upsert key, both as the table's column names (no upsert key: rows are told
    apart whole)."""

    strategy: str
    primary_key: tuple[str, ...]
    upsert_key: tuple[str, ...] | None


def materialization(step, result: Operator, settings=None) -> Materialization | None:
    """The materializer the INSERT ``step`` needs in front of its sink, given its query's
    operator plan ``result`` (below the Sink), or None; a ValidationError where Flink 2.3
    refuses the statement."""
    table, conflict = step.table, step.conflict
    mode = (settings.get(MATERIALIZE) if settings is not None else None) or "auto"
    mode = mode.lower()
    updating = not result.mode.kinds <= INSERTS
    append_only = accepted_kinds(table) == INSERTS
    if conflict and (not updating or append_only):
        raise ValidationError(f"ON CONFLICT clause is only allowed for upsert sinks. The sink '{table.name}' is not"
                              " an upsert sink because it only accepts INSERT (append-only) changes.")
    if conflict and mode == "none":
        raise ValidationError(f"ON CONFLICT DO {conflict} has no effect with '{MATERIALIZE}' = 'NONE' (no"
                              f" materializer runs before the sink): drop the clause or the setting")
    if conflict in WAITS_FOR_WATERMARK:
        missing = [str(t.name) for t in step.plan.streamed_tables if t.watermark is None]
        if missing:
            raise ValidationError(
                f"ON CONFLICT DO {conflict} requires all source tables to define watermarks, but the following"
                f" source(s) do not: {', '.join(missing)}. Please add a WATERMARK declaration to these tables.")
    key = _primary_key_sources(step)
    if not updating or not table.primary_key or mode == "none" or append_only:
        return None
    within = [upsert for upsert in result.upsert_keys if None not in key and set(upsert) <= set(key)]
    if within and mode != "force":
        return None
    if conflict is None:
        require = ((settings.get(REQUIRE) if settings is not None else None) or "true").lower() == "true"
        if require and mode != "force":
            upsert = min(result.upsert_keys, key=len) if result.upsert_keys else None
            raise ValidationError(
                f"The query has an upsert key that differs from the primary key of the sink table '{table.name}'."
                f" Primary key: [{', '.join(table.primary_key)}], upsert key:"
                f" {'[' + ', '.join(upsert) + ']' if upsert else 'none'}. This can lead to non-deterministic results"
                " when multiple records with different upsert keys map to the same primary key. Please specify an"
                " ON CONFLICT clause to define how conflicts should be handled: ON CONFLICT DO DEDUPLICATE (update"
                " to the latest record, state intensive, since we need to keep the entire history), or ON CONFLICT"
                " DO ERROR (fail on conflict), or ON CONFLICT DO NOTHING (keep first record)."
                f" ('{REQUIRE}' = 'false' deduplicates without asking.)")
        conflict = "DEDUPLICATE"
    return Materialization(conflict, tuple(table.primary_key), _upsert_key_columns(step, result))


def _primary_key_sources(step) -> list[str | None]:
    """The query column feeding each primary key column (None: NULL, or a key column the
    table does not have physically)."""
    columns = [c.name for c in step.table.physical_columns]
    return [step.sources[columns.index(k)] if k in columns else None for k in step.table.primary_key]


def _upsert_key_columns(step, result: Operator) -> tuple[str, ...] | None:
    """The query's smallest upsert key as the table's columns (Flink's
    UpsertKeyUtil.getSmallestKey), or None when it has none the table is written with."""
    columns = [c.name for c in step.table.physical_columns]
    written = {}
    for column, source in zip(columns, step.sources):
        if source is not None:
            written.setdefault(source, column)
    keys = [tuple(written[c] for c in upsert) for upsert in sorted(result.upsert_keys, key=lambda k: (len(k), k))
            if all(c in written for c in upsert)]
    return keys[0] if keys else None


def describe(materialize: Materialization | None, conflict: str | None) -> list[tuple[str, str]]:
    """The Sink's attributes EXPLAIN prints, as Flink's: ``upsertMaterialize=[true]`` and
    ``conflictStrategy=[NOTHING]``."""
    attributes = [("upsertMaterialize", "true")] if materialize is not None else []
    return attributes + ([("conflictStrategy", conflict)] if conflict else [])
