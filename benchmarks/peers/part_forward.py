"""Part 4: forward solvers -- fplanck vs fpirl's spectral and finite-volume solvers.

Same 2-D problems (``workers/cases.py``), same output times; every solution is compared at its own
nodes with a spectrally accurate reference: fpirl's Fourier solver at high resolution on the
periodic box, and -- for the reflecting case, whose psi and p0 are even about both walls -- the
same Fourier solver on the doubled periodic box [-1, 3]^2 (so the reference shares no code with
either finite-volume scheme). Error: relative L2 over all nodes and output times t > 0.
"""

from __future__ import annotations

import time

import numpy as np
from _bridge import call
from cases import CASES

from fpirl.forward import FiniteVolumeSolver, SpectralSolver

T_FINAL = 0.5
N_OUT = 11


def _grad_fn(case):
    return lambda pts: case["grad"](pts[..., 0], pts[..., 1])


def _psi_fn(case):
    return lambda pts: case["psi"](pts[..., 0], pts[..., 1])


def _p0_fn(case):
    return lambda pts: case["p0"](pts[..., 0], pts[..., 1])


def _reference(name, points):
    case = CASES[name]
    times = np.linspace(0.0, T_FINAL, N_OUT)
    if case["boundary"] == "periodic":
        lo, hi = case["lower"], case["upper"]
    else:  # even extension: the periodic problem on the doubled box
        lo, hi = case["lower"], [2 * u - l for l, u in zip(case["lower"], case["upper"])]
    t0 = time.perf_counter()
    s = SpectralSolver(lo, hi, points, _grad_fn(case), case["beta"])
    sol = s.solve(_p0_fn(case), times)
    if case["boundary"] != "periodic":
        sol *= 2.0 ** len(lo)  # unit mass on the doubled box = 1 / 2^d on the original one
    return s, sol, time.perf_counter() - t0


def _rel(p, ref):
    return float(np.sqrt(np.sum((p[1:] - ref[1:]) ** 2) / np.sum(ref[1:] ** 2)))


def run(quick: bool, cache, log=print) -> dict:
    ref_points = {"trig": 96 if quick else 128, "refl": 160 if quick else 256}
    sizes = {"fplanck": [32, 64] if quick else [32, 64, 128],
             "spectral": [16, 32] if quick else [16, 32, 64],
             "fv": [33, 65] if quick else [33, 65, 129]}
    times = np.linspace(0.0, T_FINAL, N_OUT)
    rows = []
    refs = {}
    for name, case in CASES.items():
        ref_s, ref_sol, ref_wall = _reference(name, ref_points[name])
        half_s, half_sol, _ = _reference(name, ref_points[name] // 2 + (ref_points[name] // 2) % 2)
        # accuracy of the reference: the half-resolution reference at the reference's nodes
        mats = half_s.evaluation_matrices(ref_s.coords)
        half_on_ref = np.einsum("ia,jb,tab->tij", mats[0], mats[1], half_sol)
        refs[name] = {"points": ref_points[name], "self_check": _rel(half_on_ref, ref_sol), "wall_s": ref_wall}
        log(f"[forward] {name}: reference {ref_points[name]}^2 Fourier ({ref_wall:.1f} s), "
            f"half-resolution difference {refs[name]['self_check']:.1e}")

        def ref_at(coords, ref_s=ref_s, ref_sol=ref_sol):
            m = ref_s.evaluation_matrices(coords)
            return np.einsum("ia,jb,tab->tij", m[0], m[1], ref_sol)

        for n in sizes["fplanck"]:
            out, info = call("fplanck", "fplanck_forward", {"case": name, "points": n, "times": times.tolist()},
                             cache=cache)
            err = _rel(out["density"], ref_at([out["x"], out["y"]]))
            rows.append({"case": name, "tool": f"fplanck {info['version']}", "resolution": f"{n}^2 cells",
                         "error": err, "wall_s": info["build_s"] + info["propagate_s"],
                         "note": f"build {info['build_s']:.2f} s + propagate {info['propagate_s']:.2f} s"})
            log(f"[forward] {name} fplanck {n}^2: error {err:.2e}, {rows[-1]['wall_s']:.2f} s")
        kind = "spectral" if case["boundary"] == "periodic" else "fv"
        for n in sizes[kind]:
            t0 = time.perf_counter()
            if kind == "spectral":
                s = SpectralSolver(case["lower"], case["upper"], n, _grad_fn(case), case["beta"])
            else:
                s = FiniteVolumeSolver(case["lower"], case["upper"], n, _psi_fn(case), case["beta"])
            sol = s.solve(_p0_fn(case), times)
            wall = time.perf_counter() - t0
            err = _rel(sol, ref_at(s.coords))
            label = "fpirl SpectralSolver" if kind == "spectral" else "fpirl FiniteVolumeSolver"
            rows.append({"case": name, "tool": label, "resolution": f"{n}^2 nodes", "error": err, "wall_s": wall,
                         "note": ""})
            log(f"[forward] {name} {label} {n}^2: error {err:.2e}, {wall:.2f} s")
    notes = [f"{name}: reference = fpirl's Fourier solver at {r['points']}^2 points"
             f"{' on the doubled periodic box [-1, 3]^2 (even extension)' if CASES[name]['boundary'] != 'periodic' else ''}"
             f", {r['wall_s']:.1f} s; it differs from the half-resolution reference by {r['self_check']:.1e}"
             for name, r in refs.items()]
    notes.append("the periodic reference is fpirl's own Fourier solver, so the SpectralSolver rows there measure "
                 "self-convergence (at the reference's half resolution the error equals the reference's own accuracy);"
                 " the reflecting reference (Fourier on the doubled box) shares no code with either finite-volume "
                 "scheme")
    notes.append(f"error: relative L2 over all nodes and the {N_OUT - 1} output times in (0, {T_FINAL}]; wall time "
                 "includes building the operator (fplanck: its Python loop over nodes) and propagating")
    return {"rows": rows, "references": refs, "t_final": T_FINAL, "n_out": N_OUT, "notes": notes}
