"""Stateful operators that aggregate or rank: GroupAggregate, WindowAggregate,
OverAggregate, Rank (Top-N), Deduplicate and their window forms.

Their changelog rules are Flink's (FlinkChangelogModeInferenceProgram): a group
aggregate updates ([I,UB,UA], and D when its input retracts); a window aggregate, window
Top-N or window deduplication is insert-only and needs insert-only input; a Rank may
emit anything; a Deduplicate is insert-only only when it keeps the first row on
processing time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from streamsql.changelog import INSERT_ONLY, ChangelogMode
from streamsql.plan.operators import ALL_CHANGES, I_AND_U, Operator, WindowSpec, keys_text


@dataclass(eq=False)
class GroupAggregate(Operator):
    """A non-windowed aggregate: updates its result per key ([I,UB,UA]), and also deletes
    ([D]) when its input retracts; state per key (TTL or unbounded)."""

    group_by: list[str] = field(default_factory=list)
    select: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "GroupAggregate"
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        updating_input = any(not i.mode.insert_only for i in self.inputs)
        return ALL_CHANGES if updating_input else ChangelogMode(I_AND_U)

    def attributes(self):
        parts = [("groupBy", keys_text(self.group_by))] if self.group_by else []
        return parts + [("select", ", ".join(self.select))]


@dataclass(eq=False)
class WindowAggregate(Operator):
    """A window TVF aggregate: one final row per window when the watermark passes it."""

    group_by: list[str] = field(default_factory=list)
    window: WindowSpec | None = None
    select: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "WindowAggregate"
    requires_insert_only: ClassVar[bool] = True

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    @property
    def state(self) -> str:
        return "processing time" if self.window and self.window.proctime else "watermark"

    def attributes(self):
        parts = [("groupBy", keys_text(self.group_by))] if self.group_by else []
        return parts + [("window", str(self.window)), ("select", ", ".join(self.select))]


@dataclass(eq=False)
class OverAggregate(Operator):
    """OVER windows. Flink's streaming planner needs insert-only input here
    ("OverAggregate doesn't support consuming update changes"); over an updating input
    the result can only be updating too, which is what this node then reports."""

    partition_by: list[str] = field(default_factory=list)
    order_by: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    note: str | None = None
    kind: ClassVar[str] = "OverAggregate"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "per key"

    def attributes(self):
        return [("partitionBy", keys_text(self.partition_by)), ("orderBy", keys_text(self.order_by)),
                ("select", ", ".join(self.names)), ("calls", ", ".join(self.calls))] + (
                    [("note", self.note)] if self.note else [])


# -- ranks ---------------------------------------------------------------------------


@dataclass(eq=False)
class Rank(Operator):
    """Top-N (ROW_NUMBER ... WHERE rn <= N): rows enter and leave the top N ([I,UB,UA,D]).
    ``rank_type`` RANK or DENSE_RANK is planned too, and refused in streaming mode, as
    Flink refuses it (``changelog_checks``)."""

    partition_by: list[str] = field(default_factory=list)
    order_by: list[str] = field(default_factory=list)
    rank_end: int = 1
    output_rank: bool = False
    rank_type: str = "ROW_NUMBER"
    kind: ClassVar[str] = "Rank"
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        return ALL_CHANGES

    def attributes(self):
        strategy = "AppendFastStrategy" if all(i.mode.insert_only for i in self.inputs) else "RetractStrategy"
        return [("strategy", strategy), ("rankType", self.rank_type),
                ("rankRange", f"rankStart=1, rankEnd={self.rank_end}"),
                ("partitionBy", keys_text(self.partition_by)), ("orderBy", keys_text(self.order_by)),
                ("select", ", ".join(self.names))]


@dataclass(eq=False)
class WindowRank(Rank):
    """Window Top-N (partitioned by window_start, window_end): final when the window is."""

    window: WindowSpec | None = None
    kind: ClassVar[str] = "WindowRank"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "watermark"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("window", str(self.window)), *super().attributes()[1:]]


@dataclass(eq=False)
class Deduplicate(Operator):
    """ROW_NUMBER() = 1 ordered by a time attribute. Only keeping the first row on
    processing time is insert-only; keeping the last row, or the first on event time
    (a row with an earlier time may still come), updates."""

    keys: list[str] = field(default_factory=list)
    keep_last: bool = False
    rowtime: bool = True
    kind: ClassVar[str] = "Deduplicate"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        return ALL_CHANGES if self.keep_last or self.rowtime else INSERT_ONLY

    def attributes(self):
        return [("keep", "LastRow" if self.keep_last else "FirstRow"), ("key", keys_text(self.keys)),
                ("order", "ROWTIME" if self.rowtime else "PROCTIME")]


@dataclass(eq=False)
class WindowDeduplicate(Deduplicate):
    window: WindowSpec | None = None
    kind: ClassVar[str] = "WindowDeduplicate"
    keeps_state: ClassVar[str] = "watermark"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("window", str(self.window)), *super().attributes()]
