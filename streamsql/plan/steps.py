"""What the planner hands the runtime: one step per statement, and the plan of a query."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from sqlglot import exp

from streamsql.plan.objects import DEFAULT_CATALOG, DEFAULT_DATABASE, CatalogObject, Column, ObjectName, TableDef
from streamsql.plan.udfs import PythonFunction
from streamsql.plan.windows import WindowRelation


@dataclass
class QueryPlan:
    """A query with names resolved against the catalog and Flink's output columns."""

    query: exp.Query
    columns: list[Column]
    tables: list[TableDef] = field(default_factory=list)
    # Views and window relations by Spark name, each after the relations it reads.
    derived: dict[str, exp.Query | WindowRelation] = field(default_factory=dict)
    functions: list[PythonFunction] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # headers to show: an unnamed expression as written
    # Tables read only as a lookup join's right side (plan.temporal.lookup_only): static on a stream
    lookups: set[str] = field(default_factory=set)
    # Its INSERT's sink waits for the watermark (ON CONFLICT DO NOTHING / DO ERROR compact on it)
    sink_waits: bool = False

    @property
    def streamed_tables(self) -> list[TableDef]:
        """The tables read as streams: all but the ones only looked up (a lookup join's right
        side, read afresh each micro-batch)."""
        return [t for t in self.tables if spark_name(t.name) not in self.lookups]

    @property
    def windows(self) -> list[WindowRelation]:
        return [d for d in self.derived.values() if isinstance(d, WindowRelation)]


@dataclass
class DefineStep:
    obj: CatalogObject
    if_not_exists: bool
    replace: bool = False


@dataclass
class DropStep:
    name: ObjectName
    kind: str
    if_exists: bool
    temporary: bool


@dataclass
class SetStep:
    key: str | None
    value: str | None


@dataclass
class QueryStep:
    plan: QueryPlan


@dataclass
class InsertStep:
    table: TableDef
    plan: QueryPlan
    overwrite: bool
    # For each physical column of the table, in its order: the name of the query column
    # (plan.columns[i].name) that feeds it, or None for NULL (plan.inserts).
    sources: list[str | None]
    fingerprint: str = ""  # plan.fingerprint: what must not change for the job to resume
    conflict: str | None = None  # ON CONFLICT DO NOTHING | ERROR | DEDUPLICATE (plan.sink_materialize)


@dataclass
class ResultStep:
    """A statement answered from the catalog alone (SHOW, DESCRIBE, USE, ...)."""

    columns: list[str]
    rows: list[tuple]


@dataclass
class ExplainStep:
    step: QueryStep | InsertStep


@dataclass
class JobsStep:
    every_run: bool = False  # SHOW JOBS ALL: each run of each job, not only its latest


@dataclass
class StopJobStep:
    job_id: str
    savepoint: bool
    drain: bool


@dataclass
class StatementSetStep:
    inserts: list[InsertStep]


Step = (DefineStep | DropStep | SetStep | QueryStep | InsertStep | ResultStep | ExplainStep | JobsStep
        | StopJobStep | StatementSetStep)


def spark_name(name: ObjectName) -> str:
    """The Spark temp-view name a catalog relation is registered under."""
    if name.catalog != DEFAULT_CATALOG:  # one Spark identifier: a name like `public.orders` made one, kept apart
        text = f"{name.catalog}__{name.database}__{name.name}"
        plain = re.sub(r"\W", "_", text)
        return plain if plain == text else f"{plain}_{hashlib.sha1(text.encode()).hexdigest()[:8]}"
    return name.name if name.database == DEFAULT_DATABASE else f"{name.database}__{name.name}"
