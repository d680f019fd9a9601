"""The catalog: persistence across runs, temporary objects, atomic writes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamsql.catalog import Catalog
from streamsql.catalog_files import CatalogFiles
from streamsql.dialect.script import parse_script
from streamsql.errors import CatalogError, Position, StreamsqlError
from streamsql.plan.objects import ObjectName
from streamsql.plan.planner import Planner
from streamsql.runtime.engine import Engine
from streamsql.runtime.results import ResultWriter
from tests.conftest import ROOT

DDL = """CREATE TABLE bid (auction BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv')"""


pytestmark = pytest.mark.usefixtures("source_files")


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


@pytest.mark.parametrize("publish, statement", [("link", "CREATE TABLE"), ("replace", "CREATE OR REPLACE TABLE")])
def test_failed_write_leaves_a_loadable_catalog(tmp_path, monkeypatch, publish, statement):
    apply(Catalog(tmp_path / "cat"), DDL, tmp_path)
    before = (tmp_path / "cat" / "default_database" / "bid.sql").read_text()

    def crash(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, publish, crash)
    with pytest.raises(CatalogError, match="No space left on device"):
        apply(Catalog(tmp_path / "cat"), DDL.replace("CREATE TABLE bid", f"{statement} other"), tmp_path)
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "cat" / "default_database").iterdir()) == ["bid.sql"]
    assert (tmp_path / "cat" / "default_database" / "bid.sql").read_text() == before
    reloaded = Catalog(tmp_path / "cat")
    assert reloaded.get(ObjectName("default_database", "bid")) is not None
    assert reloaded.get(ObjectName("default_database", "other")) is None


def test_databases_and_qualified_names(tmp_path):
    catalog = Catalog(tmp_path / "cat")
    apply(catalog, DDL.replace("CREATE TABLE bid", "CREATE TABLE sales.bid") + "; SELECT price FROM sales.bid; SELECT price FROM default_catalog.sales.bid", tmp_path)
    assert "sales" in Catalog(tmp_path / "cat").databases()


# -- a catalog that degrades, never breaks ---------------------------------------------

TRUNCATED = "CREATE TABLE zeta (a INT, b STR"
GARBAGE = bytes([0x00, 0x9F, 0xFF, 0xFE, 0x41, 0x80, 0x00, 0xC3]) * 8


def broken_catalog(tmp_path, garbage: bool = True) -> Path:
    """A catalog with a good table (demo.bid), a truncated file and (unless not wanted) a binary one."""
    folder = tmp_path / "cat" / "demo"
    folder.mkdir(parents=True)
    apply(Catalog(tmp_path / "cat"), DDL.replace("TABLE bid", "TABLE demo.bid"), tmp_path)
    (folder / "zeta.sql").write_text(TRUNCATED)
    if garbage:
        (folder / "junk.sql").write_bytes(GARBAGE)
    return tmp_path / "cat"


def test_a_truncated_file_blocks_nothing_and_is_reported_once(tmp_path):
    warnings = []
    catalog = Catalog(broken_catalog(tmp_path, garbage=False), warn=warnings.append)
    apply(catalog, "SELECT 1; SELECT price FROM demo.bid; SHOW TABLES; USE demo; SHOW TABLES", tmp_path)
    apply(catalog.staged(), "SELECT 1", tmp_path)
    zeta = tmp_path / "cat" / "demo" / "zeta.sql"
    assert warnings == [
        f"Warning: catalog file {zeta} does not load (line 1, column 32: Expecting ) at the end of the statement);"
        " skipped. DROP TABLE demo.zeta removes it."
    ]
    assert [o.name.name for o in catalog.objects("demo")] == ["bid"]
    apply(catalog, "DROP TABLE bid", tmp_path)
    assert not (tmp_path / "cat" / "demo" / "bid.sql").exists() and zeta.exists()


def test_binary_garbage_is_a_warning_naming_the_file(tmp_path):
    warnings = []
    catalog = Catalog(broken_catalog(tmp_path), warn=warnings.append)
    apply(catalog, "SHOW DATABASES; SHOW TABLES", tmp_path)
    junk = tmp_path / "cat" / "demo" / "junk.sql"
    assert [w for w in warnings if str(junk) in w] == [
        f"Warning: catalog file {junk} does not load (not UTF-8 text: byte 0x9f at offset 1); skipped."
        " DROP TABLE demo.junk removes it."
    ]
    assert len(warnings) == 2


def test_unreadable_and_invalid_files_are_skipped(tmp_path, monkeypatch):
    folder = tmp_path / "cat" / "default_database"
    folder.mkdir(parents=True)
    (folder / "locked.sql").write_text(DDL.replace("TABLE bid", "TABLE locked"))
    (folder / "odd.sql").write_text("CREATE TABLE odd (a INT) WITH ('connector' = 'pulsar')")
    (folder / "empty.sql").write_text("")
    (folder / "f.function.sql").write_text("CREATE FUNCTION f AS 'm.f' LANGUAGE JAVA")
    (folder / "named.sql").write_text(DDL)  # defines bid, not named
    read_bytes = Path.read_bytes

    def locked(path):
        if path.name == "locked.sql":
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", locked)
    warnings = []
    catalog = Catalog(tmp_path / "cat", warn=warnings.append)
    assert catalog.objects() == []
    reasons = {Path(w.split()[3]).name: w for w in warnings}
    assert sorted(reasons) == ["empty.sql", "f.function.sql", "locked.sql", "named.sql", "odd.sql"]
    assert "(Permission denied)" in reasons["locked.sql"]
    assert "pulsar" in reasons["odd.sql"]
    assert "expected one statement, found 0" in reasons["empty.sql"]
    assert "LANGUAGE JAVA" in reasons["f.function.sql"] and "DROP FUNCTION default_database.f" in reasons["f.function.sql"]
    assert "it defines default_database.bid" in reasons["named.sql"]
    with pytest.raises(CatalogError, match="f.function.sql does not load"):
        apply(catalog, "SELECT f(1)")
    apply(catalog, "DROP FUNCTION f; DROP TABLE locked; DROP VIEW odd; DROP TABLE IF EXISTS empty; DROP TABLE named")
    assert list(folder.iterdir()) == []


def test_querying_a_broken_table_names_its_file_at_the_reference(tmp_path):
    cat = broken_catalog(tmp_path)
    (cat / "demo" / "v.sql").write_text("CREATE VIEW v AS\nSELECT a FROM zeta;\n")
    engine = Engine(Catalog(cat), base_dir=tmp_path, log=lambda message: None)
    with pytest.raises(CatalogError) as error:
        engine.plan_script("SELECT 1;\nSELECT a FROM demo.zeta")
    assert str(cat / "demo" / "zeta.sql") in error.value.message and "Expecting )" in error.value.message
    assert "DROP TABLE demo.zeta" in error.value.message
    assert error.value.position == Position(2, 20)
    with pytest.raises(CatalogError, match="zeta.sql does not load") as error:
        engine.plan_script("SELECT *\n  FROM demo.v")  # through a view: the view's use is pointed at
    assert error.value.position == Position(2, 13)
    with pytest.raises(CatalogError, match="zeta.sql does not load") as error:
        engine.plan_script("DESCRIBE demo.zeta")
    assert error.value.position == Position(1, 15)


def test_a_broken_file_is_never_overwritten(tmp_path):
    """The REPL bug: after the first error CREATE TABLE zeta silently overwrote zeta.sql."""
    cat = broken_catalog(tmp_path, garbage=False)
    zeta = cat / "demo" / "zeta.sql"
    engine = Engine(Catalog(cat), base_dir=tmp_path, log=lambda message: None)
    try:  # the shell's first command loads the catalog; an error there must not leave it half-loaded
        engine.run_script("SHOW TABLES", ResultWriter("csv", io.StringIO()))
    except StreamsqlError:
        pass
    create = "CREATE TABLE demo.zeta (a INT) WITH ('connector' = 'blackhole')"
    for script in (create, "SELECT 1; " + create):
        with pytest.raises(CatalogError, match=f"'demo.zeta' exists but does not load: catalog file {zeta}"):
            engine.plan_script(script)
        with pytest.raises(CatalogError, match="DROP it or CREATE OR REPLACE it"):
            apply(engine.catalog, script, tmp_path)  # the live catalog, as run_script uses it
    apply(engine.catalog, create.replace("TABLE", "TABLE IF NOT EXISTS"), tmp_path)  # it exists: a no-op
    assert zeta.read_text() == TRUNCATED
    apply(engine.catalog, create.replace("CREATE", "CREATE OR REPLACE"), tmp_path)
    assert zeta.read_text().startswith("CREATE TABLE demo.zeta (\n")
    assert Catalog(cat).get(ObjectName("demo", "zeta")).options == {"connector": "blackhole"}


def test_drop_and_replace_a_broken_entry_in_a_staged_plan(tmp_path):
    cat = broken_catalog(tmp_path)
    engine = Engine(Catalog(cat), base_dir=tmp_path, log=lambda message: None)
    engine.plan_script("DROP TABLE demo.zeta; CREATE TABLE demo.zeta (a INT) WITH ('connector' = 'blackhole');"
                       " CREATE OR REPLACE VIEW demo.junk AS SELECT a FROM demo.zeta")
    assert (cat / "demo" / "zeta.sql").read_text() == TRUNCATED  # planning writes nothing
    apply(engine.catalog, "DROP TABLE IF EXISTS demo.zeta; DROP VIEW demo.junk; DROP TABLE IF EXISTS demo.junk")
    assert sorted(p.name for p in (cat / "demo").iterdir()) == ["bid.sql"]


def test_an_interrupted_load_is_read_again(tmp_path, monkeypatch):
    catalog = Catalog(broken_catalog(tmp_path), warn=lambda message: None)
    read = CatalogFiles.read

    def interrupted(self, kind, name, path):
        if name.name == "zeta":
            raise KeyboardInterrupt
        return read(self, kind, name, path)

    monkeypatch.setattr(CatalogFiles, "read", interrupted)
    with pytest.raises(KeyboardInterrupt):
        catalog.get(ObjectName("demo", "bid"))
    monkeypatch.undo()
    assert catalog.get(ObjectName("demo", "bid")) is not None
    with pytest.raises(CatalogError, match="zeta.sql does not load"):
        catalog.get(ObjectName("demo", "zeta"))


def test_drop_database_cascade_removes_broken_entries(tmp_path):
    cat = broken_catalog(tmp_path)
    catalog = Catalog(cat, warn=lambda message: None)
    with pytest.raises(CatalogError, match="is not empty"):
        apply(catalog, "DROP TABLE demo.bid; DROP DATABASE demo")
    apply(catalog, "DROP DATABASE demo CASCADE")
    assert not (cat / "demo").exists()


# -- CREATE OR REPLACE -----------------------------------------------------------------

def test_create_or_replace_table_view_and_table_as_select(tmp_path):
    catalog = Catalog(tmp_path / "cat")
    stored = tmp_path / "cat" / "default_database"
    apply(catalog, DDL + "; CREATE VIEW v AS SELECT price FROM bid", tmp_path)
    apply(catalog, DDL.replace("CREATE", "CREATE OR REPLACE").replace("price BIGINT", "price INT")
          + "; CREATE OR REPLACE VIEW v AS SELECT auction FROM bid; SELECT auction FROM v", tmp_path)
    reloaded = Catalog(tmp_path / "cat")
    assert reloaded.get(ObjectName("default_database", "bid")).column("price").type.sql() == "INT"
    assert [c.name for c in Engine(reloaded).plan_script("SELECT * FROM v")[0].plan.columns] == ["auction"]
    assert (stored / "v.sql").read_text() == "CREATE VIEW v AS\nSELECT\n  auction\nFROM bid;\n"
    steps = apply(catalog, "CREATE OR REPLACE TABLE t WITH ('connector' = 'blackhole') AS SELECT auction FROM bid;"
                           " CREATE OR REPLACE TABLE t WITH ('connector' = 'blackhole') AS SELECT price FROM bid", tmp_path)
    assert [c.name for c in steps[1].inserts[0].table.columns] == ["price"]
    assert (stored / "t.sql").read_text().startswith("CREATE TABLE t (\n  price INT\n)")
    assert not any("REPLACE" in p.read_text() for p in stored.iterdir())
    with pytest.raises(CatalogError, match="cannot be combined with IF NOT EXISTS"):
        apply(catalog, "CREATE OR REPLACE VIEW IF NOT EXISTS v AS SELECT 1 AS x")


def test_alter_replaces_the_file(tmp_path):
    catalog = Catalog(tmp_path / "cat")
    apply(catalog, DDL + "; ALTER TABLE bid SET ('csv.allow-comments' = 'true'); ALTER TABLE bid RENAME TO bids", tmp_path)
    assert sorted(p.name for p in (tmp_path / "cat" / "default_database").iterdir()) == ["bids.sql"]
    assert Catalog(tmp_path / "cat").get(ObjectName("default_database", "bids")).options["csv.allow-comments"] == "true"


# -- concurrent writers ----------------------------------------------------------------

def test_two_sessions_creating_the_same_table(tmp_path):
    first, second = Catalog(tmp_path / "cat"), Catalog(tmp_path / "cat")
    first.objects(), second.objects()  # both loaded before either creates
    apply(first, DDL, tmp_path)
    with pytest.raises(CatalogError, match="was created by another session meanwhile with a different definition"):
        apply(second, DDL.replace("price BIGINT", "price INT"), tmp_path)
    assert Catalog(tmp_path / "cat").get(ObjectName("default_database", "bid")).column("price").type.sql() == "BIGINT"
    apply(second, DDL, tmp_path)  # the same definition: a no-op, as for a rerun script
    assert second.get(ObjectName("default_database", "bid")).column("price").type.sql() == "BIGINT"
    apply(second, DDL.replace("CREATE", "CREATE OR REPLACE").replace("price BIGINT", "price INT"), tmp_path)
    assert Catalog(tmp_path / "cat").get(ObjectName("default_database", "bid")).column("price").type.sql() == "INT"


RACER = """
import sys, time
from pathlib import Path
from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.errors import CatalogError
from streamsql.plan.planner import Planner
catalog, go, price = Catalog(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
catalog.objects()
Path(sys.argv[2] + "." + price).touch()
while not go.exists():
    time.sleep(0.005)
ddl = "CREATE TABLE bid (auction BIGINT, price " + price + ") WITH ('connector' = 'blackhole')"
try:
    Planner(catalog).plan(parse_script(ddl)[0])
    print("created")
except CatalogError as error:
    print(error.message)
"""


@pytest.mark.spark  # starts a process
def test_two_processes_creating_the_same_table_one_wins(tmp_path):
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(tmp_path / "cat"), str(go), price],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
              for price in ("BIGINT", "INT")]
    deadline = time.time() + 60
    while not all((tmp_path / f"go.{price}").exists() for price in ("BIGINT", "INT")) and time.time() < deadline:
        time.sleep(0.01)
    go.touch()
    outputs = [racer.communicate(timeout=60)[0].strip() for racer in racers]
    assert sorted(outputs)[1] == "created", outputs
    loser = sorted(outputs)[0]
    assert "was created by another session meanwhile with a different definition" in loser
    winner = ("BIGINT", "INT")[outputs.index("created")]
    stored = Catalog(tmp_path / "cat").get(ObjectName("default_database", "bid"))
    assert stored.column("price").type.sql() == winner


# -- the command line ------------------------------------------------------------------

@pytest.mark.spark  # starts a process
def test_cli_reports_each_broken_file_once_and_runs(tmp_path):
    cat = broken_catalog(tmp_path)
    env = dict(os.environ, STREAMSQL_CATALOG=str(cat))
    result = subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", "--format", "csv", "-e", "USE demo; SHOW TABLES; SHOW TABLES"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["table name", "bid", "table name", "bid"]
    lines = result.stderr.splitlines()
    for name in ("junk.sql", "zeta.sql"):
        assert len([line for line in lines if line.startswith(f"Warning: catalog file {cat / 'demo' / name} does not load")]) == 1
    assert len(lines) == 2 and "Traceback" not in result.stderr
    failed = subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", "-e", "SELECT * FROM demo.zeta"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert f"its catalog file {cat / 'demo' / 'zeta.sql'} does not load" in failed.stderr


@pytest.mark.spark  # starts a process
def test_shell_reports_at_start_and_never_overwrites(tmp_path):
    """The shell session of the bug report: the first error must not leave the catalog half-loaded."""
    pexpect = pytest.importorskip("pexpect")
    cat = broken_catalog(tmp_path)
    env = dict(os.environ, STREAMSQL_CATALOG=str(cat), TERM="xterm", HOME=str(tmp_path))
    shell = pexpect.spawn(sys.executable, [str(ROOT / "cli.py")], cwd=str(tmp_path), env=env, encoding="utf-8",
                          timeout=60, dimensions=(50, 400))
    try:
        shell.expect_exact(f"Warning: catalog file {cat / 'demo' / 'junk.sql'} does not load")
        shell.expect_exact(f"Warning: catalog file {cat / 'demo' / 'zeta.sql'} does not load")
        shell.expect_exact("Flink SQL>")
        shell.send("SELECT * FROM demo.zeta;\r")
        shell.expect_exact("zeta.sql does not load")
        shell.expect_exact("Flink SQL>")
        shell.send("CREATE TABLE demo.zeta (a INT) WITH ('connector' = 'blackhole');\r")
        shell.expect_exact("exists but does not load")
        shell.expect_exact("Flink SQL>")
        shell.send("QUIT;\r")
        shell.expect(pexpect.EOF)
        assert "Warning" not in shell.before
    finally:
        shell.terminate(force=True)
    assert (cat / "demo" / "zeta.sql").read_text() == TRUNCATED
