"""Part 1: tracks -> drift / potential. SFI, pysindy (trajectories), kramersmoyal vs fpirl.

Three 2-D cases, tracks from the Euler-Maruyama sampler ``fpirl.forward.markov.sample_sde`` (independent
of every estimator), uniform start, beta = 4, dt = 2e-3 (full: 2000 tracks x 400 steps):

* ``trig``: periodic [-1, 1]^2, psi = 0.45 sin(pi x) + 0.35 cos(pi y) + 0.2 cos(pi (x + y));
* ``wells``: reflecting [-1, 1]^2, psi = minus a sum of three Gaussian wells (outside every basis);
* ``rotational``: periodic, drift = -grad psi_trig + a divergence-free part (stream function
  0.3 sin(pi x) sin(pi y)): a potential-only model cannot represent it.

Error: relative L2 of the drift, each component's mean removed, on a 64 x 64 grid of cell centres
(uniform weights), and weighted by the density of the observations (where the data are).
"""

from __future__ import annotations

import time

import numpy as np
from _bridge import call
from _common import drift_error, eval_points
from cases import CASES

from fpirl import Grid, HermiteSpace
from fpirl.estimators import IncrementsEstimator, TrackDensityEstimator
from fpirl.forward.markov import histogram_density, sample_sde
from fpirl.tracks import TrackTable

PI = np.pi
BETA, DT = 4.0, 2e-3
WELLS = [(-0.45, -0.4, 1.2, 0.3), (0.5, -0.2, 1.0, 0.25), (0.0, 0.55, 0.9, 0.35)]  # cx, cy, depth, width
SAME_ELEMENTS = 3


def _wells_psi(x, y):
    return -sum(A * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * s**2)) for cx, cy, A, s in WELLS)


def _wells_grad(x, y):
    gx = sum(A * (x - cx) / s**2 * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * s**2)) for cx, cy, A, s in WELLS)
    gy = sum(A * (y - cy) / s**2 * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * s**2)) for cx, cy, A, s in WELLS)
    return np.stack([gx, gy], axis=-1)


def _rot(x, y):
    """Divergence-free part (d_y chi, -d_x chi) of the stream function chi = 0.3 sin(pi x) sin(pi y)."""
    return np.stack([0.3 * PI * np.sin(PI * x) * np.cos(PI * y), -0.3 * PI * np.cos(PI * x) * np.sin(PI * y)], -1)


def drift_fn(case: str):
    trig = CASES["trig"]["grad"]
    if case == "trig":
        return lambda x, y: -trig(x, y)
    if case == "wells":
        return lambda x, y: -_wells_grad(x, y)
    return lambda x, y: -trig(x, y) + _rot(x, y)


BOUNDARY = {"trig": "periodic", "wells": "reflecting", "rotational": "periodic"}


def simulate(case: str, n_tracks: int, steps: int, rng) -> tuple[np.ndarray, TrackTable]:
    """Paths ``(steps + 1, n_tracks, 2)`` inside the box, and the same as a TrackTable."""
    lo, hi = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    b = drift_fn(case)
    paths = sample_sde(lambda x: -b(x[:, 0], x[:, 1]), BETA, rng.uniform(lo, hi, (n_tracks, 2)), DT, steps, rng,
                       lo, hi, BOUNDARY[case])
    values = paths.transpose(1, 0, 2).reshape(-1, 2)
    seg = np.repeat(np.arange(n_tracks), steps + 1)
    time_ = np.tile(np.arange(steps + 1) * DT, n_tracks)
    table = TrackTable(values, seg, seg, time_, DT, ("x", "y"), ("state", "state"), lo, hi, BOUNDARY[case])
    return paths, table


def unwrap(paths: np.ndarray, lo, hi) -> np.ndarray:
    """Per-track unwrap of periodic positions (minimal-image increments, cumulated)."""
    L = np.asarray(hi) - np.asarray(lo)
    inc = np.diff(paths, axis=0)
    inc -= L * np.round(inc / L)
    return np.concatenate([paths[:1], paths[:1] + np.cumsum(inc, axis=0)], axis=0)


def _fpirl_rows(case, table, pts, b_true, w, log):
    rows = []
    configs = [
        ("increments", "recommended: defaults (resolution and ridge by CV over tracks, beta estimated)",
         lambda: IncrementsEstimator()),
        ("increments", f"same basis: {SAME_ELEMENTS} Hermite el./axis, ridge 0 (least squares)",
         lambda: IncrementsEstimator(hermite_elements=SAME_ELEMENTS, ridge=0.0,
                                     walls="none" if BOUNDARY[case] == "reflecting" else "mirror")),
        ("density", "recommended: defaults", lambda: TrackDensityEstimator()),
        ("density", f"same basis: {SAME_ELEMENTS} Hermite el./axis", lambda: TrackDensityEstimator(hermite_elements=SAME_ELEMENTS)),
    ]
    if BOUNDARY[case] == "reflecting":  # the wall model is part of the recommended increments estimator
        configs.insert(2, ("increments", f"{SAME_ELEMENTS} Hermite el./axis, ridge 0, wall model 'mirror'",
                           lambda: IncrementsEstimator(hermite_elements=SAME_ELEMENTS, ridge=0.0)))
    for name, settings, make in configs:
        t0 = time.perf_counter()
        est = make().fit(table)
        wall = time.perf_counter() - t0
        b = -est.gradient(pts)
        rows.append({"case": case, "tool": f"fpirl {name}", "settings": settings, "error": drift_error(b, b_true),
                     "error_weighted": drift_error(b, b_true, w), "wall_s": wall,
                     "note": f"beta {est.beta_:.3f}, Hermite {'x'.join(map(str, est.hermite_.elements))}",
                     "drift": b})
        log(f"[tracks] {case}: fpirl {name} [{settings[:40]}] drift {100 * rows[-1]['error']:.2f}% "
            f"(weighted {100 * rows[-1]['error_weighted']:.2f}%), {wall:.2f} s")
    return rows


def run(quick: bool, cache, seed: int = 2026, log=print) -> dict:
    n_tracks, steps = (400, 200) if quick else (2000, 400)
    lo, hi = [-1.0, -1.0], [1.0, 1.0]
    pts = eval_points(lo, hi, 64)
    rows, notes = [], []
    for ci, case in enumerate(("trig", "wells", "rotational")):
        rng = np.random.default_rng([seed, ci])
        paths, table = simulate(case, n_tracks, steps, rng)
        periodic = BOUNDARY[case] == "periodic"
        b_true = drift_fn(case)(pts[:, 0], pts[:, 1])
        grid = Grid(lo, hi, 64, boundary="periodic")
        w = histogram_density(grid, paths.reshape(-1, 2))  # observation density, for the weighted error
        w = np.maximum(_at(grid, w, pts), 0.0)
        case_rows = _fpirl_rows(case, table, pts, b_true, w, log)
        X = unwrap(paths, lo, hi) if periodic else paths
        common = {"lower": lo, "upper": hi, "dt": DT, "periodic": periodic}
        sfi_runs = [("same basis: Hermite gradients (3 el./axis), preset 'KM' (least squares)",
                     {"basis": "hermite", "elements": SAME_ELEMENTS, "preset": "KM"}),
                    ("recommended: preset 'auto', " + ("Fourier vector basis (|k| <= 1)" if periodic else
                                                        "monomials up to degree 3"),
                     {"basis": "fourier" if periodic else "poly", "degree": 3, "preset": "auto"})]
        for settings, p in sfi_runs:
            out, info = call("sfi", "sfi_force", {**common, **p}, {"X": X, "pts": pts}, cache=cache)
            case_rows.append(_row(case, f"SFI {info['version']}", settings, out["force"], b_true, w,
                                  info["wall_s"], f"JIT compile {info['compile_s']:.1f} s apart, "
                                  f"preset resolved to '{info['preset']}', beta {1 / info['diffusion']:.3f}", log))
        # alpha 1e-10 instead of 0: the same least squares (X^T X ~ 1e5-1e6 here), but scikit-learn then
        # solves by Cholesky instead of an SVD of the 800,000-row matrix (minutes on this machine)
        psy_runs = [("same basis: Hermite gradient components as inputs, forward differences, least squares",
                     {"library": "hermite", "elements": SAME_ELEMENTS, "derivative": "forward", "threshold": 0.0,
                      "alpha": 1e-10}),
                    ("recommended: " + ("Fourier library (+ its tensor square)" if periodic else
                                        "polynomials up to degree 3") + ", STLSQ 0.1, centred differences",
                     {"library": "fourier" if periodic else "poly", "degree": 3, "derivative": "centred",
                      "threshold": 0.1, "alpha": 0.05})]
        for settings, p in psy_runs:
            out, info = call("pysindy", "pysindy_tracks", {**common, **p}, {"X": X, "pts": pts}, cache=cache)
            case_rows.append(_row(case, f"pysindy {info['version']}", settings, out["drift"], b_true, w,
                                  info["wall_s"], f"{info['nonzero']} nonzero coefficients", log))
        out, info = call("kramersmoyal", "km_tracks", {**common, "bins": 100}, {"X": X}, cache=cache)
        b = _nearest(out["x"], out["y"], out["drift"], pts)
        case_rows.append(_row(case, f"kramersmoyal {info['version']}",
                              f"recommended: 100 x 100 bins, Epanechnikov kernel, Silverman bw = {info['bw']:.3f}",
                              b, b_true, w, info["wall_s"],
                              f"per-track calls; {info['empty_bins']} empty bins", log))
        if case == "rotational":
            rot = _rot(pts[:, 0], pts[:, 1])
            floor = float(np.sqrt(np.sum(rot**2) / np.sum((b_true - b_true.mean(0)) ** 2)))
            notes.append(f"rotational case: the divergence-free part is {100 * floor:.1f}% of the drift (L2): the "
                         "least error any potential-only model can reach (it is L2-orthogonal to every gradient "
                         "on the periodic box)")
        rows += case_rows
    # the check of both: SFI least squares and fpirl's unpenalised increments estimator on the same basis
    checks = {}
    for case in ("trig", "wells", "rotational"):
        sfi = [r for r in rows if r["case"] == case and r["tool"].startswith("SFI") and "same basis" in r["settings"]]
        inc = [r for r in rows if r["case"] == case and r["tool"] == "fpirl increments" and "same basis" in r["settings"]]
        if sfi and inc:
            a, b = sfi[0]["drift"], inc[0]["drift"]
            diff = float(np.sqrt(np.sum((a - b) ** 2) / np.sum((b - b.mean(0)) ** 2)))
            checks[case] = {"sfi": sfi[0]["error"], "fpirl": inc[0]["error"], "difference": diff}
            notes.append(f"{case}: SFI least squares ('KM' preset) and fpirl's unpenalised increments estimator on "
                         f"the same Hermite basis: drift errors {100 * sfi[0]['error']:.2f}% and "
                         f"{100 * inc[0]['error']:.2f}%, the two drift fields differ by {100 * diff:.3f}% (relative L2)")
            log(f"[tracks] check {case}: SFI vs fpirl same-basis drift fields differ by {100 * diff:.3f}%")
    for r in rows:
        r.pop("drift", None)
    return {"rows": rows, "notes": notes, "n_tracks": n_tracks, "steps": steps, "checks": checks}


def _at(grid: Grid, nodal: np.ndarray, pts: np.ndarray) -> np.ndarray:
    idx = [np.clip(np.round((pts[:, a] - grid.lower[a]) / grid.spacing[a]).astype(int), 0, grid.shape[a] - 1)
           for a in range(2)]
    return nodal[idx[0], idx[1]]


def _nearest(x, y, field, pts):
    ix = np.clip(np.searchsorted(x, pts[:, 0]) - 1, 0, x.size - 1)
    iy = np.clip(np.searchsorted(y, pts[:, 1]) - 1, 0, y.size - 1)
    ix = np.where(np.abs(x[np.minimum(ix + 1, x.size - 1)] - pts[:, 0]) < np.abs(x[ix] - pts[:, 0]), ix + 1, ix)
    iy = np.where(np.abs(y[np.minimum(iy + 1, y.size - 1)] - pts[:, 1]) < np.abs(y[iy] - pts[:, 1]), iy + 1, iy)
    return field[np.minimum(ix, x.size - 1), np.minimum(iy, y.size - 1)]


def _row(case, tool, settings, b, b_true, w, wall, note, log):
    row = {"case": case, "tool": tool, "settings": settings, "error": drift_error(b, b_true),
           "error_weighted": drift_error(b, b_true, w), "wall_s": wall, "note": note, "drift": np.asarray(b)}
    log(f"[tracks] {case}: {tool} [{settings[:40]}] drift {100 * row['error']:.2f}% "
        f"(weighted {100 * row['error_weighted']:.2f}%), {wall:.2f} s")
    return row


__all__ = ["HermiteSpace", "run"]
