"""A 'hive' catalog (Spark's session catalog) without Spark: its definition, Spark's types as
Flink's, each kind of metastore table as the connector that reads it, and what it refuses.
(tests/test_hive_catalog_spark.py reads a real metastore that Spark with Hive support wrote.)"""

from __future__ import annotations

import pytest

from streamsql.catalog import Catalog
from streamsql.catalogs.hive import HiveCatalog, connector_options, flink_type, table_ddl, write_refusal
from streamsql.catalogs.registry import CatalogDef
from streamsql.dialect.script import parse_statement
from streamsql.errors import CatalogError
from streamsql.plan.define import define
from streamsql.plan.objects import ObjectName, to_flink_sql
from streamsql.runtime.engine import Engine
from streamsql.runtime.metastore import MetastoreTable
from tests.statements import run

PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
TEXT = ("org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", "org.apache.hadoop.mapred.TextInputFormat")


def _schema(*fields) -> dict:
    return {"type": "struct", "fields": [{"name": n, "type": t, "nullable": nullable, "metadata": m or {}}
                                         for n, t, nullable, m in fields]}


def _table(provider, fields, **kwargs) -> MetastoreTable:
    return MetastoreTable("sales", "t", kwargs.pop("kind", "MANAGED"), provider, _schema(*fields),
                          location=kwargs.pop("location", "file:/data/wh/sales.db/t"), **kwargs)


def _declared(ddl: str):
    return define(parse_statement(ddl), "sales", catalog="spark")


def test_sparks_types_as_flinks():
    assert [flink_type(t) for t in ("boolean", "byte", "short", "integer", "long", "float", "double", "string",
                                    "binary", "date", "timestamp", "timestamp_ntz", "decimal(12,3)")] == [
        "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "STRING", "BYTES", "DATE",
        "TIMESTAMP_LTZ(6)", "TIMESTAMP(6)", "DECIMAL(12, 3)"]
    assert flink_type("string", {"__CHAR_VARCHAR_TYPE_STRING": "varchar(20)"}) == "VARCHAR(20)"
    assert flink_type({"type": "map", "keyType": "string", "valueType": {
        "type": "array", "elementType": "long", "containsNull": True}}) == "MAP<STRING, ARRAY<BIGINT>>"
    nested = {"type": "struct", "fields": [{"name": "a b", "type": "integer", "nullable": True, "metadata": {}}]}
    assert flink_type(nested) == "ROW<`a b` INT>"
    assert flink_type("interval day to second") is None
    assert flink_type({"type": "array", "elementType": "calendarinterval"}) is None


def test_each_kind_of_table_is_read_by_its_connector():
    columns = [("id", "long", False, None), ("v", "string", True, None)]
    assert connector_options(_table("parquet", columns), "x") == {
        "connector": "filesystem", "path": "/data/wh/sales.db/t", "format": "parquet"}
    assert connector_options(_table("hive", columns, serde=PARQUET_SERDE), "x")["format"] == "parquet"
    assert connector_options(_table("json", columns, location="file:/a%20b/t"), "x")["path"] == "/a b/t"
    assert connector_options(_table("csv", columns, properties={"sep": ";"}), "x")["csv.field-delimiter"] == ";"
    text = connector_options(_table("hive", columns, serde=TEXT[0], input_format=TEXT[1],
                                    properties={"field.delim": "|"}), "x")
    assert text == {"connector": "filesystem", "path": "/data/wh/sales.db/t", "format": "csv",
                    "csv.field-delimiter": "|", "csv.disable-quote-character": "true", "csv.null-literal": "\\N"}
    default = connector_options(_table("hive", columns, serde=TEXT[0], input_format=TEXT[1]), "x")
    assert default["csv.field-delimiter"] == "\x01"  # Hive's default: ^A
    stored = connector_options(_table("hive", columns, serde=TEXT[0], input_format=TEXT[1],
                                      properties={"serialization.format": "1"}), "x")  # what Hive stores for it
    assert stored["csv.field-delimiter"] == "\x01"
    assert connector_options(_table("csv", columns, properties={"SEP": "|", "Header": "false"}), "x")[
        "csv.field-delimiter"] == "|"
    assert connector_options(_table("delta", columns), "x") == {"connector": "delta", "table-path": "/data/wh/sales.db/t"}


@pytest.mark.parametrize("table, message", [
    (_table(None, [("id", "long", True, None)], kind="VIEW", location=None), "is a Spark view"),
    (_table("orc", [("id", "long", True, None)]), "is a orc table, which is not read yet"),
    (_table("hive", [("id", "long", True, None)], serde="org.apache.hadoop.hive.ql.io.orc.OrcSerde"),
     "a Hive table of SerDe org.apache.hadoop.hive.ql.io.orc.OrcSerde"),
    (_table("hive", [("tags", {"type": "array", "elementType": "string"}, True, None)], serde=TEXT[0],
            input_format=TEXT[1]), "Hive text table with ARRAY, MAP or STRUCT columns"),
    (_table("csv", [("id", "long", True, None)], properties={"header": "true"}), "with a header line"),
    (_table("parquet", [("id", "long", True, None)], location="hdfs://nn:8020/wh/t"), "only tables on the local"),
])
def test_tables_it_cannot_read_are_named_with_the_reason(table, message):
    with pytest.raises(CatalogError, match=message):
        table_ddl("spark", table)


def test_a_tables_ddl_declares_its_columns_partitions_and_options():
    table = _table("parquet", [("id", "long", False, None), ("at", "timestamp", True, None),
                               ("region", "string", True, None)], partition_columns=("region",))
    declared = _declared(table_ddl("spark", table))
    assert declared.name == ObjectName("sales", "t", "spark")
    assert [(c.name, to_flink_sql(c.type), c.not_null) for c in declared.columns] == [
        ("id", "BIGINT", True), ("at", "TIMESTAMP_LTZ(6)", False), ("region", "STRING", False)]
    assert declared.partition_keys == ["region"]
    with pytest.raises(CatalogError, match="column 'span' has the Spark type interval"):
        table_ddl("spark", _table("parquet", [("span", "interval day to second", True, None)]))


def test_writes_go_to_delta_and_unpartitioned_file_tables_only():
    columns = [("id", "long", True, None), ("region", "string", True, None)]
    assert write_refusal(_table("delta", columns, partition_columns=("region",)), "x") is None
    assert write_refusal(_table("parquet", columns), "x") is None
    assert "partitioned parquet table" in write_refusal(_table("parquet", columns, partition_columns=("region",)), "x")
    text = _table("hive", columns, serde=TEXT[0], input_format=TEXT[1])
    assert "Hive text table, which is read only" in write_refusal(text, "x")


def test_a_delta_tables_columns_come_from_its_log(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "day": pa.array(["a", "b"]),
                     "price": pa.array([1.5, None], pa.float64())})
    write_deltalake(str(tmp_path / "d"), rows, partition_by=["day"])
    catalog = HiveCatalog(CatalogDef("spark", {"type": "hive"}))
    # the metastore keeps no schema of a Delta table (delta-spark registers an empty one)
    found = _table("delta", [("col", {"type": "array", "elementType": "string"}, True, None)],
                   location=f"file:{tmp_path / 'd'}")
    declared = catalog._table(found)
    assert [(c.name, to_flink_sql(c.type)) for c in declared.columns] == [("id", "BIGINT"), ("day", "STRING"), ("price", "DOUBLE")]
    assert declared.partition_keys == ["day"]
    assert declared.options == {"connector": "delta", "table-path": str(tmp_path / "d")}
    with pytest.raises(CatalogError, match="does not open"):
        catalog._table(_table("delta", [], location=f"file:{tmp_path / 'none'}"))


def test_definitions_are_checked_without_spark(tmp_path):
    engine = Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path)
    (tmp_path / "conf").mkdir()
    with pytest.raises(CatalogError, match="has no hive-site.xml"):
        run(engine, f"CREATE CATALOG h WITH ('type' = 'hive', 'hive-conf-dir' = '{tmp_path / 'conf'}')")
    (tmp_path / "conf" / "hive-site.xml").write_text("<configuration><property>")
    with pytest.raises(CatalogError, match="hive-site.xml does not load"):
        run(engine, f"CREATE CATALOG h WITH ('type' = 'hive', 'hive-conf-dir' = '{tmp_path / 'conf'}')")
    with pytest.raises(CatalogError, match="'hive-conf-dir' '.*nowhere' is no directory"):
        run(engine, "CREATE CATALOG h WITH ('type' = 'hive', 'hive-conf-dir' = 'nowhere')")
    with pytest.raises(CatalogError, match="unsupported option\\(s\\) 'warehouse'"):
        run(engine, "CREATE CATALOG h WITH ('type' = 'hive', 'warehouse' = '/tmp')")
    (tmp_path / "conf" / "hive-site.xml").write_text(
        "<configuration><property><name>hive.metastore.uris</name><value>thrift://localhost:1</value></property>"
        "</configuration>")
    run(engine, "CREATE CATALOG h WITH ('type' = 'hive', 'hive-conf-dir' = 'conf')".replace("'conf'", f"'{tmp_path / 'conf'}'"))
    assert run(engine, "SHOW CATALOGS") == [["catalog name"], ["default_catalog"], ["h"]]
    stored = (tmp_path / "cat" / "_catalogs" / "h.sql").read_text()
    assert f"'hive-conf-dir' = '{tmp_path / 'conf'}'" in stored  # made absolute


def test_its_ddl_is_refused_and_without_spark_it_says_so():
    catalog = HiveCatalog(CatalogDef("spark", {"type": "hive"}))
    with pytest.raises(CatalogError, match="does not support CREATE TABLE yet"):
        catalog.completed(None, ObjectName("sales", "t", "spark"))
    with pytest.raises(CatalogError, match="does not support CREATE DATABASE yet: its tables and databases are made"
                                           " by Spark's own DDL"):
        catalog.create_database("x")
    with pytest.raises(CatalogError, match="reads its metastore through Spark, which this session does not run"):
        catalog.databases()
