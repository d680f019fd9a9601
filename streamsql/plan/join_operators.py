"""Join operators: regular joins, interval joins, window joins and temporal joins.

An inner (or semi) regular join forwards its inputs' kinds and an outer (or anti) join
retracts; interval and window joins need insert-only input and emit inserts only; a
temporal join forwards its left input's kinds (Flink's rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from streamsql.changelog import INSERT_ONLY, ChangelogMode
from streamsql.plan.operators import ALL_CHANGES, Operator, WindowSpec, modes_union

_JOIN_TYPES = {"": "InnerJoin", "INNER": "InnerJoin", "LEFT": "LeftOuterJoin", "RIGHT": "RightOuterJoin",
               "FULL": "FullOuterJoin", "SEMI": "LeftSemiJoin", "ANTI": "LeftAntiJoin", "CROSS": "InnerJoin"}


@dataclass(eq=False)
class Join(Operator):
    """A regular join: both sides kept in state (TTL or unbounded). An inner (or semi) join
    forwards its inputs' kinds; an outer (or anti) join retracts its null-padded rows."""

    join_type: str = "InnerJoin"
    condition: str = ""
    side_ttls: tuple = (None, None)  # each side's STATE_TTL hint (a duration), before state_ttl
    # per side, (alias, time column, ms) when the watermark retires its rows (join_retiring)
    retired: tuple = (None, None)
    kind: ClassVar[str] = "Join"
    keeps_state: ClassVar[str] = "per key"

    def retires(self) -> tuple[bool, bool]:
        """Per side, whether the watermark retires its rows: an inner join's insert-only side
        bounded by the other side's window ends (join_retiring)."""
        return tuple(self.join_type == "InnerJoin" and bound is not None and side.mode.insert_only
                     for bound, side in zip(self.retired, self.inputs))

    @property
    def state(self) -> str:
        retires = self.retires()
        if not any(self.side_ttls) and not any(retires):
            return super().state
        sides = ["watermark" if retired else f"TTL {ttl}" if (ttl := hinted or self.state_ttl) else "unbounded"
                 for hinted, retired in zip(self.side_ttls, retires)]
        return f"left {sides[0]}, right {sides[1]}"

    def provides(self) -> ChangelogMode:
        if self.join_type in ("InnerJoin", "LeftSemiJoin"):
            return modes_union(*(i.mode for i in self.inputs))
        return ALL_CHANGES

    def attributes(self):
        return [("joinType", self.join_type), ("where", self.condition or "true"), ("select", ", ".join(self.names))]


@dataclass(eq=False)
class IntervalJoin(Join):
    """Both rowtimes bounded against each other: rows leave state with the watermark;
    null-padded rows of an outer interval join are emitted once, when time has passed."""

    bounds: str = ""
    kind: ClassVar[str] = "IntervalJoin"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "watermark"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("joinType", self.join_type), ("windowBounds", self.bounds), ("where", self.condition),
                ("select", ", ".join(self.names))]


@dataclass(eq=False)
class WindowJoin(Join):
    """Two windowed inputs joined on window_start and window_end (and the same window)."""

    window: WindowSpec | None = None
    ends: tuple = ()  # ((left alias, column), (right alias, column)): the window_end equality
    kind: ClassVar[str] = "WindowJoin"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "watermark"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("window", str(self.window)), *super().attributes()]


@dataclass(eq=False)
class TemporalJoin(Join):
    """FOR SYSTEM_TIME AS OF: each left row joins the right version as of its time.
    Event time (TemporalJoin) keeps versions until the watermark passes them; processing
    time is a lookup (LookupJoin) and keeps no state. Forwards the left input's kinds."""

    rowtime: bool = True
    kind: ClassVar[str] = "TemporalJoin"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.rowtime:
            self.bounded = self.inputs[0].bounded  # a lookup reads the right side per row

    @property
    def state(self) -> str:
        return "watermark" if self.rowtime else "none"

    def describe(self) -> str:
        return super().describe() if self.rowtime else super().describe().replace("TemporalJoin(", "LookupJoin(", 1)

    def provides(self) -> ChangelogMode:
        return self.inputs[0].mode
