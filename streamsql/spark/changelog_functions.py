"""TO_CHANGELOG and FROM_CHANGELOG (plan.changelog_functions) on Spark.

Between streamsql's stateful operators a row's kind is data (``__rowkind``), so over
unbounded input both functions are projections on a stage of their own
(``changelog_stage``): TO_CHANGELOG reads its input's kinds into the op column (codes by
``op_mapping``, kinds it leaves out filtered away) and emits inserts; FROM_CHANGELOG
reads the op column into ``__rowkind``, failing the job on a code its mapping lacks, as
Flink's does. Over inserts Spark streams TO_CHANGELOG itself: every op is INSERT's code.

As one bounded computation (``relation_sql``) an input is its final table: TO_CHANGELOG
gives each of its rows as an INSERT (the changelog Flink emits when the whole input
arrives in one mini-batch), and FROM_CHANGELOG the table its changes leave: each
distinct row as many times as it was added (INSERT, UPDATE_AFTER) more than taken back
(UPDATE_BEFORE, DELETE), whatever their order.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from streamsql.changelog import ADDS, INSERT, ROWKIND_COLUMN
from streamsql.plan.changelog_functions import ChangelogRelation
from streamsql.spark.dialect import spark_string

_INPUT = "__in"
_UNORDERED = (exp.DataType.Type.MAP, exp.DataType.Type.VARIANT)  # no GROUP BY takes them


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _unmapped_error(relation: ChangelogRelation, op: str) -> str:
    codes = ", ".join(relation.mapping).replace("%", "%%")
    return (f"raise_error(format_string({spark_string('FROM_CHANGELOG received op code %s, which its op_mapping does not map (codes: ' + codes + ')')},"
            f" nvl2({op}, format_string({spark_string(chr(39) + '%s' + chr(39))}, {op}), 'NULL')))")


def _kind_of(relation: ChangelogRelation, op: str) -> str:
    """Spark SQL for the row kind (+I, -U, +U, -D) of a FROM_CHANGELOG input row."""
    whens = " ".join(f"WHEN {spark_string(code)} THEN {spark_string(kind)}" for code, kind in relation.mapping.items())
    return f"CASE {op} {whens} ELSE {_unmapped_error(relation, op)} END"


def relation_sql(relation: ChangelogRelation, streaming: bool = False) -> str:
    """The relation as one Spark SQL query over its input's view: its input's final table
    (bounded), or, for TO_CHANGELOG over inserts, a stream. A streamed FROM_CHANGELOG's
    view only names its columns (for views over it): its stage reads the changes."""
    data = relation.data_columns
    names = [c.name for c in relation.columns]
    source = _q(relation.input_name)
    if streaming and relation.kind == "FROM_CHANGELOG":
        return f"SELECT {', '.join(f'{_q(c.name)} AS {_q(n)}' for c, n in zip(data, names))} FROM {source}"
    if relation.kind == "TO_CHANGELOG":
        code = relation.mapping.get(INSERT)
        values = [spark_string(code if code is not None else "")] + [_q(c.name) for c in data]
        select = ", ".join(f"{v} AS {_q(n)}" for v, n in zip(values, names))
        return f"SELECT {select} FROM {source}" + ("" if code is not None else " WHERE FALSE")
    sign = (f"CASE WHEN {_kind_of(relation, _q(relation.op_column))} IN ({', '.join(spark_string(k) for k in ADDS)})"
            " THEN 1 ELSE -1 END")
    columns = ", ".join(_q(c.name) for c in data)
    out = ", ".join(f"__row.{_q(c.name)} AS {_q(n)}" for c, n in zip(data, names))
    if any(c.type.find(exp.DataType) and any(t.this in _UNORDERED for t in c.type.find_all(exp.DataType)) for c in data):
        key = f"to_json(struct({columns}))"  # a MAP or VARIANT column: rows told apart by their JSON
        grouped = f"SELECT any_value(struct({columns})) AS __row, SUM({sign}) AS __n FROM {source} GROUP BY {key}"
    else:
        grouped = f"SELECT struct({columns}) AS __row, SUM({sign}) AS __n FROM {source} GROUP BY {columns}"
    return (f"SELECT {out} FROM (SELECT * FROM ({grouped}) WHERE __n > 0)"
            " LATERAL VIEW explode(sequence(1, __n)) __copies AS __copy")


def changelog_stage(compiler, relation: ChangelogRelation):
    """The stage computing the relation over unbounded input (a CalcStage), or None when
    Spark streams it itself (TO_CHANGELOG of a plain stream of inserts)."""
    from streamsql.spark.stateful.stages import CalcStage, Unsupported

    data = relation.data_columns
    names = [c.name for c in relation.columns]
    inner = exp.select(*[exp.column(c.name, _INPUT, quoted=True) for c in relation.input_columns]).from_(
        exp.Table(this=exp.to_identifier(relation.input_name, quoted=True),
                  alias=exp.TableAlias(this=exp.to_identifier(_INPUT))))
    inputs, changelogs = compiler._inputs(inner)
    source = inner.args["from_"].this.sql(dialect="spark", identify=True)
    kind = f"{_INPUT}.{ROWKIND_COLUMN}"
    if relation.kind == "TO_CHANGELOG":
        if not changelogs:
            return None
        whens = " ".join(f"WHEN {spark_string(k)} THEN {spark_string(code)}" for k, code in relation.mapping.items())
        values = [spark_string(INSERT), f"CASE {kind} {whens} END"] + [f"{_INPUT}.{_q(c.name)}" for c in data]
        kept = ", ".join(spark_string(k) for k in relation.mapping)
        where = f" WHERE {kind} IN ({kept})"
    else:
        if changelogs:  # refused by the operator plan first (FROM_CHANGELOG reads inserts)
            raise Unsupported("FROM_CHANGELOG over a changelog")
        values = [_kind_of(relation, f"{_INPUT}.{_q(relation.op_column)}")] + [f"{_INPUT}.{_q(c.name)}" for c in data]
        where = ""
    select = ", ".join(f"{v} AS {_q(n)}" for v, n in zip(values, [ROWKIND_COLUMN, *names]))
    query = sqlglot.parse_one(f"SELECT {select} FROM {source}{where}", dialect="spark")
    return CalcStage(inputs=inputs, query=query, rowkinds="insert" if relation.kind == "TO_CHANGELOG" else "changes")
