"""Flink's filtered listings: SHOW TABLES|VIEWS|FUNCTIONS [FROM|IN db] [[NOT] LIKE|ILIKE 'p'],
SHOW DATABASES [LIKE ...], SHOW COLUMNS FROM|IN t [LIKE ...].

Answered from the catalog alone, like the plain forms in ``plan/statements.py`` (which
this extends; it lives here while that package is being changed elsewhere). An empty
SHOW TABLES says which database it listed and where the tables are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from streamsql.catalog import Catalog
from streamsql.dialect.flink import SHOW_FILTERED, Show
from streamsql.errors import CatalogError, ValidationError
from streamsql.plan.objects import TableDef, ViewDef
from streamsql.plan.statements import describe, relation
from streamsql.plan.steps import ResultStep


@dataclass
class ListingStep(ResultStep):
    """A listing, and a note for the person reading it (None: nothing to add)."""

    note: str | None = None


def plan_listing(node: exp.Expression, catalog: Catalog) -> ListingStep | None:
    """The step for a filtered SHOW; None for any other statement."""
    if not isinstance(node, Show) or node.this.name not in SHOW_FILTERED:
        return None
    kind = node.this.name
    if kind == "COLUMNS":
        columns, rows = describe(relation(node.args["target"], catalog))
        rows = [r for r in rows if not str(r[0]).startswith("WITH '")]
        return ListingStep(columns, _filtered(rows, node))
    if kind == "DATABASES":
        return ListingStep(["database name"], _filtered([(d,) for d in catalog.databases()], node))
    where, database = _database(node.args.get("target"), catalog)
    if kind == "FUNCTIONS":
        names = [f.name.name for f in catalog.objects(database, kind="function", catalog=where)]
        return ListingStep(["function name"], _filtered([(n,) for n in names], node))
    wanted = TableDef if kind == "TABLES" else ViewDef
    rows = _filtered([(o.name.name,) for o in catalog.objects(database, catalog=where) if isinstance(o, wanted)], node)
    note = None
    if not rows and node.args.get("like") is None and where is None:
        note = _elsewhere(kind, database, wanted, catalog)
    return ListingStep([f"{kind[:-1].lower()} name"], rows, note)


def like_pattern(pattern: str, ignore_case: bool = False) -> re.Pattern:
    """SQL LIKE ('%' any run, '_' one character, '\\' escapes the next) as a regex."""
    regex, escaped = "", False
    for char in pattern:
        if escaped:
            regex, escaped = regex + re.escape(char), False
        elif char == "\\":
            escaped = True
        else:
            regex += ".*" if char == "%" else "." if char == "_" else re.escape(char)
    return re.compile(regex, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _filtered(rows: list[tuple], node: Show) -> list[tuple]:
    like = node.args.get("like")
    if like is None:
        return rows
    pattern = like_pattern(like.name, bool(node.args.get("ilike")))
    keep = not node.args.get("negated")
    return [r for r in rows if bool(pattern.fullmatch(str(r[0]))) == keep]


def _database(target: exp.Table | None, catalog: Catalog) -> tuple[str | None, str]:
    """(the catalog named, None for the current one; the database) of ``SHOW ... FROM [c.]db``."""
    if target is None:
        return None, catalog.current_database
    where = target.args["db"].name if target.args.get("db") else None
    if where is not None and where not in catalog.catalogs.names():
        raise ValidationError(f"Catalog '{where}' does not exist (catalogs: {', '.join(catalog.catalogs.names())})")
    where = None if where == catalog.current_catalog else where
    if not (catalog.has_database(target.name) if where is None else target.name in catalog.databases(where)):
        raise CatalogError(f"Database '{target.name}' does not exist (databases: {', '.join(catalog.databases(where))})")
    return where, target.name


def _elsewhere(kind: str, database: str, wanted: type, catalog: Catalog) -> str:
    """Where the tables are when the database listed has none."""
    what = kind.lower()
    counts = {d: sum(isinstance(o, wanted) for o in catalog.objects(d)) for d in catalog.databases() if d != database}
    others = [f"{d} ({n})" for d, n in counts.items() if n]
    if not others:
        return f"Database '{database}' has no {what}."
    first = next(d for d, n in counts.items() if n)
    return (f"Database '{database}' has no {what}; {what} are in {', '.join(others)}: "
            f"SHOW {kind} FROM {first}; or USE {first};")
