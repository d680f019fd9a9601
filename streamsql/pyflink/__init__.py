"""PyFlink's UDF import surface, for UDF modules written for PyFlink, without PyFlink.

A module written for PyFlink imports ``from pyflink.table import DataTypes`` and
``from pyflink.table.udf import udf, udtf`` (``ScalarFunction``, ``TableFunction``,
``from pyflink.common import Row``). When PyFlink is not installed, ``install`` makes these
names importable as ``pyflink.*`` from this package, so the module loads unchanged
(plan.udfs reads what the decorators record, the attributes PyFlink's own wrappers carry,
so a module imported with PyFlink installed loads the same way). Nothing here calls Flink:
the decorators only record the function, its kind and its result types.
"""

from __future__ import annotations

import importlib.util
import sys

_MODULES = ("", ".table", ".table.types", ".table.udf", ".common")


def install() -> None:
    """Make ``pyflink``, ``pyflink.table``, ``pyflink.table.types``, ``pyflink.table.udf`` and
    ``pyflink.common`` importable from here, unless PyFlink itself is installed."""
    if "pyflink" in sys.modules:
        return
    try:
        if importlib.util.find_spec("pyflink") is not None:
            return
    except (ImportError, ValueError):
        pass
    for suffix in _MODULES:
        sys.modules["pyflink" + suffix] = importlib.import_module(__name__ + suffix)
