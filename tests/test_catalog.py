"""The catalog: persistence across runs, temporary objects, atomic writes."""

from __future__ import annotations

import os

import pytest

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.errors import CatalogError
from streamsql.plan.objects import ObjectName
from streamsql.plan.planner import Planner

DDL = """CREATE TABLE bid (auction BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv')"""


@pytest.fixture(autouse=True)
def source_files(tmp_path, monkeypatch):
    """The tables' files exist (a source's path is checked when a query reads it); relative
    paths resolve in tmp_path."""
    for name in ("bid.csv", "auction.csv"):
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)


def apply(catalog: Catalog, script: str, base_dir=None):
    planner = Planner(catalog, base_dir)
    return [planner.plan(s) for s in parse_script(script)]


def test_table_persists_across_catalog_instances(tmp_path):
    apply(Catalog(tmp_path / "cat"), DDL, tmp_path)
    table = Catalog(tmp_path / "cat").get(ObjectName("default_database", "bid"))
    assert [c.name for c in table.columns] == ["auction", "price", "ts"]
    assert table.watermark.column == "ts"
    assert table.options["path"] == str(tmp_path / "bid.csv")  # made absolute when created
    assert (tmp_path / "cat" / "default_database" / "bid.sql").read_text().startswith("CREATE TABLE bid (")


def test_temporary_objects_are_not_stored(tmp_path):
    apply(Catalog(tmp_path / "cat"), DDL.replace("CREATE TABLE", "CREATE TEMPORARY TABLE"), tmp_path)
    assert Catalog(tmp_path / "cat").get(ObjectName("default_database", "bid")) is None


def test_views_and_functions_persist(tmp_path, monkeypatch):
    (tmp_path / "my_udfs.py").write_text("def twice(x: int) -> int:\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    script = DDL + "; CREATE VIEW big AS SELECT auction FROM bid WHERE price > 10; CREATE FUNCTION f AS 'my_udfs.twice'"
    apply(Catalog(tmp_path / "cat"), script, tmp_path)
    reloaded = Catalog(tmp_path / "cat")
    assert reloaded.get(ObjectName("default_database", "big")).query.sql() == "SELECT auction FROM bid WHERE price > 10"
    assert reloaded.get(ObjectName("default_database", "f"), "function").identifier == "my_udfs.twice"


def test_identical_redefinition_is_a_no_op_and_a_different_one_an_error(tmp_path):
    apply(Catalog(tmp_path / "cat"), DDL, tmp_path)
    apply(Catalog(tmp_path / "cat"), DDL, tmp_path)  # a rerun job script
    with pytest.raises(CatalogError, match="already exists with a different definition"):
        apply(Catalog(tmp_path / "cat"), DDL.replace("price BIGINT", "price INT"), tmp_path)
    apply(Catalog(tmp_path / "cat"), DDL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS").replace("price BIGINT", "price INT"), tmp_path)


def test_drop_removes_the_file(tmp_path):
    apply(Catalog(tmp_path / "cat"), DDL + "; DROP TABLE bid; DROP TABLE IF EXISTS bid", tmp_path)
    assert not (tmp_path / "cat" / "default_database" / "bid.sql").exists()
    with pytest.raises(CatalogError, match="does not exist"):
        apply(Catalog(tmp_path / "cat"), "DROP TABLE bid")


def test_temporary_shadows_persistent(tmp_path):
    catalog = Catalog(tmp_path / "cat")
    apply(catalog, DDL + "; " + DDL.replace("CREATE TABLE", "CREATE TEMPORARY TABLE").replace("price BIGINT", "price INT"), tmp_path)
    assert catalog.get(ObjectName("default_database", "bid")).column("price").type.sql() == "INT"
    assert Catalog(tmp_path / "cat").get(ObjectName("default_database", "bid")).column("price").type.sql() == "BIGINT"


def test_staged_catalog_writes_nothing(tmp_path):
    catalog = Catalog(tmp_path / "cat")
    apply(catalog.staged(), DDL, tmp_path)
    assert not (tmp_path / "cat").exists()
    assert catalog.get(ObjectName("default_database", "bid")) is None


def test_failed_write_leaves_a_loadable_catalog(tmp_path, monkeypatch):
    apply(Catalog(tmp_path / "cat"), DDL, tmp_path)
    before = (tmp_path / "cat" / "default_database" / "bid.sql").read_text()

    def crash(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(CatalogError, match="No space left on device"):
        apply(Catalog(tmp_path / "cat"), DDL.replace("TABLE bid", "TABLE other"), tmp_path)
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "cat" / "default_database").iterdir()) == ["bid.sql"]
    assert (tmp_path / "cat" / "default_database" / "bid.sql").read_text() == before
    reloaded = Catalog(tmp_path / "cat")
    assert reloaded.get(ObjectName("default_database", "bid")) is not None
    assert reloaded.get(ObjectName("default_database", "other")) is None


def test_unloadable_catalog_file_names_itself(tmp_path):
    (tmp_path / "cat" / "default_database").mkdir(parents=True)
    (tmp_path / "cat" / "default_database" / "bad.sql").write_text("CREATE TABLE bad (a INT")
    with pytest.raises(CatalogError, match="bad.sql does not load"):
        Catalog(tmp_path / "cat").get(ObjectName("default_database", "x"))


def test_databases_and_qualified_names(tmp_path):
    catalog = Catalog(tmp_path / "cat")
    apply(catalog, DDL.replace("CREATE TABLE bid", "CREATE TABLE sales.bid") + "; SELECT price FROM sales.bid; SELECT price FROM default_catalog.sales.bid", tmp_path)
    assert "sales" in Catalog(tmp_path / "cat").databases()
