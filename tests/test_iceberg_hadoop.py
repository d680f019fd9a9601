"""Iceberg's Hadoop catalog ('catalog-type' = 'hadoop'): streamsql's pyiceberg catalog in Java's
directory layout, checked against Java's own Iceberg (iceberg-core's HadoopCatalog and
iceberg-data, from Maven, in tests/java/IcebergHadoop.java) both ways."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException, NamespaceNotEmptyError, NoSuchTableError

from streamsql.runtime.iceberg.hadoop_catalog import HadoopCatalog, commit_version, current_version
from tests.java_iceberg import java_classpath

ICEBERG = ["org.apache.iceberg:iceberg-data:1.10.0", "org.apache.iceberg:iceberg-parquet:1.10.0"]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])


# -- the catalog, without Spark --------------------------------------------------------------------

def test_versions_are_javas_files_and_a_second_writer_of_a_version_fails(tmp_path):
    catalog = HadoopCatalog("lake", str(tmp_path))
    catalog.create_namespace("db")
    table = catalog.create_table(("db", "t"), schema=SCHEMA)
    table.append(pa.table({"id": [1, 2], "name": ["a", None]}, schema=SCHEMA))
    metadata = tmp_path / "db" / "t" / "metadata"
    assert sorted(p.name for p in metadata.glob("v*.metadata.json")) == ["v1.metadata.json", "v2.metadata.json"]
    assert (metadata / "version-hint.text").read_text() == "2"
    assert catalog.load_table("db.t").scan().to_arrow().to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
    with pytest.raises(CommitFailedException, match="Version 2 of the table .* was committed by another writer"):
        commit_version(tmp_path / "db" / "t", 2, "{}")
    assert not [p for p in metadata.iterdir() if p.name.startswith(".")]  # nothing staged is left
    (metadata / "version-hint.text").write_text("1")  # a writer stopped between its version and the hint
    assert current_version(tmp_path / "db" / "t") == 2


def test_a_writer_that_loses_a_race_retries_and_drops_no_commit(tmp_path, monkeypatch):
    """Writer B commits between writer A's read of the table and A's commit: A's version
    number is taken, so A's commit fails and pyiceberg retries it on B's version."""
    ours, theirs = HadoopCatalog("lake", str(tmp_path)), HadoopCatalog("lake", str(tmp_path))
    ours.create_namespace("db")
    ours.create_table(("db", "t"), schema=SCHEMA)
    stage = HadoopCatalog._update_and_stage_table
    raced = []

    def racing(self, current, *args):
        staged = stage(self, current, *args)
        if self is ours and not raced:
            raced.append(True)
            theirs.load_table("db.t").append(pa.table({"id": [2], "name": ["theirs"]}, schema=SCHEMA))
        return staged

    monkeypatch.setattr(HadoopCatalog, "_update_and_stage_table", racing)
    ours.load_table("db.t").append(pa.table({"id": [1], "name": ["ours"]}, schema=SCHEMA))
    assert raced
    rows = ours.load_table("db.t").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["name"]) for r in rows) == [(1, "ours"), (2, "theirs")]
    assert current_version(tmp_path / "db" / "t") == 3  # created; theirs; ours, retried on theirs


def test_namespaces_are_directories_and_tables_those_with_versions(tmp_path):
    catalog = HadoopCatalog("lake", f"file://{tmp_path}")
    catalog.create_namespace("db")
    catalog.create_namespace("empty")
    catalog.create_table(("db", "t"), schema=SCHEMA)
    (tmp_path / "db" / "notes").mkdir()  # a directory without versions: a namespace, as in Java
    assert catalog.list_namespaces() == [("db",), ("empty",)]
    assert catalog.list_tables("db") == [("db", "t")]
    assert catalog.list_namespaces("db") == [("db", "notes")]
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace("db")
    catalog.drop_table("db.t")
    assert not (tmp_path / "db" / "t").exists()  # Java's drop deletes the table's directory
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.t")
    with pytest.raises(ValueError, match="takes no other location"):
        catalog.create_table(("db", "u"), schema=SCHEMA, location="/elsewhere")
    with pytest.raises(ValueError, match="carry no properties"):
        catalog.create_namespace("x", {"owner": "me"})


# -- against Java's Iceberg ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def java_iceberg(tmp_path_factory):
    """``java_iceberg(*args)``: tests/java/IcebergHadoop.java run on Java's Iceberg; its stdout lines."""
    classpath = java_classpath(ICEBERG, tmp_path_factory.mktemp("java"), "IcebergHadoop.java")

    def call(*args: str) -> list[str]:
        done = subprocess.run(["java", "-cp", classpath, "IcebergHadoop", *args], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.splitlines()

    return call


def _ddl(name: str, warehouse: Path, columns: str, extra: str = "") -> str:
    return (f"CREATE TEMPORARY TABLE {name} ({columns}) WITH ('connector' = 'iceberg', 'catalog-name' = 'lake',"
            f" 'catalog-type' = 'hadoop', 'warehouse' = '{warehouse}', 'catalog-database' = 'db'{extra});\n")


def test_streamsql_and_javas_iceberg_read_each_others_tables(run, java_iceberg, tmp_path):
    warehouse = tmp_path / "lake"
    java_iceberg("write", str(warehouse), "db", "from_java", "7")
    expected = [[str(i), "" if i % 3 == 0 else f"n{i}", str(i * 1.5)] for i in range(1, 8)]
    batch = "SET 'execution.runtime-mode' = 'batch';\n"
    columns = "id BIGINT, name STRING, amount DOUBLE"
    read = run.rows(batch + _ddl("from_java", warehouse, columns) + "SELECT * FROM from_java;")
    assert sorted(read, key=lambda r: int(r[0])) == expected

    # streamsql writes (a new table, two commits; then an upsert by key), Java reads
    keyed = columns + ", PRIMARY KEY (id) NOT ENFORCED"
    run.output(batch + _ddl("to_java", warehouse, keyed, ", 'catalog-table' = 'to_java'")
               + "INSERT INTO to_java SELECT id * 10, name, amount FROM from_java;\n"
               + "INSERT INTO to_java VALUES (10, 'changed', 0.5), (99, 'new', 9.0);")
    rows = java_iceberg("read", str(warehouse), "db", "to_java")
    assert rows[-1].startswith("snapshots ") and int(rows[-1].split()[1]) >= 2
    got = {int(line.split("\t")[0]): line.split("\t")[1:] for line in rows[:-1]}
    want = {int(i) * 10: [n or "null", a] for i, n, a in expected}
    want.update({10: ["changed", "0.5"], 99: ["new", "9.0"]})
    assert got == want

    # an 'iceberg' catalog of type hadoop lists both and creates a third that Java reads
    listed = run.rows(f"CREATE CATALOG lake WITH ('type' = 'iceberg', 'catalog-type' = 'hadoop', 'warehouse' ="
                      f" '{warehouse}');\nSHOW TABLES IN lake.db;")
    assert listed == [["from_java"], ["to_java"]]
    run.output(batch + "CREATE TABLE lake.db.made (k INT, v STRING);\n"
               "INSERT INTO lake.db.made SELECT CAST(id AS INT), name FROM lake.db.from_java WHERE id > 5;")
    assert sorted(java_iceberg("read", str(warehouse), "db", "made")[:-1]) == ["6\tnull", "7\tn7"]
    assert (warehouse / "db" / "made" / "metadata" / "version-hint.text").read_text() == "2"
