"""Command line interface: ``fpirl <command> ...`` (docs/formats.md lists the spellings).

Only argument parsing, file handling and error reporting live here; every computation is in
the library. Each subcommand is one ``add_<name>_arguments(parser)`` function plus one
``cmd_<name>(args) -> int`` function, registered in :data:`SUBCOMMANDS`. To add a subcommand
(``simulate``, ``compare``, ``benchmark``, ...), write the two functions and add one line there.

Exit codes: 0 success, 2 bad input or usage (one line ``fpirl: error: ...`` on stderr),
1 anything else (one line too; ``--debug`` re-raises with the traceback).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import warnings

from ..core._errors import FpirlInputError, FpirlRuntimeError
from ._imports import keep_dask_out
from ._memory import retain_freed_memory, small_pages
from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError, _error, _one_line, _Parser
from .benchmark import add_benchmark_arguments, cmd_benchmark
from .commands import (add_compare_arguments, add_demo_arguments, add_plot_arguments, add_simulate_arguments,
                       cmd_compare, cmd_demo, cmd_plot, cmd_simulate)
from .evaluate import add_evaluate_arguments, cmd_evaluate
from .fit import add_fit_arguments, cmd_fit, join_negative_values
from .rollout import add_rollout_arguments, cmd_rollout
from .solve import add_solve_arguments, cmd_solve


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------
#: (name, one-line help, add_arguments, run). Add new subcommands here.
SUBCOMMANDS = [
    ("fit", "estimate the potential (and MDP) from density snapshots or trajectory tables", add_fit_arguments,
     cmd_fit),
    ("evaluate", "held-out one-step log-likelihood of a fitted model and the baselines on a track table",
     add_evaluate_arguments, cmd_evaluate),
    ("plot", "plot a result file", add_plot_arguments, cmd_plot),
    ("demo", "run the built-in synthetic example end to end", add_demo_arguments, cmd_demo),
    ("simulate", "simulate a fitted model forward (MDP map or FP PDE; tracks for a track fit)", add_simulate_arguments, cmd_simulate),
    ("compare", "observed vs simulated: KL over time (densities) or track statistics (tables)", add_compare_arguments,
     cmd_compare),
    ("solve", "re-solve a result's reward (soft-optimal policy) under its own or changed dynamics",
     add_solve_arguments, cmd_solve),
    ("rollout", "roll out the recovered or re-solved policy in a gymnasium environment", add_rollout_arguments,
     cmd_rollout),
    ("benchmark", "run a built-in benchmark (report, figures, results)", add_benchmark_arguments, cmd_benchmark),
]


def build_parser(commands=None) -> argparse.ArgumentParser:
    """The ``fpirl`` parser. ``commands``: the subcommands whose options are added (default all);
    the others are listed with their one-line help only, so ``fpirl --help`` and usage errors do
    not import what the options of every subcommand need."""
    from .. import __version__

    parser = _Parser(
        prog="fpirl",
        description="Fokker-Planck inverse reinforcement learning: recover potential, policy and "
        "reward from density snapshots.",
    )
    parser.add_argument("--version", action="version", version=f"fpirl {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, help_text, add_arguments, run in SUBCOMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show full tracebacks on errors")
        if commands is None or name in commands:
            add_arguments(p)
        p.set_defaults(func=run)
    return parser


def _requested_command(argv) -> list[str]:
    """The subcommand named on the command line (the first argument that is one), as a list."""
    names = {name for name, *_ in SUBCOMMANDS}
    return [a for a in argv if not a.startswith("-")][:1] if any(a in names for a in argv) else []


#: The warnings already printed in this run (a nested fit, e.g. beta's block means, can raise the same one again).
_SHOWN: set = set()


def _warning_one_line(message, category, filename, lineno, line=None):
    """One line per warning, each text once per run (an empty string for a repeat: nothing is printed)."""
    text = f"fpirl: warning: {_one_line(message)}\n"
    if text in _SHOWN:
        return ""
    _SHOWN.add(text)
    return text


_INPUT_ERRORS = (FpirlInputError, FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError,
                 PermissionError)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every cleanup (temporary files, clusters) runs."""


class _Signals:
    """SIGINT and SIGTERM raise :class:`KeyboardInterrupt` (resp. :class:`_Terminated`) and are
    remembered, so that one swallowed by a destructor (``Exception ignored in __del__``) still
    ends the run with a non-zero exit. After the run (``quiet``) further signals are ignored, so
    that interpreter shutdown never prints a traceback."""

    def __init__(self):
        self.received = None
        self._old = {}

    def _handler(self, signum, frame):
        self.received = signum
        raise _Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    def _unraisable(self, info):
        if isinstance(info.exc_value, KeyboardInterrupt) and self.received is not None:
            return  # our own signal, raised inside a destructor: remembered, reported once by main
        self._old_hook(info)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handler)
        self._old_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable
        return self

    def __exit__(self, *exc):
        return False

    def restore(self, quiet: bool) -> None:
        if getattr(self, "_old_hook", None) is not None and sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self._old_hook
        for sig, old in self._old.items():
            signal.signal(sig, signal.SIG_IGN if quiet else old)
        self._old = {}


def main(argv=None) -> int:
    """Entry point of the ``fpirl`` console script; returns the exit code.

    SIGINT and SIGTERM at any time end the run with one line and exit code 1 (a file being
    written is removed, as on any failure). numpy allocates without huge-page advice meanwhile
    (:func:`fpirl.cli._memory.small_pages`: faster fits on machines that defragment on demand). As the
    console script (``argv`` None) it also keeps freed memory for reuse
    (:func:`fpirl.cli._memory.retain_freed_memory`; the process's own setting, not reversible), and keeps
    dask out of the process unless ``--scheduler`` is given (:func:`fpirl.cli._imports.keep_dask_out`).
    """
    command_line = argv is None
    if command_line:
        retain_freed_memory()
        keep_dask_out(sys.argv[1:])
    signals = _Signals()
    code = EXIT_FAILURE
    try:
        with signals, small_pages():
            code = _main(argv, signals)
    except KeyboardInterrupt as exc:  # a signal between the handlers and _main's own try
        _error("terminated (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted")
        code = EXIT_FAILURE
    finally:
        signals.restore(quiet=command_line)
    return code


def _main(argv, signals) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else list(argv))
    old_format = warnings.formatwarning
    try:
        argv = join_negative_values(sys.argv[1:] if argv is None else list(argv))  # --bounds -1:1,... as typed
        parser = build_parser(_requested_command(argv))
        try:
            args = parser.parse_args(argv)
        except UsageError as exc:
            _error(exc)
            return EXIT_USAGE
        except SystemExit as exc:  # --help / --version
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        debug = debug or getattr(args, "debug", False)
        if not debug:
            _SHOWN.clear()
            warnings.formatwarning = _warning_one_line
        code = int(args.func(args) or EXIT_OK)
        if signals.received is not None:  # a signal swallowed inside a destructor
            raise _Terminated() if signals.received == signal.SIGTERM else KeyboardInterrupt()
        return code
    except (UsageError, *_INPUT_ERRORS) as exc:
        if debug:
            raise
        _error(exc)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        if debug:
            raise
        _error("terminated (SIGTERM)" if isinstance(exc, _Terminated) else "interrupted")
        return EXIT_FAILURE
    except FpirlRuntimeError as exc:  # disk full, a lost cluster: the message says it all
        if debug:
            raise
        _error(exc)
        return EXIT_FAILURE
    except MemoryError as exc:
        if debug:
            raise
        _error(f"out of memory: {exc}" if str(exc) else "out of memory")
        return EXIT_FAILURE
    except BrokenPipeError:  # the reader of stdout left (``fpirl ... | head``): stop quietly
        _silence_stdout()
        return EXIT_FAILURE
    except (OverflowError, FloatingPointError, ZeroDivisionError) as exc:
        if debug:
            raise
        _error(f"numerical overflow or division by zero ({exc}): the data's scales (times, coordinates, values) or "
               "the options (beta, ridge, scales) are out of the range this computation can represent")
        return EXIT_FAILURE
    except Exception as exc:
        if debug:
            raise
        _error(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILURE
    finally:
        warnings.formatwarning = old_format


def _silence_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's final flush does not fail again on a
    closed pipe (the recipe of the Python documentation, "Note on SIGPIPE")."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (captured in-process)
        pass


if __name__ == "__main__":
    sys.exit(main())
