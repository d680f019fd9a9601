"""DDL that derives one table definition from another: CREATE TABLE ... LIKE,
CREATE TABLE ... AS SELECT, ALTER TABLE ... SET / RESET / RENAME TO.

Each produces a plain CREATE TABLE statement, so the catalog stores (and SHOW CREATE
TABLE shows) the resulting definition, not how it was derived.
"""

from __future__ import annotations

import re

from sqlglot import exp

from streamsql.dialect.flink import Flink
from streamsql.errors import ValidationError
from streamsql.plan.key_values import string_pair
from streamsql.plan.objects import Column, TableDef, identifier_position
from streamsql.plan.positions import start_position

_LIKE_OPTIONS = re.compile(r"(INCLUDING|EXCLUDING|OVERWRITING)\s+(ALL|OPTIONS|WATERMARKS|GENERATED|CONSTRAINTS|PARTITIONS)", re.I)


def with_options(ddl: exp.Create, options: dict[str, str], name: exp.Table | None = None) -> exp.Create:
    """A copy of a CREATE TABLE with its WITH options replaced (and optionally renamed)."""
    ddl = ddl.copy()
    props = ddl.args.get("properties") or exp.Properties(expressions=[])
    kept = [p for p in props.expressions if type(p) is not exp.Property]
    kept += [exp.Property(this=exp.Literal.string(k), value=exp.Literal.string(v)) for k, v in options.items()]
    ddl.set("properties", exp.Properties(expressions=kept))
    if name is not None:
        target = ddl.this if isinstance(ddl.this, exp.Schema) else ddl
        target.set("this", name.copy())
    return ddl


def resolve_like(create: exp.Create, source: TableDef) -> exp.Create:
    """CREATE TABLE t [(extra columns)] WITH (...) LIKE s [(like options)]: Flink merges s's
    columns, watermark and options in (default INCLUDING ALL OVERWRITING OPTIONS)."""
    like = create.find(exp.LikeProperty)
    # sqlglot reads `LIKE s (EXCLUDING OPTIONS)` as a column list of s; the words are what count.
    written = like.expressions or (like.this.expressions if isinstance(like.this, exp.Schema) else [])
    options_text = " ".join(e.sql(dialect=Flink) for e in written)
    excluded = {what.upper() for how, what in _LIKE_OPTIONS.findall(options_text) if how.upper() == "EXCLUDING"}
    if "ALL" in excluded:
        excluded |= {"OPTIONS", "WATERMARKS", "GENERATED", "CONSTRAINTS", "PARTITIONS"}
    source_schema = source.ddl.this
    own = create.this.expressions if isinstance(create.this, exp.Schema) else []
    items = []
    for item in source_schema.expressions:
        if isinstance(item, exp.WatermarkColumnConstraint) and ("WATERMARKS" in excluded or _has(own, exp.WatermarkColumnConstraint)):
            continue
        if isinstance(item, exp.PrimaryKey) and "CONSTRAINTS" in excluded:
            continue
        if isinstance(item, exp.ColumnDef) and item.find(exp.ComputedColumnConstraint) and "GENERATED" in excluded:
            continue
        items.append(item.copy())
    _check_inherited_key(own, source)
    items += [item.copy() for item in own]
    options = {} if "OPTIONS" in excluded else dict(source.options)
    options.update(_own_options(create))
    table = create.this.this if isinstance(create.this, exp.Schema) else create.this
    merged = exp.Create(this=exp.Schema(this=table.copy(), expressions=items), kind="TABLE", exists=create.args.get("exists"),
                        replace=create.args.get("replace"), properties=_non_like_properties(create))
    return with_options(merged, options)


def _check_inherited_key(own: list, source: TableDef) -> None:
    """A PRIMARY KEY declared beside LIKE over the source's columns: Flink makes the key
    columns a table declares itself NOT NULL, not the ones it takes from the source, and
    refuses a key over a nullable one."""
    key = next((item for item in own if isinstance(item, exp.PrimaryKey)), None)
    if key is None:
        return
    declared = {item.name for item in own if isinstance(item, exp.ColumnDef)}
    for column in key.expressions:
        inherited = next((c for c in source.columns if c.name == column.name), None)
        if column.name not in declared and inherited is not None and not inherited.not_null:
            name = "_".join(c.name for c in key.expressions)
            raise ValidationError(f"Invalid primary key 'PK_{name}'. Column '{column.name}' is nullable"
                                  f" (declare it NOT NULL in '{source.name.name}', or declare the key there)",
                                  identifier_position(column if isinstance(column, exp.Identifier) else column.this))


def table_as_select(create: exp.Create, columns: list[Column]) -> exp.Create:
    """CREATE TABLE t WITH (...) AS SELECT ...: the table's columns are the query's."""
    table = create.this.this if isinstance(create.this, exp.Schema) else create.this
    schema = exp.Schema(this=table.copy(), expressions=[
        exp.ColumnDef(this=exp.to_identifier(c.name, quoted=not c.name.isidentifier()), kind=_storable(c.type))
        for c in columns
    ])
    return exp.Create(this=schema, kind="TABLE", exists=create.args.get("exists"), replace=create.args.get("replace"),
                      properties=create.args.get("properties"))


ALTER_SET_FORM = "ALTER TABLE t SET ('key' = 'value', ...)"


def altered(table: TableDef, action: exp.Expression | str) -> exp.Create:
    """The definition after ALTER TABLE ... SET (...), RESET (...) or RENAME TO ..."""
    options = dict(table.options)
    if isinstance(action, exp.AlterSet):
        for pair in action.expressions or [None]:
            if not isinstance(pair, exp.EQ):
                raise ValidationError(f"Expected {ALTER_SET_FORM}", start_position(pair) or start_position(action))
            key, value = string_pair(pair.this, pair.expression, ALTER_SET_FORM, pair)
            options[key] = value
        return with_options(table.ddl, options)
    if isinstance(action, exp.AlterRename):
        return with_options(table.ddl, options, name=action.this)
    keys = re.findall(r"'([^']*)'", action)
    for key in keys:
        if key == "connector":
            raise ValidationError("ALTER TABLE ... RESET cannot remove 'connector'")
        options.pop(key, None)
    return with_options(table.ddl, options)


def _own_options(create: exp.Create) -> dict[str, str]:
    props = create.args.get("properties")
    return {p.name: p.args["value"].name for p in (props.expressions if props else []) if type(p) is exp.Property}


def _non_like_properties(create: exp.Create) -> exp.Properties:
    props = create.args.get("properties")
    kept = [p.copy() for p in (props.expressions if props else []) if not isinstance(p, exp.LikeProperty)]
    return exp.Properties(expressions=kept)


def _has(items: list, kind: type) -> bool:
    return any(isinstance(i, kind) for i in items)


def _storable(data_type: exp.DataType | None) -> exp.DataType:
    if data_type is None or data_type.this in (exp.DType.UNKNOWN, exp.DType.NULL):
        raise ValidationError("CREATE TABLE ... AS SELECT: a column's type cannot be inferred; CAST it")
    return data_type.copy()
