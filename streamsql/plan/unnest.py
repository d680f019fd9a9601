"""UNNEST as Flink plans it: its columns, their names and types, and the forms it refuses.

Flink's UNNEST takes one ARRAY, MULTISET or MAP. Its columns are the element (an ARRAY's),
the element's fields (an ARRAY of ROWs: each field a column), or the key and value (a
MAP); WITH ORDINALITY adds the element's number from 1, an INT. ``normalize`` (before names
are resolved) keeps the ordinality among the alias's columns, flagged on the node
(``spark.unnest.ORDINALITY``), so that sqlglot types it as Flink does (its own UNNEST
ordinality is a BIGINT). ``annotate`` types the UNNEST as a STRUCT of those columns, which
sqlglot hands to its columns. ``check`` (once typed) refuses what Flink refuses.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.spark.unnest import ORDINALITY


def normalize(query: exp.Expression) -> None:
    for unnest in list(query.find_all(exp.Unnest)):
        if len(unnest.expressions) != 1:
            raise ValidationError("UNNEST takes one ARRAY, MULTISET or MAP", _position(unnest))
        alias = unnest.args.get("alias")
        offset = unnest.args.get("offset")
        if alias is None or not alias.columns:
            raise ValidationError("UNNEST needs the names of its columns here: write UNNEST(..) AS t(c1, ...)"
                                  " (WITH ORDINALITY: the position last)", _position(unnest))
        if isinstance(offset, exp.Identifier):
            alias.append("columns", offset)
            unnest.set("offset", None)
            unnest.set(ORDINALITY, True)
        elif offset:
            raise ValidationError("UNNEST .. WITH ORDINALITY needs a name for the position: AS t(c1, ..., pos)",
                                  _position(unnest))
        _check_join(unnest)


def _check_join(unnest: exp.Unnest) -> None:
    join = unnest.parent
    if not isinstance(join, exp.Join):
        return
    on = join.args.get("on")
    if (join.side or "").upper() in ("RIGHT", "FULL") or (
            (join.side or "").upper() == "LEFT" and not (isinstance(on, exp.Boolean) and on.this)):
        raise ValidationError("an outer join with UNNEST is a LEFT JOIN .. ON TRUE", _position(unnest))
    select = join.parent
    joins = select.args.get("joins") or []
    after = joins[joins.index(join) + 1:] if join in joins else []
    if any(not isinstance(j.this, exp.Unnest) for j in after):
        raise ValidationError("a join after a join with UNNEST is not supported: join first, then UNNEST"
                              " (or UNNEST in a subquery)", _position(unnest))


def element_columns(data_type: exp.DataType | None) -> list[tuple[str | None, exp.DataType]] | None:
    """(name, type) of the columns one element of an ARRAY or MAP gives; None for another type."""
    if data_type is None:
        return None
    if data_type.is_type(exp.DType.MAP) and len(data_type.expressions) == 2:
        return [("KEY", data_type.expressions[0]), ("VALUE", data_type.expressions[1])]
    if data_type.is_type(exp.DType.ARRAY) and data_type.expressions:
        element = data_type.expressions[0]
        if element.is_type(exp.DType.STRUCT):
            return [(f.name, f.args.get("kind")) for f in element.expressions]
        return [(None, element)]
    return None


def annotate(self, e: exp.Unnest) -> exp.Unnest:
    """The UNNEST typed as a STRUCT of its alias's columns (sqlglot types them from it)."""
    argument = e.expressions[0] if e.expressions else None
    columns = element_columns(argument.type if argument is not None else None)
    alias = e.args.get("alias")
    names = [c.name for c in alias.columns] if alias is not None else []
    if columns is None or not names:
        return self._set_type(e, exp.DType.UNKNOWN)
    types = [t for _, t in columns] + ([exp.DataType.build("INT")] if e.args.get(ORDINALITY) else [])
    if len(types) != len(names):
        return self._set_type(e, exp.DType.UNKNOWN)
    fields = [exp.ColumnDef(this=exp.to_identifier(n, quoted=True), kind=t.copy()) for n, t in zip(names, types)]
    return self._set_type(e, exp.DataType(this=exp.DType.STRUCT, expressions=fields, nested=True))


def check(query: exp.Expression) -> None:
    """Flink's errors for an UNNEST of something else than a collection, or with another
    number of column names than its elements have."""
    for unnest in query.find_all(exp.Unnest):
        argument = unnest.expressions[0]
        columns = element_columns(argument.type)
        if argument.type is None or argument.type.this == exp.DType.UNKNOWN:
            continue
        if columns is None:
            raise ValidationError(f"Cannot apply 'UNNEST' to arguments of type 'UNNEST(<{argument.type.sql()}>)'."
                                  " Supported form(s): 'UNNEST(<MULTISET>)' 'UNNEST(<ARRAY>)' 'UNNEST(<MAP>)'",
                                  _position(unnest))
        alias = unnest.args["alias"]
        names = len(alias.columns) - (1 if unnest.args.get(ORDINALITY) else 0)
        if names != len(columns):
            listed = ", ".join(f"'{n or 'EXPR$0'}'" for n, _ in columns)
            raise ValidationError(f"List of column aliases must have same degree as table; table has {len(columns)}"
                                  f" columns ({listed}), whereas alias list has {names} columns", _position(unnest))


def _position(node: exp.Unnest):
    from streamsql.plan.objects import identifier_position

    return identifier_position(node.expressions[0] if node.expressions else node.args.get("alias"))
