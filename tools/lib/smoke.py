"""--smoke, the quick mode of every attack and bench script: tools/check/smoke_tools.sh runs
each script so in CI (tiny workspaces, a second or so of load) so that none rots unnoticed.
The numbers of a smoke run mean nothing; that it runs, and that an attack still holds, do."""

from __future__ import annotations

import argparse


def parse(parser: argparse.ArgumentParser, **small: object) -> argparse.Namespace:
    """The command line, with --smoke added; under --smoke each option named in `small`
    takes the value given there (fewer seconds, rounds, sizes or cases)."""
    parser.add_argument("--smoke", action="store_true", help="CI's quick run: the smallest sizes, short runs")
    args = parser.parse_args()
    if args.smoke:
        for name, value in small.items():
            setattr(args, name, value)
    return args
