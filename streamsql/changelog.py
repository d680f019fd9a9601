"""Flink's changelog model, shared by the planner (modes) and the runtime (row kinds).

A row of a changelog stream carries its kind, as Flink's RowKind does: ``+I`` (insert),
``-U`` (the old version of an updated row), ``+U`` (its new version), ``-D`` (delete).
Between streamsql's operators on Spark, the kind travels as data — a STRING column named
``ROWKIND_COLUMN`` placed first — so operators chain in Spark's append mode.

An operator's *changelog mode* is the set of kinds it may emit: insert-only (``+I``),
retract (``+I -U +U -D``), or upsert (``+I +U -D`` by a unique key, no ``-U``).
"""

from __future__ import annotations

from dataclasses import dataclass

ROWKIND_COLUMN = "__rowkind"
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = "+I", "-U", "+U", "-D"
ROW_KINDS = (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE)
ADDS = (INSERT, UPDATE_AFTER)  # kinds that add a row to the table the changelog describes
RETRACTS = (UPDATE_BEFORE, DELETE)  # kinds that take one back


@dataclass(frozen=True)
class ChangelogMode:
    kinds: frozenset[str]
    upsert_key: tuple[str, ...] | None = None  # set for upsert mode: the key -U is dropped by

    @property
    def insert_only(self) -> bool:
        return self.kinds == frozenset({INSERT})

    def __str__(self) -> str:
        if self.insert_only:
            return "insert-only"
        kinds = ",".join(k for k in ROW_KINDS if k in self.kinds)
        if self.upsert_key is not None:
            return f"upsert by ({', '.join(self.upsert_key)}) [{kinds}]"
        if UPDATE_AFTER in self.kinds and UPDATE_BEFORE not in self.kinds:
            return f"upsert [{kinds}]"  # updates without their before-images (plan.update_kinds)
        return f"retract [{kinds}]"


INSERT_ONLY = ChangelogMode(frozenset({INSERT}))
RETRACT = ChangelogMode(frozenset(ROW_KINDS))


def upsert(key: tuple[str, ...]) -> ChangelogMode:
    return ChangelogMode(frozenset({INSERT, UPDATE_AFTER, DELETE}), tuple(key))
