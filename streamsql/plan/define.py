"""From a CREATE statement to a catalog object, with paths made absolute."""

from __future__ import annotations

from pathlib import Path

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.connectors import validate_options
from streamsql.plan.ddl import function_from_create, table_from_create, view_from_create
from streamsql.plan.objects import DEFAULT_CATALOG, CatalogObject, identifier_position, object_name


def define(create: exp.Expression, database: str, base_dir: Path | str | None = None,
           catalog: str = DEFAULT_CATALOG) -> CatalogObject:
    """Build the object a CREATE TABLE/VIEW/FUNCTION defines.

    A relative 'path' option is resolved against ``base_dir`` (the working directory
    for scripts, the catalog directory for stored definitions) and written back into
    the statement, so a stored definition means the same thing from anywhere.
    """
    if not isinstance(create, exp.Create):
        raise ValidationError(f"Not a CREATE statement: {create.sql()[:60]}")
    kind = create.kind
    create.set("replace", False)  # OR REPLACE is how it was created, not part of the definition
    name = object_name(create.this if isinstance(create.this, exp.Table) else create.this.this, database, catalog)
    if kind == "TABLE":
        _absolutize_path(create, Path(base_dir or Path.cwd()))
        table = table_from_create(create, name)
        validate_options(table)
        return table
    if kind == "VIEW":
        return view_from_create(create, name)
    if kind == "FUNCTION":
        return function_from_create(create, name)
    raise ValidationError(f"CREATE {kind} is not supported", identifier_position(create.this))


def _absolutize_path(create: exp.Create, base_dir: Path) -> None:
    for prop in create.find_all(exp.Property):
        if prop.name in ("path", "table-path") and isinstance(prop.args.get("value"), exp.Literal):
            path = prop.args["value"].this
            if "://" not in path and not Path(path).is_absolute():
                prop.set("value", exp.Literal.string(str((base_dir / path).resolve())))
