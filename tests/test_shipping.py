"""The streamsql package shipped to a cluster's executors (no Spark needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from streamsql.runtime.shipping import PACKAGE, package_zip, runs_in_driver


def test_local_masters_run_in_the_driver_others_ship():
    assert runs_in_driver(None) and runs_in_driver("local") and runs_in_driver("local[*]") and runs_in_driver("local[2]")
    assert not runs_in_driver("spark://127.0.0.1:7077")
    assert not runs_in_driver("local-cluster[1,1,1024]")  # executors are processes of their own there
    assert not runs_in_driver("yarn") and not runs_in_driver("k8s://https://host:6443")


@pytest.mark.spark  # starts a process
def test_the_zip_holds_the_package_and_imports_from_anywhere(tmp_path):
    archive = package_zip(tmp_path)
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
    assert {"streamsql/__init__.py", "streamsql/runtime/shipping.py", "streamsql/spark/stateful/accumulate.py",
            "streamsql/runtime/conf/log4j2.properties"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # A Python that has only the zip on its path (run elsewhere, -I: no site, no cwd) imports it.
    code = (f"import sys; sys.path.insert(0, {str(archive)!r}); import streamsql.runtime.datasources as d; "
            "print(d.__file__)")
    result = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.stdout.strip() == f"{archive}/streamsql/runtime/datasources.py", result.stderr


def test_the_name_follows_the_content(tmp_path):
    copy = tmp_path / "src" / "streamsql"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    first = package_zip(tmp_path / "out", copy)
    assert package_zip(tmp_path / "out", copy) == first  # unchanged: the same zip, reused
    (copy / "runtime" / "shipping.py").write_text((copy / "runtime" / "shipping.py").read_text() + "\n# changed\n")
    second = package_zip(tmp_path / "out", copy)
    assert second != first and first.is_file() and second.is_file()


def test_a_udf_module_travels_with_the_modules_of_its_folder(tmp_path, monkeypatch):
    import importlib

    import pandas

    from streamsql.runtime.udfs import _modules_beside

    (tmp_path / "ship_udfs.py").write_text("import ship_helpers\nimport pandas\n\ndef f(x):\n    return ship_helpers.g(x)\n")
    (tmp_path / "ship_helpers.py").write_text("def g(x):\n    return x\n")
    (tmp_path / "ship_pkg").mkdir()
    (tmp_path / "ship_pkg" / "__init__.py").write_text("")
    (tmp_path / "ship_pkg" / "fns.py").write_text("from ship_pkg import inner\n")
    (tmp_path / "ship_pkg" / "inner.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("ship_udfs")
    beside = {m.__name__ for m in _modules_beside(module)}
    assert {"ship_udfs", "ship_helpers"} <= beside
    assert pandas.__name__ not in beside and "streamsql" not in beside and "streamsql.runtime.udfs" not in beside
    nested = {m.__name__ for m in _modules_beside(importlib.import_module("ship_pkg.fns"))}
    assert {"ship_pkg", "ship_pkg.fns", "ship_pkg.inner", "ship_udfs", "ship_helpers"} <= nested
