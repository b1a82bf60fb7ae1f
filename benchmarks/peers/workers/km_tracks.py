"""kramersmoyal: binned, kernel-smoothed first Kramers-Moyal coefficient from tracks (its venv).

``kramersmoyal.km`` takes one time series and differences consecutive rows, so tracks cannot be
concatenated (the joins would be increments). It is called once per track, on a bin lattice
aligned with one global lattice (``bins`` per box length, bandwidth fixed for all calls; default
Silverman's rule on all observations, as ``km`` does); periodic tracks are unwrapped, and the
smoothed sums are folded back into the box. The drift on each bin is
``sum_tracks kmc0 * kmc1 / sum_tracks kmc0 / dt`` (``kmc0``: the kernel-smoothed count).
"""

import time

import numpy as np
import peerio

params, arrays = peerio.load()
from kramersmoyal import km
from kramersmoyal.kernels import silvermans_rule

X = arrays["X"]  # (T, N, d)
T, N, d = X.shape
lower, upper = np.asarray(params["lower"], float), np.asarray(params["upper"], float)
nb = int(params["bins"])
dt = float(params["dt"])
periodic = bool(params["periodic"])
h = (upper - lower) / nb
t0 = time.perf_counter()
bw = params.get("bw")
bw = float(silvermans_rule(X.reshape(-1, d))) if bw is None else float(bw)
powers = np.array([[0, 0], [1, 0], [0, 1]])
count = np.zeros((nb, nb))
moment = np.zeros((2, nb, nb))
for i in range(N):
    x = X[:, i, :]
    lo_idx = np.floor((x.min(axis=0) - bw - lower) / h).astype(int) - 1
    hi_idx = np.ceil((x.max(axis=0) + bw - lower) / h).astype(int) + 1
    edges = [lower[a] + h[a] * np.arange(lo_idx[a], hi_idx[a] + 1) for a in range(d)]
    kmc, _ = km(x, bins=edges, powers=powers, bw=bw, center_edges=True)
    c = kmc[0]
    ix = [np.arange(lo_idx[a], hi_idx[a]) for a in range(d)]
    if periodic:
        ix = [np.mod(j, nb) for j in ix]
        sel = [np.ones(j.size, bool) for j in ix]
    else:
        sel = [(j >= 0) & (j < nb) for j in ix]
        ix = [j[s] for j, s in zip(ix, sel)]
    c = c[np.ix_(*sel)]
    grid_ix = np.ix_(*ix)
    np.add.at(count, grid_ix, c)
    for k in range(2):
        np.add.at(moment[k], grid_ix, c * kmc[1 + k][np.ix_(*sel)])
with np.errstate(invalid="ignore", divide="ignore"):
    drift = np.where(count > 1e-12, moment / np.maximum(count, 1e-300), 0.0) / dt
wall = time.perf_counter() - t0
centres = [lower[a] + h[a] * (np.arange(nb) + 0.5) for a in range(d)]
peerio.save({"wall_s": wall, "version": peerio.version("kramersmoyal"), "bw": bw, "bins": nb,
             "empty_bins": int(np.sum(count <= 1e-12))},
            drift=np.moveaxis(drift, 0, -1), x=centres[0], y=centres[1])
