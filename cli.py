"""Thin entry point: `python cli.py ...` is the same as the `streamsql` command."""

import sys

from streamsql.cli import main

if __name__ == "__main__":
    sys.exit(main())
