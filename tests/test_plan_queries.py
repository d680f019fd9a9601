"""Every query the project ships (and the shared conformance cases) passes the planner's checks:
the plan-time checks of issue #11 must not refuse valid Flink SQL."""

from __future__ import annotations

import shutil

import pytest

from streamsql.catalog import Catalog
from streamsql.plan.udfs import add_search_path
from streamsql.runtime.engine import Engine
from tests.conftest import ROOT

CONFORMANCE = ROOT.parent / "shared" / "conformance"


def embedded_catalog(tmp_path) -> Catalog:
    """A copy of the repository's catalog (planning never writes, but a copy is safe)."""
    copy = tmp_path / "catalog"
    shutil.copytree(ROOT / "catalog", copy, ignore=shutil.ignore_patterns("data"))
    for database in ("demo", "nexmark"):  # the data stays where the stored paths point
        (copy / database / "data").symlink_to(ROOT / "catalog" / database / "data")
    return Catalog(copy)


@pytest.mark.parametrize("query", sorted(p.name for p in (ROOT / "queries" / "nexmark").glob("q*.sql")))
def test_nexmark_query_plans(tmp_path, query):
    add_search_path(ROOT / "queries" / "nexmark")
    engine = Engine(embedded_catalog(tmp_path), base_dir=ROOT / "queries" / "nexmark")
    engine.plan_script((ROOT / "queries" / "nexmark" / query).read_text())


def test_demo_plans(tmp_path):
    Engine(embedded_catalog(tmp_path), base_dir=tmp_path).plan_script((ROOT / "queries" / "demo.sql").read_text())


@pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="no shared conformance suite beside the repository")
@pytest.mark.parametrize("case", sorted(p.stem for p in (CONFORMANCE / "cases").glob("*.sql")) if CONFORMANCE.is_dir() else [])
def test_conformance_case_plans(tmp_path, case):
    add_search_path(CONFORMANCE / "udfs")
    data = str(CONFORMANCE / "data" / "nexmark")
    script = (CONFORMANCE / "ddl.sql").read_text() + (CONFORMANCE / "cases" / f"{case}.sql").read_text()
    Engine(Catalog(tmp_path / "catalog"), base_dir=tmp_path).plan_script(script.replace("${DATA}", data))
