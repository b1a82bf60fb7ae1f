"""pysindy in trajectory mode on tracks (runs in pysindy's venv).

Each track is one trajectory (periodic boxes: unwrapped positions). Libraries:

* ``fourier``: pysindy's FourierLibrary (1 frequency) plus its tensor square, on the scaled
  coordinates 2 pi (x - lower) / L (so that it covers sin/cos of pi(x +- y) on [-1, 1]^2);
* ``poly``: PolynomialLibrary of the given degree;
* ``hermite``: the same basis as fpirl -- the Hermite gradient components d_k phi_i, computed here
  and given to SINDy as control inputs, with a degree-1 library (each drift component is regressed
  on all of them: a superset of fpirl's gradient model).

``derivative``: 'centred' (pysindy's default second-order finite differences) or 'forward'
(first order, ``(x_{k+1} - x_k) / dt``, the Ito increment fpirl and SFI use).
"""

import time
import warnings

import numpy as np
import peerio

params, arrays = peerio.load()
warnings.filterwarnings("ignore")
import pysindy as ps

X = arrays["X"]  # (T, N, d)
pts = arrays["pts"]
dt = float(params["dt"])
lower, upper = np.asarray(params["lower"]), np.asarray(params["upper"])
kind = params["library"]


def hermite_1d(x, lo, hi, n, periodic):
    h = (hi - lo) / n
    ndof = 2 * n if periodic else 2 * (n + 1)
    s = (x - lo) / h
    if periodic:
        s = np.mod(s, n)
    c = np.clip(np.floor(s), 0, n - 1)
    t = s - c
    val = np.stack([2 * t**3 - 3 * t**2 + 1, (t**3 - 2 * t**2 + t) * h, -2 * t**3 + 3 * t**2, (t**3 - t**2) * h], -1)
    der = np.stack([6 * t**2 - 6 * t, (3 * t**2 - 4 * t + 1) * h, -6 * t**2 + 6 * t, (3 * t**2 - 2 * t) * h], -1) / h
    ci = c.astype(np.int64)[:, None] + np.array([0, 0, 1, 1])[None, :]
    idx = 2 * ci + np.array([0, 1, 0, 1])[None, :]
    if periodic:
        idx = np.mod(idx, ndof)
    V = np.zeros((x.size, ndof))
    D = np.zeros((x.size, ndof))
    rows = np.arange(x.size)[:, None]
    V[rows, idx] = val  # the four local dofs are distinct (ndof >= 4)
    D[rows, idx] = der
    return V, D


def hermite_features(x):
    n, periodic = int(params["elements"]), bool(params["periodic"])
    v0, d0 = hermite_1d(x[:, 0], lower[0], upper[0], n, periodic)
    v1, d1 = hermite_1d(x[:, 1], lower[1], upper[1], n, periodic)
    gx = (d0[:, :, None] * v1[:, None, :]).reshape(x.shape[0], -1)[:, 1:]
    gy = (v0[:, :, None] * d1[:, None, :]).reshape(x.shape[0], -1)[:, 1:]
    return np.concatenate([gx, gy], axis=1)


scale = 2 * np.pi / (upper - lower) if kind == "fourier" else np.ones_like(lower)
shift = lower if kind == "fourier" else np.zeros_like(lower)
trajs = [(X[:, i, :] - shift) * scale for i in range(X.shape[1])]
order = 1 if params["derivative"] == "forward" else 2
t0 = time.perf_counter()
if kind == "fourier":
    f = ps.FourierLibrary(n_frequencies=1)
    lib = f + f * ps.FourierLibrary(n_frequencies=1)
elif kind == "poly":
    lib = ps.PolynomialLibrary(degree=int(params["degree"]))
else:
    lib = ps.PolynomialLibrary(degree=1, include_bias=True)
model = ps.SINDy(feature_library=lib, optimizer=ps.STLSQ(threshold=float(params["threshold"]), alpha=float(params["alpha"])),
                 differentiation_method=ps.FiniteDifference(order=order))
if kind == "hermite":
    # forward differences on each track, given as x_dot (SINDy's own differentiation bypassed); with
    # x_dot given the rows are independent samples, so all tracks go in as one array
    x0 = np.concatenate([tr[:-1] for tr in trajs])
    xdot = np.concatenate([np.diff(tr, axis=0) / dt for tr in trajs])
    model.fit(x0, t=dt, x_dot=xdot, u=hermite_features(x0))
else:
    model.fit(trajs, t=dt)
wall = time.perf_counter() - t0
q = (pts - shift) * scale
if kind == "hermite":
    drift = model.predict(q, u=hermite_features(q))
else:
    drift = model.predict(q)
drift = drift / scale
coef = model.coefficients()
peerio.save({"wall_s": wall, "version": peerio.version("pysindy"), "n_features": int(coef.shape[1]),
             "nonzero": int(np.count_nonzero(coef))}, drift=np.asarray(drift))
