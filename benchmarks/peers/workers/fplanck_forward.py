"""fplanck: propagate the 2-D Fokker-Planck equation of a given case (runs in fplanck's venv).

fplanck solves dp/dt = div(mu p grad U) + D lap p with D = k T / drag, mu = 1 / drag. With
drag = 1, U = psi and k T = 1 / beta this is fpirl's eq. fokker_planck_eq. Its grid is
cell-centred: ``ceil(extent / resolution)`` cells, centred on the origin (we shift the
callables by the box centre).
"""

import time

import numpy as np
import peerio
from cases import CASES
from scipy import constants

params, _ = peerio.load()
case = CASES[params["case"]]
import fplanck

n = int(params["points"])
times = np.asarray(params["times"], dtype=float)
lo, hi = np.asarray(case["lower"]), np.asarray(case["upper"])
centre, extent = 0.5 * (lo + hi), hi - lo
beta = case["beta"]
bc = fplanck.boundary.periodic if case["boundary"] == "periodic" else fplanck.boundary.reflecting


def potential(*xs):
    return case["psi"](*(x + c for x, c in zip(xs, centre)))


def initial(*xs):
    return case["p0"](*(x + c for x, c in zip(xs, centre)))


t0 = time.perf_counter()
sim = fplanck.fokker_planck(
    temperature=1.0 / (beta * constants.k), drag=1.0, extent=extent, resolution=extent / n,
    potential=potential, boundary=bc,
)
t_build = time.perf_counter() - t0
t1 = time.perf_counter()
# propagate_interval returns num = Nsteps snapshots on linspace(0, tf, Nsteps)
_, pdf = sim.propagate_interval(initial, times[-1], Nsteps=times.size)
t_prop = time.perf_counter() - t1
cell = float(np.prod(extent / np.asarray(sim.Ngrid)))
coords = [np.asarray(a) + c for a, c in zip(sim.axes, centre)]
peerio.save(
    {"build_s": t_build, "propagate_s": t_prop, "version": peerio.version("fplanck"), "cells": [int(m) for m in sim.Ngrid]},
    density=pdf / cell, x=coords[0], y=coords[1],
)
