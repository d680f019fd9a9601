"""Flink 2.3's changelog functions, planned: TO_CHANGELOG and FROM_CHANGELOG.

- ``TO_CHANGELOG(input => TABLE t)`` makes a changelog data: each row of t's changelog,
  whatever its kind, becomes an insert with an ``op`` column (first) naming the kind
  (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE, or the codes ``op_mapping`` gives them;
  a kind the mapping leaves out is dropped). Its output is insert-only.
- ``FROM_CHANGELOG(input => TABLE t)`` reads such data back: t is insert-only, its ``op``
  column (or ``op => DESCRIPTOR(c)``) holds each row's kind (or a code ``op_mapping``
  maps to one: ``MAP['c, r', 'INSERT', 'u', 'UPDATE_AFTER', ...]``), and its output is the
  retract changelog of the other columns. Flink 2.3 takes a mapping with UPDATE_BEFORE
  only (retract mode) and fails the job on a code the mapping lacks; so does streamsql.

Both are row-semantics functions in Flink 2.3 (no PARTITION BY). Each application is a
derived relation (``ChangelogRelation``), planned like a window TVF: the planner replaces
the FROM item by its name; ``ProcessTableFunction`` is its operator (the changelog modes);
spark.changelog_functions computes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sqlglot import exp

from streamsql.changelog import DELETE, INSERT, INSERT_ONLY, ROW_KINDS, UPDATE_AFTER, UPDATE_BEFORE, ChangelogMode
from streamsql.dialect.changelog_functions import ChangelogCall
from streamsql.dialect.windows import TableArgument
from streamsql.errors import ValidationError
from streamsql.plan.objects import Column
from streamsql.plan.operators import Operator
from streamsql.plan.positions import start_position
from streamsql.plan.types import build_type

KIND_NAMES = {INSERT: "INSERT", UPDATE_BEFORE: "UPDATE_BEFORE", UPDATE_AFTER: "UPDATE_AFTER", DELETE: "DELETE"}
_BY_NAME = {name: kind for kind, name in KIND_NAMES.items()}


@dataclass
class ChangelogRelation:
    """One TO_CHANGELOG or FROM_CHANGELOG application over a table or view."""

    name: str
    kind: str  # TO_CHANGELOG | FROM_CHANGELOG
    input_name: str  # the Spark name of the table or view it reads
    input_columns: list[Column]
    op_column: str  # TO: the column it adds; FROM: the input's column it reads
    # TO: row kind -> code (only kinds it forwards); FROM: code -> row kind
    mapping: dict[str, str] = field(default_factory=dict)
    names: list[str] | None = None  # `AS alias(c1, ...)`: the output columns' names

    @property
    def data_columns(self) -> list[Column]:
        """The input columns that pass through (a time attribute stays one, as in Flink)."""
        return [Column(c.name, c.type.copy(), time_attribute=c.time_attribute) for c in self.input_columns
                if self.kind == "TO_CHANGELOG" or c.name != self.op_column]

    @property
    def columns(self) -> list[Column]:
        own = self.data_columns
        if self.kind == "TO_CHANGELOG":
            own = [Column(self.op_column, build_type("STRING")), *own]
        if self.names:
            own = [Column(n, c.type, time_attribute=c.time_attribute) for n, c in zip(self.names, own)]
        return own

    def invocation(self) -> str:
        named = {KIND_NAMES.get(k, k): KIND_NAMES.get(v, v) for k, v in self.mapping.items()}
        mapping = ", ".join(f"'{k}', '{v}'" for k, v in named.items())
        return f"{self.kind}(TABLE({self.input_name}), DESCRIPTOR({self.op_column}), MAP[{mapping}])"


@dataclass(eq=False)
class ProcessTableFunction(Operator):
    """Flink's node for a process table function; here the changelog functions."""

    relation: ChangelogRelation | None = None
    kind: ClassVar[str] = "ProcessTableFunction"

    @property
    def requires_insert_only(self) -> bool:  # FROM_CHANGELOG reads an append-only table
        return self.relation is not None and self.relation.kind == "FROM_CHANGELOG"

    def provides(self) -> ChangelogMode:
        if self.relation is None or self.relation.kind == "TO_CHANGELOG":
            return INSERT_ONLY
        return ChangelogMode(frozenset(self.relation.mapping.values()) | {INSERT})

    def attributes(self) -> list[tuple[str, str]]:
        return [("invocation", self.relation.invocation()), ("select", ", ".join(self.names))]


def changelog_call_of(table: exp.Table) -> ChangelogCall | None:
    """The call inside ``[TABLE(]TO_CHANGELOG(...)[)]`` in a FROM clause, if that is what it is."""
    inner = table.this
    if isinstance(inner, exp.Anonymous) and inner.name.upper() == "TABLE" and len(inner.expressions) == 1:
        inner = inner.expressions[0]
    return inner if isinstance(inner, ChangelogCall) else None


def changelog_relation(call: ChangelogCall, name: str, input_name: str, columns: list[Column],
                       alias: exp.TableAlias | None) -> ChangelogRelation:
    """Check a call against its input's columns (Flink's validation, with positions)."""
    kind, argument = call.kind, call.args["table"]
    if isinstance(argument, TableArgument) and argument.args.get("partition_by"):
        raise ValidationError(f"Only tables with set semantics may be partitioned. Invalid PARTITION BY clause in the"
                              f" input of {kind} (Flink 2.3's {kind} takes a table of row semantics: no PARTITION BY)",
                              start_position(argument))
    op = _descriptor(call)
    names = {c.name for c in columns}
    if kind == "TO_CHANGELOG":
        if op in names:
            raise ValidationError(f"{kind}: Field names must be unique. Found duplicates: [{op}] (name the op column"
                                  " otherwise: op => DESCRIPTOR(name))", start_position(call.args["op"] or call))
        mapping = _to_mapping(call)
    else:
        column = next((c for c in columns if c.name == op), None)
        if column is None:
            raise ValidationError(f"{kind}: The op column '{op}' does not exist in the input schema (columns:"
                                  f" {', '.join(c.name for c in columns)})", start_position(call.args["op"] or call))
        if column.type.this not in (exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR, exp.DataType.Type.TEXT):
            from streamsql.dialect.flink import Flink

            raise ValidationError(f"{kind}: The op column '{op}' must be of STRING type, but was"
                                  f" '{column.type.sql(dialect=Flink)}'", start_position(call.args["op"] or call))
        mapping = _from_mapping(call)
    relation = ChangelogRelation(name, kind, input_name, columns, op, mapping)
    if alias is not None and alias.columns:
        wanted = len(relation.columns)
        if len(alias.columns) != wanted:
            raise ValidationError(f"{kind}: the alias names {len(alias.columns)} columns; the function has {wanted}"
                                  f" ({', '.join(c.name for c in relation.columns)})", start_position(alias))
        relation.names = [c.name for c in alias.columns]
    return relation


def _descriptor(call: ChangelogCall) -> str:
    node = call.args.get("op")
    if node is None:
        return "op"
    if not (isinstance(node, exp.Anonymous) and node.name.upper() == "DESCRIPTOR"):
        raise ValidationError(f"{call.kind}: the op column is given as DESCRIPTOR(name)", start_position(node))
    if len(node.expressions) != 1 or not isinstance(node.expressions[0], exp.Column):
        raise ValidationError(f"{call.kind}: The descriptor for argument 'op' must contain exactly one column name",
                              start_position(node))
    return node.expressions[0].name


def _entries(call: ChangelogCall) -> list[tuple[list[str], str]] | None:
    """``op_mapping``'s entries: (its key's comma-separated parts, value); None: not given."""
    node = call.args.get("op_mapping")
    if node is None:
        return None
    parts = node.expressions if node.name.upper() == "MAP" and isinstance(node, exp.Func) else []
    items = list(zip(parts[::2], parts[1::2])) if len(parts) % 2 == 0 else []
    if not items or not all(isinstance(part, exp.Literal) and part.is_string for pair in items for part in pair):
        raise ValidationError(f"{call.kind}: The 'op_mapping' argument must be a constant MAP literal of strings,"
                              " e.g. MAP['INSERT', 'I', 'DELETE', 'D']", start_position(node))
    return [([part.strip() for part in key.name.split(",")], value.name) for key, value in items]


def _kind(name: str, call: ChangelogCall) -> str:
    if name not in _BY_NAME:
        raise ValidationError(f"{call.kind}: Invalid target mapping for argument 'op_mapping'. Unknown change operation:"
                              f" '{name}'. Valid values are: [{', '.join(_BY_NAME)}]",
                              start_position(call.args["op_mapping"]))
    return _BY_NAME[name]


def _to_mapping(call: ChangelogCall) -> dict[str, str]:
    entries = _entries(call)
    if entries is None:
        return dict(KIND_NAMES)
    mapping: dict[str, str] = {}
    for parts, code in entries:
        kinds = [_kind(part, call) for part in parts]
        if len(set(kinds)) != len(kinds):
            raise ValidationError(f"{call.kind}: Invalid target mapping for argument 'op_mapping'. Duplicate change"
                                  f" operation: '{KIND_NAMES[next(k for k in kinds if kinds.count(k) > 1)]}'",
                                  start_position(call.args["op_mapping"]))
        for kind in kinds:  # a later entry for the same kind wins, as a MAP literal's later key does
            mapping[kind] = code
    return {kind: mapping[kind] for kind in ROW_KINDS if kind in mapping}


def _from_mapping(call: ChangelogCall) -> dict[str, str]:
    entries = _entries(call)
    if entries is None:
        return {name: kind for kind, name in KIND_NAMES.items()}
    by_key: dict[str, tuple[list[str], str]] = {}
    for parts, name in entries:  # the same key twice: the later entry, as a MAP literal keeps it
        by_key[",".join(parts)] = (parts, name)
    mapping: dict[str, str] = {}
    targets: set[str] = set()
    position = start_position(call.args["op_mapping"])
    for parts, name in by_key.values():
        kind = _kind(name, call)
        if kind in targets:
            raise ValidationError(f"{call.kind}: Invalid target mapping for argument 'op_mapping'. Duplicate change"
                                  f" operation: '{name}'. Use comma-separated keys to map multiple codes to the same"
                                  " operation (e.g., MAP['c, r', 'INSERT'])", position)
        targets.add(kind)
        for code in parts:
            if code in mapping:
                raise ValidationError(f"{call.kind}: the op code '{code}' is mapped twice in 'op_mapping'"
                                      f" (to {KIND_NAMES[mapping[code]]} and {name})", position)
            mapping[code] = kind
    if UPDATE_BEFORE not in targets:
        raise ValidationError(f"{call.kind}: The 'op_mapping' must include UPDATE_BEFORE for retract mode. Upsert mode"
                              " (without UPDATE_BEFORE) is not supported in this version (Flink 2.3)", position)
    return mapping
