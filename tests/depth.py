"""How far the randomized model tests go (a seeded random stream of micro-batches through a
pandas core, checked against a reference after every batch). Quick by default, so
``pytest -m "not spark"`` takes seconds while you work: fewer seeds and micro-batches, every
case still run. ``--thorough`` (the README's test command, so CI) runs them at full depth,
as hypothesis keeps a small profile for development and a large one for CI."""

from __future__ import annotations

THOROUGH = False  # set by conftest.pytest_configure from --thorough, before any test module is imported


def pick(quick: int, thorough: int) -> int:
    """``thorough`` under --thorough, else ``quick``."""
    return thorough if THOROUGH else quick


def seeds(quick: int, thorough: int, first: int = 0) -> range:
    """The seeds a randomized test is parametrized over, from ``first``."""
    return range(first, first + pick(quick, thorough))
