"""Shared pieces of the command line: exit codes, one-line errors, argument types, output checks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core._errors import FpirlInputError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command-line usage (exit code 2)."""


def _one_line(text) -> str:
    """``text`` on one line, control characters escaped (an error may quote a binary file's bytes)."""
    text = "".join(c if c.isprintable() or c.isspace() else repr(c)[1:-1] for c in str(text))
    return " ".join(text.split())


def count(n: int, noun: str) -> str:
    """``'1 track'``, ``'3 tracks'``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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


def _number(text: str, kind, ok, requirement: str):
    """Parse ``text`` as ``kind`` (int or float) and check ``ok(value)``; argparse type errors name
    the ``requirement``."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {requirement}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    return _number(text, float, lambda v: 0 < v < float("inf"), "a positive finite number")


def _nonnegative_float(text: str) -> float:
    return _number(text, float, lambda v: 0 <= v < float("inf"), "a non-negative finite number")


#: ``--beta``: beyond these the fit's ``1/beta`` and its square, and the simulators' ``beta`` times a squared
#: step, leave double precision (the fit's unknown is ``1/beta``; rescale the times to stay inside).
BETA_RANGE = (1e-30, 1e30)
#: ``--ridge``: a relative ridge above this drowns the data (the normal matrix is lost in rounding against it).
RIDGE_MAX = 1e6
#: Multiplying factors of ``fpirl solve`` (noise, drift, action push): beyond these the re-solved transition
#: is a point mass or a flat spread on any grid, and its squares leave double precision.
FACTOR_RANGE = (1e-6, 1e6)


def _in_range(lo: float, hi: float, requirement: str):
    """An argparse type: a float in ``[lo, hi]``, errors naming the ``requirement``."""
    return lambda text: _number(text, float, lambda v: lo <= v <= hi, requirement)


_beta = _in_range(*BETA_RANGE, f"a positive number between {BETA_RANGE[0]:g} and {BETA_RANGE[1]:g}")
_ridge_value = _in_range(0.0, RIDGE_MAX, f"'gcv' or a relative ridge between 0 and {RIDGE_MAX:g} (larger drowns the data)")
_factor = _in_range(*FACTOR_RANGE, f"a factor between {FACTOR_RANGE[0]:g} and {FACTOR_RANGE[1]:g}")
_push = _in_range(-FACTOR_RANGE[1], FACTOR_RANGE[1], f"a number between {-FACTOR_RANGE[1]:g} and {FACTOR_RANGE[1]:g}")


def _ridge(text: str):
    return "gcv" if text.strip().lower() == "gcv" else _ridge_value(text)


def _discount(text: str) -> float:
    return _number(text, float, lambda v: 0 <= v < 1, "a discount factor in [0, 1)")


def _positive_int(text: str) -> int:
    return _number(text, int, lambda v: v >= 1, "a positive integer")


def _seed(text: str) -> int:
    return _number(text, int, lambda v: v >= 0, "a non-negative integer")


def _output_netcdf(path, inputs=()) -> Path:
    """Check an output netCDF path before any work (:func:`fpirl.io.check_output_path`): .nc
    suffix, existing writable directory, not one of the ``inputs``."""
    from ..io._files import NETCDF_SUFFIXES, check_output_path

    return check_output_path(path, NETCDF_SUFFIXES, inputs)


def _output_directory(path) -> Path:
    """An output directory, created before any work (:func:`fpirl.io._files.check_output_directory`)."""
    from ..io._files import check_output_directory

    return check_output_directory(path)


#: ``fpirl fit`` on density data notes the data's support when it covers less than this share of the nodes.
SUPPORT_NOTE_SHARE = 0.95
#: Tracks: the note on a drift fast against dt below this one-step variance factor (about 10% from the Euler reading).
FAST_DRIFT_FACTOR = 0.9


def _beta_note(settings: dict, beta: float) -> str:
    """The line saying how beta's point estimate was corrected (basis error, discretisation bias)."""
    what = []
    if settings.get("beta_basis_corrected"):
        what.append(f"the Hermite basis error (a step of {settings['beta_correction_z']:.3g} noise standard deviations)")
    if settings.get("beta_discretisation_corrected"):
        z = settings.get("beta_discretisation_z")
        what.append(f"the time step and grid (the fitted model simulated and refitted gave beta {settings['beta_simulated']:.6g}"
                    + ("" if z is None else f"; a bias of {z:.3g} noise standard deviations of 1/beta") + ")")
    return f"beta corrected for {' and for '.join(what)}: fitted {settings['beta_fitted']:.6g}, psi refitted at {beta:.6g}"


def refuse_solved(ds, path) -> None:
    """One-line error for a file written by ``fpirl solve``: ``simulate`` runs a fit's psi, which a re-solve leaves
    as it was, so it would silently simulate the fitted model and not the solved policy."""
    if "solve_method" in ds.attrs:
        raise FpirlInputError(f"{str(path)!r} was written by fpirl solve: simulate runs the fitted potential, not the "
                              "re-solved policy (it would simulate the fit unchanged); simulate the fitted result, or "
                              "roll the solved policy out with fpirl rollout --policy resolved")


def _fit_notes(est, mdp, extra=None) -> list[str]:
    """Lines for the success message of ``fpirl fit``: what the ridge was, why Q, policy and
    reward are missing when they are, and (``extra``: the result's uncertainty attributes) when the
    snapshot-noise bands leave out the grid's discretisation error."""
    settings = est.settings_
    rel = settings.get("ridge_relative")
    how = {"gcv": "chosen by GCV", "cv": "chosen by cross-validation"}.get(settings.get("ridge_selection"), "fixed")
    lines = [_beta_note(settings, est.beta_)] if "beta_fitted" in settings else []
    if settings.get("psi_discretisation_corrected"):
        lines.append(f"psi corrected for the time step and grid (the fitted model simulated and refitted): a step of "
                     f"{100 * settings['psi_discretisation_step']:.2g}% of psi's spread on the nodes")
    phi = getattr(est, "time_step_factor_", None)
    if phi is not None and phi < FAST_DRIFT_FACTOR:
        cont = getattr(est, "beta_continuous_", None)
        lines.append(f"the drift is fast against dt (phi = {phi:.3g}: the one-step variance of a continuous motion "
                     "observed every dt is that share of 2 dt / beta): psi and beta are the one-step (Euler) model's at "
                     "dt, the paper's transition; if the tracks are a continuous motion, its wells are deeper than "
                     "psi's by about z / (1 - exp(-z)), z = curvature x dt"
                     + (f", and its beta reads {cont:.6g}" if cont is not None else "")
                     + "; a finer time step avoids the difference")
    share = (extra or {}).get("data_support_share")
    if share is not None and share < SUPPORT_NOTE_SHARE:
        lines.append(f"the snapshots carry mass (time-mean density >= 1e-3 of its largest) on {100 * share:.3g}% of "
                     "the nodes (data_support): elsewhere psi is the ridge's extrapolation, not a finding, and its "
                     "band is wide there")
    if (extra or {}).get("coarsen", 1) > 1:
        lines.append(f"the snapshots carry {100 * extra['coarsen_noise']:.2g}% noise per node: fitted on "
                     f"{extra['coarsen_grid']} (every {extra['coarsen']}-th node per axis: the stiffness amplifies "
                     "per-node noise less on a coarser grid), the result written on the data's grid; "
                     "--coarsen 1 fits the grid as given")
    if settings.get("hermite_selection") == "cv" and "hermite_cv_candidates" in settings:  # density data
        lines.insert(0, f"Hermite elements {settings['hermite_elements']} per axis, chosen by cross-validation over "
                        f"{settings['hermite_cv_blocks']} blocks of time steps (candidates "
                        f"{settings['hermite_cv_candidates'].replace(';', ' | ')}; the same fit without it: "
                        f"--hermite-elements {settings['hermite_elements']})")
    elif settings.get("hermite_selection") == "default":
        lines.insert(0, f"Hermite elements {settings['hermite_elements']} per axis, the default (4; 3 on 5 or more axes; "
                        "fewer where psi would have more coefficients than the grid has nodes; cross-validated only "
                        "on 1-3 axes, in-memory data with 3 or more time steps, the assembled solver, no scheduler, "
                        "and a Hermite space that beta's block means can resolve)")
    if settings.get("time_scheme_switched"):
        given = "beta_midpoint" not in settings
        lines.insert(0, "the snapshot spacing's error stands out of the noise (a step of "
                        f"{settings['time_step_z']:.3g} noise standard deviations of {'psi' if given else '1/beta'} "
                        "between the midpoint and Simpson rules): fitted with Simpson's rows"
                        + ("" if given else f" (midpoint beta {settings['beta_midpoint']:.6g})"))
    lines.append(f"ridge: {rel:.3g} relative ({how}), i.e. the weight of int |grad psi|^2 is lambda = relative x "
                 f"tr(A)/tr(P) = {est.penalty_:.3g} in absolute terms (A: the data's normal matrix, P: the penalty's)"
                 if rel is not None else f"ridge: {est.penalty_:.3g} (absolute weight of int |grad psi|^2)")
    if mdp is None:
        grid = est.grid_
        missing = "action" if not grid.action_axes else "state"
        axes = ", ".join(f"{n} ({r})" for n, r in zip(grid.names, grid.roles))
        lines.append(f"Q-value, policy and reward not computed: the data have no {missing} axis (axes: {axes}); "
                     "the MDP needs at least one state and one action axis (the potential psi is in the result)")
    extra = extra or {}
    if extra.get("source_kind") == "density" and extra.get("uncertainty") == "none":
        lines.append("no posterior (--uncertainty none, or one skipped): beta and psi are the least-squares fit's, "
                     "without the corrections a posterior brings (beta's for the Hermite basis error; beta's, or psi's "
                     "with beta given, for the time step and grid)")
    if extra.get("beta_discretisation_simulated") == 0:
        lines.append("beta's time-step and grid bias was not simulated and removed (the simulation is over its "
                     "size limit, as on most 4-D grids): beta and its interval leave that bias out, "
                     "which on coarse 4-D grids was measured at 4-9% of beta, beyond the interval (docs/benchmarks.md, "
                     "'Issue 20, twenty-third pass'); give --beta, or fit a finer grid")
    if extra.get("uncertainty_noise") in ("multiplicative", "additive") and extra.get("uncertainty_resolution") == 0:
        lines.append("potential_std and the bands leave out the grid's discretisation error: no second FE grid "
                     "was fitted (an axis with fewer than 4 elements; or too few nodes per Hermite element to "
                     "coarsen and a refined grid too large; or streamed data on a grid that cannot be halved); "
                     "they can be too narrow (docs/method.md, 'Discretisation error')")
    return lines


def _hermite_elements(text: str):
    """'auto', N or N1,N2,...; 0 on an axis (tables): psi constant along it, as the fit prints it."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto, N or N1,N2,... (integers), got {text!r}") from None
    if not values or any(v < 0 for v in values) or not any(values):
        raise argparse.ArgumentTypeError(f"element counts must be integers >= 0, not all 0 (0 keeps psi constant "
                                         f"along an axis of a table; density data need >= 2), got {text!r}")
    return values[0] if len(values) == 1 else values


def _mobility(text: str):
    text = text.strip().lower()
    if text == "auto":
        return "auto"
    if text.isdigit() and 0 <= int(text) <= 3:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected auto or a degree 0..3, got {text!r}")


def _lag(text: str) -> int:
    value = int(text) if text.strip().isdigit() else -1
    if not 0 <= value <= 5:
        raise argparse.ArgumentTypeError(f"expected a lag 0..5, got {text!r}")
    return value


def _coarsen(text: str):
    text = text.strip().lower()
    if text == "auto":
        return "auto"
    if text.isdigit() and int(text) >= 1 and int(text) & (int(text) - 1) == 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected auto or a power of two (1, 2, 4, ...), got {text!r}")


def _progress(args) -> bool:
    """Progress bars unless ``--no-progress``, and only when stderr is a terminal."""
    from ..core._progress import show_progress

    return show_progress(not getattr(args, "no_progress", False))


def add_column_arguments(group, required_note: str = "") -> None:
    """The trajectory-table column options (``--track --time --state --action``) of fit and evaluate."""
    group.add_argument("--track", metavar="COL", help=f"column with the track ids{required_note}")
    group.add_argument("--time", metavar="COL", help=f"column with the observation times{required_note}")
    group.add_argument("--state", metavar="C1,C2", help=f"state columns{required_note}")
    group.add_argument("--action", metavar="C3,C4|velocity",
                       help="action columns, or 'velocity' for backward differences of the states within a "
                       "track (default: the state alone is modelled)")


def table_columns_for(args, attrs) -> dict:
    """The ``read_tracks`` columns of a held-out or start table: those given on the command line
    (:func:`add_column_arguments`), else those the result records, and the result's stride."""
    from ..tracks.result_attrs import table_columns

    out = table_columns(attrs)
    for key in ("track", "time", "state", "action"):
        if getattr(args, key, None) is not None:
            out[key] = getattr(args, key)
    missing = [f"--{k}" for k in ("track", "time", "state") if not out[k]]
    if missing:
        raise FpirlInputError(f"the result does not record its table columns (it was not fitted on a track table); "
                              f"give {', '.join(missing)}")
    if out["action"] is not None and not out["action"].strip():
        out["action"] = None
    return out


def _print_uncertainty(extra) -> None:
    """The beta line of ``fpirl fit``'s uncertainty (interval and basis-corrected beta), when beta was estimated."""
    if "beta_lower" in extra:
        print(f"fpirl fit: uncertainty ({extra['uncertainty']}): beta 90% interval "
              f"[{extra['beta_lower']:.6g}, {extra['beta_upper']:.6g}]"
              + (f"; corrected for the Hermite basis error: {extra['beta_corrected']:.6g}" if "beta_corrected" in extra
                 else "")
              + (f"; with Simpson's rows: {extra['beta_simpson']:.6g}" if "beta_simpson" in extra else "")
              + (f"; for a continuous diffusion observed every dt (the point is the one-step, Euler value): "
                 f"{extra['beta_continuous']:.6g}" if "beta_continuous" in extra else "")
              + (f"; reaching the block-means beta at the default Hermite elements, {extra['beta_pilot']:.6g}"
                 if "beta_pilot" in extra else ""))
