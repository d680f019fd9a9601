"""Building catalog objects from CREATE statements, with Flink's checks."""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.flink import MetadataColumnConstraint
from streamsql.dialect.functions import Proctime
from streamsql.errors import ValidationError
from streamsql.plan.key_values import string_pair
from streamsql.plan.positions import start_position
from streamsql.plan.objects import (
    Column,
    FunctionDef,
    ObjectName,
    TableDef,
    ViewDef,
    Watermark,
    identifier_position,
)
from streamsql.plan.types import PROCTIME_TYPE, infer_type


def table_from_create(create: exp.Create, name: ObjectName) -> TableDef:
    """CREATE TABLE t (columns, computed columns, WATERMARK, PRIMARY KEY) ... WITH (...)."""
    schema = create.this
    if not isinstance(schema, exp.Schema):
        raise ValidationError(f"CREATE TABLE {name.name} needs a column list", identifier_position(create.this))
    columns: list[Column] = []
    watermark = None
    keys = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            columns.append(_column(item, columns))
            keys += [(key, [item.name]) for key in _column_keys(item)]
        elif isinstance(item, exp.WatermarkColumnConstraint):
            watermark = Watermark(item.this.name, item.expression)
        elif isinstance(item, exp.PrimaryKey):
            keys.append((item, [e.name for e in item.expressions]))
        else:
            raise ValidationError(f"Unsupported table element: {item.sql()}")
    for key, _ in keys:
        if "NOT ENFORCED" not in [str(o).upper() for o in key.args.get("options") or []]:
            raise ValidationError("Flink doesn't support ENFORCED mode for PRIMARY KEY constraint: write PRIMARY KEY"
                                  " ... NOT ENFORCED (Flink does not own the data, so it cannot check the key)",
                                  start_position(key) or identifier_position(schema.this.this))
    if len(keys) > 1:
        raise ValidationError(f"Duplicate primary key definition: table {name.name} has one PRIMARY KEY",
                              start_position(keys[1][0]) or identifier_position(schema.this.this))
    primary_key = keys[0][1] if keys else []
    table = TableDef(
        name=name,
        columns=columns,
        options=_options(create),
        watermark=watermark,
        primary_key=primary_key,
        partition_keys=_partition_keys(create),
        temporary=bool(create.args.get("temporary")) or _is_temporary(create),
        ddl=create,
    )
    _check_references(table, schema)
    if watermark is not None:
        table.column(watermark.column).time_attribute = "rowtime"
    return table


def view_from_create(create: exp.Create, name: ObjectName) -> ViewDef:
    query = create.expression
    if not isinstance(query, exp.Query):
        raise ValidationError(f"CREATE VIEW {name.name} needs AS SELECT ...")
    return ViewDef(name=name, query=query, temporary=_is_temporary(create), ddl=create)


def function_from_create(create: exp.Create, name: ObjectName) -> FunctionDef:
    """CREATE [TEMPORARY] FUNCTION f AS 'module.function' [LANGUAGE PYTHON]."""
    identifier = create.expression
    language = "PYTHON"
    for prop in (create.args.get("properties") or exp.Properties(expressions=[])).expressions:
        if isinstance(prop, exp.LanguageProperty):
            language = prop.name.upper()
    if not isinstance(identifier, exp.Literal) or not identifier.is_string:
        raise ValidationError(f"CREATE FUNCTION {name.name} needs AS 'module.function'")
    if language != "PYTHON":
        raise ValidationError(
            f"Function {name.name}: LANGUAGE {language} is not supported (streamsql runs PYTHON functions)"
        )
    return FunctionDef(name=name, identifier=identifier.this, temporary=_is_temporary(create), ddl=create)


def _column_keys(item: exp.ColumnDef) -> list[exp.Expression]:
    """A column's own ``PRIMARY KEY NOT ENFORCED``; a column list there is the table's form."""
    found = []
    for constraint in item.args.get("constraints") or []:
        kind = constraint.args.get("kind")
        if isinstance(kind, exp.PrimaryKey):
            raise ValidationError(f"Column '{item.name}': a column's PRIMARY KEY takes no column list; declare the"
                                  " table's key after the columns: , PRIMARY KEY (a, b) NOT ENFORCED",
                                  start_position(kind) or identifier_position(item.this))
        if isinstance(kind, exp.PrimaryKeyColumnConstraint):
            found.append(kind)
    return found


def _column(item: exp.ColumnDef, previous: list[Column]) -> Column:
    name = item.name
    if any(c.name == name for c in previous):
        raise ValidationError(f"Duplicate column '{name}'", identifier_position(item.this))
    computed = item.find(exp.ComputedColumnConstraint)
    if computed is not None:
        expression = computed.this
        if isinstance(expression, Proctime):
            return Column(name, PROCTIME_TYPE.copy(), expression, time_attribute="proctime")
        return Column(name, infer_type(expression, previous), expression)
    if item.args.get("kind") is None:
        raise ValidationError(f"Column '{name}' needs a type", identifier_position(item.this))
    metadata = item.find(MetadataColumnConstraint)
    if metadata is not None:
        key = metadata.this.this if metadata.this is not None else name
        return Column(name, item.args["kind"], metadata=key, virtual=bool(metadata.args.get("virtual")))
    not_null = any(isinstance(c.args.get("kind"), exp.NotNullColumnConstraint) and not c.args["kind"].args.get("allow_null")
                   for c in item.args.get("constraints") or [])
    return Column(name, item.args["kind"], not_null=not_null)


def _options(create: exp.Create) -> dict[str, str]:
    options = {}
    for prop in (create.args.get("properties") or exp.Properties(expressions=[])).expressions:
        if type(prop) is exp.Property:
            key, value = string_pair(prop.this, prop.args.get("value"), "WITH ('key' = 'value', ...)", prop)
            options[key] = value
    return options


def _partition_keys(create: exp.Create) -> list[str]:
    prop = create.find(exp.PartitionedByProperty)
    if prop is None:
        return []
    return [e.name for e in prop.this.expressions]


def _is_temporary(create: exp.Create) -> bool:
    props = create.args.get("properties")
    return bool(props and any(isinstance(p, exp.TemporaryProperty) for p in props.expressions))


def _check_references(table: TableDef, schema: exp.Schema) -> None:
    names = {c.name for c in table.columns}
    wanted = [(table.watermark.column, "WATERMARK FOR")] if table.watermark else []
    wanted += [(k, "PRIMARY KEY") for k in table.primary_key]
    wanted += [(k, "PARTITIONED BY") for k in table.partition_keys]
    for column, clause in wanted:
        if column not in names:
            node = next((i for i in schema.find_all(exp.Identifier) if i.this == column), None)
            raise ValidationError(
                f"{clause} column '{column}' is not a column of table '{table.name.name}'"
                f" (columns: {', '.join(c.name for c in table.columns)})",
                identifier_position(node),
            )
    if table.watermark:
        column = table.column(table.watermark.column)
        if column.type.this not in (exp.DType.TIMESTAMP, exp.DType.TIMESTAMPLTZ, exp.DType.TIMESTAMPNTZ):
            raise ValidationError(
                f"WATERMARK FOR column '{column.name}' must be TIMESTAMP(3) or TIMESTAMP_LTZ(3),"
                f" not {column.type.sql()}"
            )
