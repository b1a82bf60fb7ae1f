"""Shared pieces of the command line: exit codes, one-line errors, argument types, output checks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._errors import FpirlInputError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command-line usage (exit code 2)."""


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _error(message) -> None:
    print(f"fpirl: error: {_one_line(message)}", file=sys.stderr)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line on stderr (``fpirl: error: ...``)."""

    def error(self, message):  # noqa: D401 - argparse API
        raise UsageError(f"{message} (see '{self.prog} --help')")


# --------------------------------------------------------------------------------------------
# argument types
# --------------------------------------------------------------------------------------------
def _positive_int_list(text: str):
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N1,N2,... (positive integers), got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"element counts must be positive integers, got {text!r}")
    return values[0] if len(values) == 1 else values


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return value


def _nonnegative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a non-negative finite number, got {text!r}")
    return value


def _ridge(text: str):
    return "gcv" if text.strip().lower() == "gcv" else _nonnegative_float(text)


def _discount(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"discount factor must be in [0, 1), got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _output_netcdf(path) -> Path:
    """Check an output path early (before any work): .nc suffix, existing directory."""
    path = Path(path)
    if path.suffix.lower() not in (".nc", ".nc4", ".netcdf", ".cdf"):
        raise FpirlInputError(f"output {str(path)!r} must be a netCDF file ending in .nc")
    if not path.parent.is_dir():
        raise FpirlInputError(f"output directory does not exist: {str(path.parent)!r}")
    if path.is_dir():
        raise FpirlInputError(f"output path is a directory: {str(path)!r}")
    return path


def _progress(args) -> bool:
    """Progress bars unless ``--no-progress``, and only when stderr is a terminal."""
    from .._progress import show_progress

    return show_progress(not getattr(args, "no_progress", False))
