"""Statements answered from the catalog: SHOW, DESCRIBE, SHOW CREATE, USE, databases."""

from __future__ import annotations

from sqlglot import exp

from streamsql.catalog import Catalog
from streamsql.catalogs.registry import catalog_def
from streamsql.catalog_files import reported_at
from streamsql.dialect.flink import Flink, Show
from streamsql.errors import ValidationError
from streamsql.plan.objects import TableDef, ViewDef, to_flink_sql
from streamsql.plan.types import type_name


def plan_catalog_statement(node: exp.Expression, catalog: Catalog):
    """A ResultStep (or JobsStep) for a catalog statement; None for anything else."""
    from streamsql.plan.planner import JobsStep, ResultStep

    if isinstance(node, Show):
        kind = node.this.name
        if kind in ("JOBS", "JOBS ALL"):
            return JobsStep(every_run=kind == "JOBS ALL")
        if kind == "CREATE CATALOG":
            name = node.args["target"].name
            if name == catalog.name:
                raise ValidationError(f"Catalog '{name}' is the built-in one: it has no CREATE CATALOG statement")
            with reported_at(node.args["target"]):
                definition = catalog.catalogs.definition(name) or catalog.catalogs.open(name)  # (its error if none)
            return ResultStep(["result"], [(definition.ddl() + ";",)])
        if kind.startswith("CREATE"):
            obj = relation(node.args["target"], catalog)
            return ResultStep(["result"], [(to_flink_sql(obj.ddl) + ";",)])
        return ResultStep(*_listing(kind, catalog))
    if isinstance(node, exp.Describe) and isinstance(node.this, exp.Table):
        return ResultStep(*describe(relation(node.this, catalog)))
    if isinstance(node, exp.Use):
        if node.args.get("kind") and node.args["kind"].name.upper() == "CATALOG":
            with reported_at(node.this):
                catalog.use_catalog(node.this.name)
        else:
            catalog.use(node.this.name)
        return ResultStep([], [])
    if isinstance(node, exp.Create) and node.kind == "CATALOG":
        catalog.create_catalog(catalog_def(node), bool(node.args.get("exists")))
        return ResultStep([], [])
    if isinstance(node, exp.Drop) and node.kind == "CATALOG":
        catalog.drop_catalog(node.this.name, bool(node.args.get("exists")))
        return ResultStep([], [])
    if isinstance(node, exp.Create) and node.kind in ("DATABASE", "SCHEMA"):
        catalog.create_database(node.this.name, bool(node.args.get("exists")))
        return ResultStep([], [])
    if isinstance(node, exp.Drop) and node.kind in ("DATABASE", "SCHEMA"):
        catalog.drop_database(node.args["tables"][0].name, bool(node.args.get("exists")), bool(node.args.get("cascade")))
        return ResultStep([], [])
    return None


def describe(obj: TableDef | ViewDef) -> tuple[list[str], list[tuple]]:
    """Flink's DESCRIBE (name, type, null, key, extras, watermark), then the table's options."""
    rows = []
    keys = obj.primary_key if isinstance(obj, TableDef) else []
    watermark = obj.watermark if isinstance(obj, TableDef) else None
    for column in obj.columns:
        kind = type_name(column.type)
        if column.time_attribute:
            kind += f" *{column.time_attribute.upper()}*"
        extras = f"AS {column.expression.sql(dialect=Flink)}" if column.expression is not None else None
        mark = None
        if watermark is not None and watermark.column == column.name:
            mark = watermark.expression.sql(dialect=Flink)
        key = f"PRI({', '.join(keys)})" if column.name in keys else None
        rows.append((column.name, kind, not column.not_null and column.name not in keys, key, extras, mark))
    if isinstance(obj, TableDef):  # then the connector options, one row each
        rows += [(f"WITH '{k}'", v, None, None, None, None) for k, v in obj.options.items()]
    return ["name", "type", "null", "key", "extras", "watermark"], rows


def _listing(kind: str, catalog: Catalog) -> tuple[list[str], list[tuple]]:
    if kind == "CATALOGS":
        return ["catalog name"], [(name,) for name in catalog.catalogs.names()]
    if kind == "CURRENT CATALOG":
        return ["current catalog name"], [(catalog.current_catalog,)]
    if kind == "CURRENT DATABASE":
        return ["current database name"], [(catalog.current_database,)]
    if kind == "DATABASES":
        return ["database name"], [(d,) for d in catalog.databases()]
    if kind == "FUNCTIONS":
        return ["function name"], [(f.name.name,) for f in catalog.objects(kind="function")]
    wanted = TableDef if kind == "TABLES" else ViewDef
    return [f"{kind[:-1].lower()} name"], [(o.name.name,) for o in catalog.objects() if isinstance(o, wanted)]


def relation(table: exp.Table, catalog: Catalog) -> TableDef | ViewDef:
    with reported_at(table):
        obj = catalog.get(catalog.name_of(table))
    if obj is None:
        raise ValidationError(f"Table or view '{table.sql()}' does not exist")
    return obj
