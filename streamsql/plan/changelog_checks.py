"""Plan-time changelog checks: can each consumer take the changes its input produces?

Sink capabilities live here, in one table: which row kinds each connector accepts when
written to. A sink that takes only inserts (``filesystem``) is refused an updating
query before anything runs, with Flink's message:

    Table sink 'default_catalog.db.x' doesn't support consuming update changes which is
    produced by node GroupAggregate(groupBy=[a], select=[a, COUNT(*) AS c])

The node named is the one that produces the changes, found as Flink finds it: the
requirement passes through nodes that forward their input's kinds (Calc, Union, the
window TVF, Correlate) and stops at the first that makes them.

Operators that need insert-only input (OverAggregate, WindowAggregate, interval and
window joins, Deduplicate, ...) are checked too. Flink's streaming mode rejects such a
plan ("OverAggregate doesn't support consuming update changes ..."). streamsql makes one
exception on purpose: over **bounded** input it runs the query to its end and gives the
final answer (Flink's batch result) — Nexmark q6 is an OVER over a Top-1. So
``consumption_issues`` returns each case with whether its input is bounded, and
``check_consumption`` raises only for unbounded input, returning the bounded cases as
warnings for the engine to show. A Top-N by RANK() or DENSE_RANK() is one such case too:
Flink's streaming Rank has ROW_NUMBER() only ("RANK() on streaming table is not supported
currently").
"""

from __future__ import annotations

from dataclasses import dataclass

from streamsql.changelog import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from streamsql.errors import ValidationError
from streamsql.plan.objects import TableDef
from streamsql.plan.operators import Calc, Correlate, Operator, Union, WindowAssign, walk

ALL_KINDS = frozenset({INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE})
INSERTS = frozenset({INSERT})

# What each connector accepts as a sink (Flink's DynamicTableSink#getChangelogMode).
SINK_CHANGES: dict[str, str] = {
    "filesystem": "insert-only",   # files are append-only
    "print": "all",                # prints +I, -U, +U, -D rows
    "blackhole": "all",            # swallows anything
    "jdbc": "upsert",              # upserts by the PRIMARY KEY; insert-only without one
    "delta": "upsert",             # MERGE by the PRIMARY KEY; appends without one (runtime.delta)
    "iceberg": "upsert",           # by the PRIMARY KEY (copy-on-write, runtime.iceberg.upsert); appends without one
    "kafka": "insert-only",        # a topic is an append-only log (Flink's KafkaDynamicSink)
    "upsert-kafka": "upsert",      # records by key, -D as tombstones (a PRIMARY KEY is required)
}

_TRANSPARENT = (Calc, Correlate, Union, WindowAssign)  # forward the requirement to their inputs


def accepted_kinds(sink: TableDef) -> frozenset[str]:
    capability = SINK_CHANGES.get(sink.options.get("connector", ""), "insert-only")
    if capability == "all" or (capability == "upsert" and sink.primary_key):
        return ALL_KINDS
    return INSERTS


def _kinds_text(kinds: frozenset[str]) -> str:
    """Flink's ModifyKind names, in its order: 'update', 'delete', 'update and delete'."""
    names = []
    if kinds & {UPDATE_BEFORE, UPDATE_AFTER}:
        names.append("update")
    if DELETE in kinds:
        names.append("delete")
    return " and ".join(names)


def producer(node: Operator, accepted: frozenset[str]) -> Operator:
    """The node that makes changes outside `accepted` (looking through forwarding nodes)."""
    if isinstance(node, _TRANSPARENT):
        for child in node.inputs:
            if not child.mode.kinds <= accepted:
                return producer(child, accepted)
    return node


def check_sink(root: Operator, sink: TableDef) -> None:
    """Raise ValidationError when the query's changes are more than the sink accepts."""
    accepted = accepted_kinds(sink)
    extra = root.mode.kinds - accepted
    if not extra:
        return
    node = producer(root, accepted)
    raise ValidationError(
        f"Table sink '{sink.name}' doesn't support consuming {_kinds_text(extra)} changes"
        f" which is produced by node {node.describe()}"
    )


@dataclass
class ConsumptionIssue:
    consumer: Operator
    producer: Operator
    message: str
    bounded: bool  # all of the consumer's input is bounded: streamsql runs it to its end


def consumption_issues(root: Operator) -> list[ConsumptionIssue]:
    """Each operator that needs insert-only input but gets updates, and each Top-N by
    RANK() or DENSE_RANK() (Flink's streaming Rank has ROW_NUMBER() only), with Flink's
    message. A window Top-N by RANK() or DENSE_RANK() runs, where Flink refuses it ("..
    not supported on Window TopN currently"): its windows are ranked once, final, so ties
    never move (``spark.stateful.ranking``)."""
    issues = []
    for node in walk(root):
        rank_type = getattr(node, "rank_type", "ROW_NUMBER")
        if rank_type != "ROW_NUMBER" and node.kind != "WindowRank":
            message = f"{rank_type}() on streaming table is not supported currently (a streaming Top-N ranks by ROW_NUMBER()"
            message += f"; batch mode, SET 'execution.runtime-mode' = 'batch', takes {rank_type}())"
            issues.append(ConsumptionIssue(node, node, message, node.bounded))
        if not node.requires_insert_only:
            continue
        for child in node.inputs:
            if child.mode.insert_only:
                continue
            source = producer(child, INSERTS)
            message = (f"{node.kind} doesn't support consuming {_kinds_text(child.mode.kinds - INSERTS)} changes"
                       f" which is produced by node {source.describe()}")
            issues.append(ConsumptionIssue(node, source, message, node.bounded))
    return issues


def check_consumption(root: Operator) -> list[str]:
    """Raise for an issue over unbounded input; the bounded ones come back as warnings."""
    warnings = []
    for issue in consumption_issues(root):
        # FROM_CHANGELOG reads a changelog written as data: another changelog is no such data
        if not issue.bounded or issue.consumer.kind == "ProcessTableFunction":
            raise ValidationError(issue.message)
        warnings.append(issue.message + " (the input is bounded: streamsql computes the final result at its end)")
    return warnings
