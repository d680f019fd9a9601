"""Flink's catalog statements sqlglot does not read: ``CREATE CATALOG`` and ``DROP CATALOG``.

    CREATE CATALOG [IF NOT EXISTS] name [COMMENT 'text'] WITH ('type' = '...', ...)
    DROP CATALOG [IF EXISTS] name

Each becomes sqlglot's own node (``exp.Create`` / ``exp.Drop`` of kind ``CATALOG``), the
catalog's name an ``exp.Table`` whose ``name`` it is, its options ``exp.Properties`` as a
table's ``WITH`` gives them. ``USE CATALOG`` and ``SHOW CATALOGS`` sqlglot reads already.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType


def at_catalog(parser) -> bool:
    """Whether the next word is CATALOG (after CREATE or DROP)."""
    return parser._curr is not None and parser._curr.token_type == TokenType.VAR and parser._curr.text.upper() == "CATALOG"


def parse_create_catalog(parser) -> exp.Create:
    parser._advance()  # CATALOG
    exists = parser._parse_exists(not_=True)
    name = parser._parse_id_var(any_token=False)
    if name is None:
        parser.raise_error("Expected a catalog name after CREATE CATALOG", parser._curr or parser._prev)
    comment = None
    if parser._match(TokenType.COMMENT):
        comment = parser._parse_string()
        if comment is None:
            parser.raise_error("Expected a string after COMMENT", parser._curr or parser._prev)
    if not parser._match(TokenType.WITH):
        parser.raise_error("Expected WITH ('type' = '...', ...) after the catalog's name", parser._curr or parser._prev)
    properties = parser._parse_wrapped_properties()
    create = exp.Create(this=exp.Table(this=name), kind="CATALOG", exists=exists or None,
                        properties=exp.Properties(expressions=properties))
    if comment is not None:
        create.set("expression", comment)
    return create


def parse_drop_catalog(parser) -> exp.Drop:
    parser._advance()  # CATALOG
    exists = parser._parse_exists()
    name = parser._parse_id_var(any_token=False)
    if name is None:
        parser.raise_error("Expected a catalog name after DROP CATALOG", parser._curr or parser._prev)
    return exp.Drop(this=exp.Table(this=name), kind="CATALOG", exists=exists or None)


def catalog_ddl(name: str, options: dict[str, str], comment: str | None = None) -> str:
    """The statement that creates a catalog, as stored and shown."""
    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    body = ",\n".join(f"  {quoted(k)} = {quoted(v)}" for k, v in options.items())
    head = f"CREATE CATALOG `{name.replace('`', '``')}`" + (f" COMMENT {quoted(comment)}" if comment else "")
    return f"{head} WITH (\n{body}\n)"
