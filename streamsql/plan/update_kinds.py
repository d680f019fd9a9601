"""Which update kinds each consumer needs, pushed down the plan as Flink's planner does.

Flink infers the changelog modes in two passes (FlinkChangelogModeInferenceProgram): which
kinds each operator *can* emit, bottom-up (``plan.operators``' ``provides``), and then which
update kinds each consumer *needs*, top-down (SatisfyUpdateKindTraitVisitor). An upsert
consumer needs only the UPDATE_AFTER of each update: ``blackhole``, and an upsert sink
(``jdbc``, ``upsert-kafka``, ``delta``, ``iceberg``) whose PRIMARY KEY is an upsert key of
the query's result. There an updating operator emits no UPDATE_BEFORE row at all: Flink's
EXPLAIN shows ``GroupAggregate(..., changelogMode=[I,UA])`` and a Top-N ``[I,UA,D]``.

The requirement passes down through a projection and a UNION ALL, as Flink's does. A Calc
with a condition needs both images (Flink's FLINK-9528: ``WHERE cnt < 10`` after an
aggregate must see a key's old row to retract it), as does every operator that consumes
updates (an aggregate, a join, a Top-N over a changelog) and every other consumer: print,
a debezium topic, the shell's changelog. Streamsql's operators that honour a requirement
for UPDATE_AFTER only (``Operator.update_before`` False): GroupAggregate, Rank and
Deduplicate. Other operators emit both images, as before.

``push_update_kinds`` marks the plan and infers the modes again; it is pure (no Spark).
"""

from __future__ import annotations

from streamsql.changelog import UPDATE_BEFORE, ChangelogMode
from streamsql.plan.aggregate_operators import Deduplicate, GroupAggregate, Rank, WindowDeduplicate, WindowRank
from streamsql.plan.changelog_checks import SINK_CHANGES
from streamsql.plan.operators import Calc, Operator, Sink, Union, walk

BEFORE_AND_AFTER = "BEFORE_AND_AFTER"
ONLY_UPDATE_AFTER = "ONLY_UPDATE_AFTER"


def sink_requirement(table, sources: list[str | None], result: Operator) -> tuple[str, str]:
    """The update kinds an INSERT's sink needs of its query's ``result``, and why.

    ``sources``: the query column feeding each physical column of the table (InsertStep)."""
    connector = table.options.get("connector", "")
    if connector == "blackhole" and not table.primary_key:
        return ONLY_UPDATE_AFTER, "a blackhole sink takes UPDATE_AFTER only"
    if (SINK_CHANGES.get(connector) != "upsert" and connector != "blackhole") or not table.primary_key:
        return BEFORE_AND_AFTER, f"a {connector} sink takes both images of an update"
    columns = [c.name for c in table.physical_columns]
    key = {sources[columns.index(k)] for k in table.primary_key if k in columns}
    if None not in key and any(set(upsert) == key for upsert in result.upsert_keys):
        return ONLY_UPDATE_AFTER, f"the sink's PRIMARY KEY ({', '.join(table.primary_key)}) is the result's upsert key"
    return BEFORE_AND_AFTER, (f"the sink's PRIMARY KEY ({', '.join(table.primary_key)}) is not an upsert key of"
                              " the result")


def push_update_kinds(root: Operator, required: str) -> None:
    """Mark each updating operator with what its consumer needs, then infer the modes again."""
    _visit(root, required)
    for node in reversed(list(walk(root))):  # inputs before the nodes reading them
        node.mode = _emitted(node)


def upsert_producers(root: Operator) -> list[Operator]:
    """The operators told to emit no UPDATE_BEFORE."""
    return [node for node in walk(root) if not node.update_before]


def top_operator(root: Operator) -> Operator:
    """The query's last operator below its sink and projections: the one whose changes the
    sink takes as they are."""
    node = root
    while isinstance(node, (Sink, Calc)) and len(node.inputs) == 1:
        node = node.inputs[0]
    return node


def _visit(node: Operator, required: str) -> None:
    if isinstance(node, Calc):
        below = BEFORE_AND_AFTER if node.condition else required
    elif isinstance(node, (Union, Sink)):
        below = required
    elif _honours(node):
        node.update_before = required == BEFORE_AND_AFTER
        below = BEFORE_AND_AFTER
    else:
        below = BEFORE_AND_AFTER
    for child in node.inputs:
        _visit(child, below)


def _honours(node: Operator) -> bool:
    """An operator whose own changes can be emitted without their before-images (it emits
    each UPDATE_AFTER under the key of the row it replaces)."""
    if isinstance(node, (WindowRank, WindowDeduplicate)):
        return False
    return isinstance(node, (GroupAggregate, Rank, Deduplicate))


def _emitted(node: Operator) -> ChangelogMode:
    mode = node.provides()
    if node.update_before or UPDATE_BEFORE not in mode.kinds:
        return mode
    return ChangelogMode(mode.kinds - {UPDATE_BEFORE})
