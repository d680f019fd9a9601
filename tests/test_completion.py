"""Context-aware completion: suggestion kinds from the text, names from a fake schema (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prompt_toolkit.document import Document

from streamsql.plan.connectors import CONNECTORS
from streamsql.shell.completer import FlinkCompleter, SchemaSnapshot, connector_options
from streamsql.shell.suggest import (
    Column,
    Connector,
    ConnectorOption,
    Database,
    Function,
    Keyword,
    Setting,
    Table,
    TableRef,
    statement_tables,
    suggest_type,
)
from tests import depth

ROOT = Path(__file__).resolve().parent.parent


def suggest(text: str, after: str = "") -> list:
    return suggest_type(text + after, text)


def test_after_from_and_join_tables_and_databases():
    assert suggest("SELECT * FROM ") == [Table(), Database()]
    assert suggest("SELECT * FROM bid b JOIN ") == [Table(), Database()]
    assert suggest("SELECT * FROM demo.") == [Table(schema="demo")]
    assert suggest("SELECT * FROM default_catalog.demo.") == [Table(schema="demo")]
    assert suggest("INSERT INTO ") == [Table(), Database()]
    assert suggest("DESCRIBE ") == [Table(), Database()]
    assert suggest("SHOW CREATE VIEW ") == [Table(), Database()]
    assert suggest("DROP TABLE IF EXISTS ") == [Table(), Database()]
    assert suggest("SELECT * FROM TABLE(TUMBLE(TABLE ") == [Table(), Database()]
    assert suggest("SHOW COLUMNS FROM ") == [Table(), Database()]


def test_databases_where_a_database_goes():
    assert suggest("USE ") == [Database()]
    assert suggest("SHOW TABLES FROM ") == [Database()]
    assert suggest("SHOW VIEWS IN ") == [Database()]


def test_a_new_name_gets_no_suggestion():
    assert suggest("CREATE TABLE ") == []
    assert suggest("CREATE VIEW ") == []


def test_after_an_alias_its_tables_columns():
    bid = TableRef("demo", "bid", "b")
    assert suggest("SELECT * FROM demo.bid AS b WHERE b.") == [Column((bid,), qualified=True)]
    # The alias is defined after the cursor: the whole statement counts.
    assert suggest("SELECT b.", " FROM demo.bid b, demo.person p") == [Column((bid,), qualified=True)]
    assert suggest("SELECT p.", " FROM demo.bid b JOIN demo.person AS p ON b.bidder = p.id") == [
        Column((TableRef("demo", "person", "p"),), qualified=True)]
    # A table's own name qualifies its columns too, and an unknown one is looked up as a table.
    assert suggest("SELECT bid.", " FROM demo.bid") == [Column((TableRef("demo", "bid"),), qualified=True)]
    assert suggest("SELECT nowhere.x, nowhere.") == [Column((TableRef(None, "nowhere"),), qualified=True)]


def test_otherwise_keywords_functions_and_the_columns_of_the_from_tables():
    tables = (TableRef("demo", "bid", None), TableRef(None, "person", "p"))
    assert suggest("SELECT ", " FROM demo.bid, person p") == [Column(tables), Function(), Keyword()]
    assert suggest("SELECT * FROM demo.bid, person p WHERE pr") == [Column(tables), Function(), Keyword()]


def test_only_the_statement_at_the_cursor_counts():
    assert suggest("SELECT * FROM a; SELECT ", " FROM b; SELECT * FROM c") == [
        Column((TableRef(None, "b"),)), Function(), Keyword()]


def test_strings_and_comments():
    assert suggest("SET '") == [Setting()]
    assert suggest("SET 'sql-client.ex") == [Setting()]
    assert suggest("RESET '") == [Setting()]
    assert suggest("SELECT 'fr") == []
    assert suggest("SELECT 1 -- FROM ") == []
    assert suggest("SELECT /* FROM ") == []


def test_inside_with_the_connectors_options():
    head = "CREATE TABLE t (a BIGINT, `b c` STRING, WATERMARK FOR a AS a) WITH ("
    assert suggest(head + "'") == [ConnectorOption(None, None, ("a", "b c"))]
    assert suggest(head + "'connector' = '") == [Connector()]
    assert suggest(head + "'connector' = 'datagen', 'ro") == [ConnectorOption("datagen", None, ("a", "b c"))]
    assert suggest(head + "'", ", 'connector' = 'filesystem', 'format' = 'csv')") == [
        ConnectorOption("filesystem", "csv", ("a", "b c"))]
    # An option's value is no place for option names; after the closing ')' neither.
    assert suggest(head + "'connector' = 'datagen', 'rows-per-second' = '") == []
    assert suggest(head + "'connector' = 'datagen') LIKE '") == []
    assert suggest("ALTER TABLE t SET ('") == [ConnectorOption(None, None, ())]


def test_statement_tables():
    sql = ("SELECT * FROM TABLE(TUMBLE(TABLE demo.bid, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND)) w "
           "JOIN `my db`.`odd name` AS o ON TRUE LEFT JOIN person ON TRUE WHERE x IN (SELECT y FROM z)")
    assert statement_tables(sql) == [TableRef("demo", "bid"), TableRef("my db", "odd name", "o"),
                                     TableRef(None, "person"), TableRef(None, "z")]


FAKE = SchemaSnapshot(
    current_database="default_database",
    databases={
        "default_database": {"orders": ["order_id", "amount", "odd col"]},
        "demo": {"bid": ["auction", "bidder", "price"], "person": ["id", "name"], "auction": ["id", "seller"]},
    },
    functions=["count_char"],
)


def complete(text: str, after: str = "", completer: FlinkCompleter | None = None) -> list[str]:
    completer = completer or FlinkCompleter(lambda: FAKE)
    document = Document(text + after, cursor_position=len(text))
    return [c.text for c in completer.get_completions(document, None)]


def test_completion_names_per_context():
    assert complete("SELECT * FROM ") == ["orders", "default_database", "demo"]
    assert complete("SELECT * FROM demo.") == ["bid", "person", "auction"]
    assert complete("SELECT * FROM demo.a") == ["auction"]
    assert complete("SELECT b.", " FROM demo.bid b") == ["auction", "bidder", "price"]
    assert complete("SELECT b.pr", " FROM demo.bid b") == ["price"]
    assert complete("SELECT o.", " FROM orders o") == ["order_id", "amount", "`odd col`"]
    assert complete("USE d") == ["default_database", "demo"]
    assert complete("SELECT count", " FROM demo.bid") == ["count_char"]
    assert complete("SELECT co", " FROM demo.bid") == ["count_char", "COUNT", "CONCAT", "COALESCE", "COLUMNS"]
    assert complete("SELECT ", " FROM demo.person")[:2] == ["id", "name"]


def test_completion_of_settings_and_options():
    assert complete("SET 'sql-client.e") == ["sql-client.execution.result-mode"]
    assert "execution.runtime-mode" in complete("SET '")
    options = complete("CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', '")
    assert {"path", "format", "source.monitor-interval", "csv.field-delimiter", "json.ignore-parse-errors"} <= set(options)
    assert "rows-per-second" not in options
    assert complete("CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'format' = 'json', 'js") == [
        "json.encode.decimal-as-plain-number", "json.encode.ignore-null-fields", "json.fail-on-missing-field",
        "json.ignore-parse-errors", "json.map-null-key.literal", "json.map-null-key.mode",
        "json.timestamp-format.standard"]
    assert complete("CREATE TABLE t (a INT, s STRING) WITH ('connector' = 'datagen', 'fields.s.m") == [
        "fields.s.max", "fields.s.max-past", "fields.s.min"]
    assert complete("CREATE TABLE t (a INT) WITH ('connector' = '") == sorted(CONNECTORS)


def test_options_come_from_the_planners_connector_specs():
    for name, spec in CONNECTORS.items():
        assert set(spec.required | spec.optional) <= set(connector_options(name, None))


def test_the_snapshot_is_taken_once_and_refreshed_on_demand():
    loads = []
    schema = {"demo": {"bid": ["price"]}}

    def load():
        loads.append(1)
        return SchemaSnapshot("default_database", {k: dict(v) for k, v in schema.items()})

    completer = FlinkCompleter(load)
    for _ in range(3):
        assert complete("SELECT * FROM demo.", completer=completer) == ["bid"]
    assert len(loads) == 1
    schema["demo"]["new_table"] = ["x"]
    assert complete("SELECT * FROM demo.", completer=completer) == ["bid"]
    completer.refresh(background=False)
    assert complete("SELECT * FROM demo.", completer=completer) == ["bid", "new_table"]
    assert len(loads) == 2


def test_the_snapshot_of_a_real_catalog(tmp_path):
    from streamsql.catalog import Catalog

    catalog = Catalog(ROOT / "catalog")
    snapshot = SchemaSnapshot.from_catalog(catalog)
    assert "dateTime" in snapshot.databases["demo"]["bid"]
    assert snapshot.current_database == "default_database"


@pytest.mark.parametrize("script", sorted((ROOT / "queries").rglob("*.sql")), ids=lambda p: p.name)
def test_every_prefix_of_real_statements_completes_without_error(script):
    text = script.read_text()
    completer = FlinkCompleter(lambda: FAKE)
    for end in range(0, len(text), depth.pick(7, 3)):
        complete(text[:end], text[end:], completer)
