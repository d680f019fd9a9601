"""Catalog statements answered without Spark: SHOW, DESCRIBE, USE, databases, SET."""

from __future__ import annotations

import pytest

from streamsql.catalog import Catalog
from streamsql.errors import CatalogError, ConnectorError, ValidationError
from streamsql.runtime.engine import Engine
from tests.statements import run

DDL = """CREATE TABLE bid (auction BIGINT, price BIGINT, ts TIMESTAMP(3), eur AS price * 0.9, p AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND, PRIMARY KEY (auction) NOT ENFORCED)
  WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');
CREATE TEMPORARY VIEW big AS SELECT auction FROM bid WHERE price > 10;
"""


pytestmark = pytest.mark.usefixtures("source_files")




@pytest.fixture
def engine(tmp_path):
    engine = Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path)
    run(engine, DDL)
    return engine


def test_show_lists(engine):
    assert run(engine, "SHOW TABLES") == [["table name"], ["bid"]]
    assert run(engine, "SHOW VIEWS") == [["view name"], ["big"]]
    assert run(engine, "SHOW CATALOGS") == [["catalog name"], ["default_catalog"]]
    assert run(engine, "SHOW CURRENT DATABASE") == [["current database name"], ["default_database"]]


def test_describe(engine):
    rows = run(engine, "DESCRIBE bid")
    assert rows[0] == ["name", "type", "null", "key", "extras", "watermark"]
    assert rows[1] == ["auction", "BIGINT", "false", "PRI(auction)", "", ""]
    assert rows[3] == ["ts", "TIMESTAMP(3) *ROWTIME*", "true", "", "", "ts - INTERVAL '1' SECOND"]
    assert rows[4] == ["eur", "DECIMAL(21, 1)", "true", "", "AS price * 0.9", ""] or rows[4][4] == "AS price * 0.9"
    assert rows[5][1] == "TIMESTAMP_LTZ(3) *PROCTIME*"
    assert rows[6:] == [["WITH 'connector'", "filesystem", "", "", "", ""], ["WITH 'path'", str(engine.base_dir / "bid.csv"), "", "", "", ""],
                        ["WITH 'format'", "csv", "", "", "", ""]]


def test_show_create_table_round_trips(engine, tmp_path):
    text = run(engine, "SHOW CREATE TABLE bid")[1][0]
    other = Engine(Catalog(tmp_path / "other"), base_dir=tmp_path)
    run(other, text)
    assert run(other, "SHOW CREATE TABLE bid")[1][0] == text


def test_databases_and_use(engine, tmp_path):
    run(engine, "CREATE DATABASE sales; USE sales; CREATE TABLE t (a INT) WITH ('connector' = 'blackhole')")
    assert run(engine, "SHOW TABLES") == [["table name"], ["t"]]
    assert ["sales"] in run(engine, "SHOW DATABASES")
    assert (tmp_path / "cat" / "sales" / "t.sql").exists()
    with pytest.raises(CatalogError, match="not empty"):
        run(engine, "USE default_database; DROP DATABASE sales")
    run(engine, "USE default_database; DROP DATABASE sales CASCADE")  # the failed script above changed nothing
    with pytest.raises(CatalogError, match="Database 'sales' does not exist"):
        run(engine, "USE sales")


def test_set_show_and_reset(engine):
    run(engine, "SET 'execution.runtime-mode' = 'batch'; SET 'pipeline.name' = 'x'")
    assert ["pipeline.name", "x"] in run(engine, "SET")
    run(engine, "RESET 'pipeline.name'")
    assert ["pipeline.name", "x"] not in run(engine, "SET")
    run(engine, "RESET")
    assert run(engine, "SET")[1:] == [["execution.runtime-mode", "streaming"]]
    with pytest.raises(ValidationError, match="must be one of streaming, batch"):
        run(engine, "SET 'execution.runtime-mode' = 'fast'")


def test_alter_table_set_reset_rename(engine, tmp_path):
    run(engine, "ALTER TABLE bid SET ('csv.field-delimiter' = ';', 'csv.null-literal' = 'N')")
    run(engine, "ALTER TABLE bid RESET ('csv.null-literal')")
    run(engine, "ALTER TABLE bid RENAME TO bids")
    text = run(Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path), "SHOW CREATE TABLE bids")[1][0]
    assert "'csv.field-delimiter' = ';'" in text and "null-literal" not in text
    assert not (tmp_path / "cat" / "default_database" / "bid.sql").exists()
    with pytest.raises(ConnectorError, match="unsupported option"):
        run(engine, "ALTER TABLE bids SET ('nope' = '1')")


def test_create_table_like(engine):
    run(engine, "CREATE TABLE bid_copy (extra STRING) WITH ('path' = 'copy.csv') LIKE bid")
    described = run(engine, "DESCRIBE bid_copy")
    assert [r[0] for r in described[1:] if not r[0].startswith("WITH")] == ["auction", "price", "ts", "eur", "p", "extra"]
    assert described[3][5] == "ts - INTERVAL '1' SECOND"
    text = run(engine, "SHOW CREATE TABLE bid_copy")[1][0]
    assert "copy.csv" in text and "'format' = 'csv'" in text
    run(engine, "CREATE TABLE bare WITH ('connector' = 'blackhole') LIKE bid (EXCLUDING OPTIONS)")
    text = run(engine, "SHOW CREATE TABLE bare")[1][0]
    assert "'connector' = 'blackhole'" in text and "filesystem" not in text and "WATERMARK FOR ts" in text
