"""Progress bars and status lines (tqdm).

Bars go to stderr; status lines to stdout through :func:`tqdm.tqdm.write`, which moves active bars
out of the way, so a line never lands in the middle of a bar. Whether bars are shown at all is the
caller's choice (``progress=``); the command line shows them only when stderr is a terminal
(:func:`show_progress`), so redirected logs carry no cursor-control codes.
"""

from __future__ import annotations

import sys

from tqdm import tqdm as plain_tqdm
from tqdm.auto import tqdm


def show_progress(requested: bool = True, stream=None) -> bool:
    """``requested`` and ``stream`` (default ``sys.stderr``) is a terminal."""
    if not requested:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def progress_bar(iterable=None, *, enabled: bool = True, **kwargs):
    """A tqdm bar over ``iterable`` (on stderr), a silent pass-through when not ``enabled``."""
    return tqdm(iterable, disable=not enabled, **kwargs)


def status_line(message: str) -> None:
    """Print one line on stdout without tearing an active progress bar."""
    plain_tqdm.write(message, file=sys.stdout)
    sys.stdout.flush()
