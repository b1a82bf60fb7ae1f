"""pysindy weak-form PDE identification with space-dependent drift channels (pysindy's venv).

Inputs: density snapshots ``p`` (nt, nx, ny) on a uniform grid and channel fields ``c_j(x, y)``
(m, nx, ny). The library's input variables are ``u_0 = p`` and ``u_j = p c_j``; with
``derivative_order=2`` and no interactions, weak SINDy regresses ``p_t`` on ``u_j`` and all their
first and second derivatives, so ``p_t = sum_j a_j d_x(p c_j) + b_j d_y(p c_j) + e_x p_xx + e_y p_yy
+ ...`` is inside its model space: the drift is ``(-sum a_j c_j, -sum b_j c_j)``.
"""

import time
import warnings

import numpy as np
import peerio

params, arrays = peerio.load()
warnings.filterwarnings("ignore")
import pysindy as ps

p = arrays["p"]  # (nt, nx, ny)
chans = arrays["channels"]  # (m, nx, ny)
x, y = arrays["x"], arrays["y"]
dt = float(params["dt"])
nt = p.shape[0]
u = np.stack([p] + [p * c[None] for c in chans], axis=-1)  # (nt, nx, ny, 1+m)
u = np.moveaxis(u, 0, 2)  # (nx, ny, nt, 1+m)
grid = np.zeros(u.shape[:3] + (3,))
grid[..., 0] = x[:, None, None]
grid[..., 1] = y[None, :, None]
grid[..., 2] = (np.arange(nt) * dt)[None, None, :]
t0 = time.perf_counter()
# the library draws its subdomains with numpy's global RNG, already in its constructor
np.random.seed(int(params.get("seed", 0)))
lib = ps.WeakPDELibrary(
    function_library=ps.PolynomialLibrary(degree=1, include_bias=False),
    derivative_order=2,
    spatiotemporal_grid=grid,
    include_interaction=False,
    K=int(params["K"]),
    p=int(params.get("p", 4)),
    H_xt=params.get("H_xt"),
)
model = ps.SINDy(feature_library=lib, optimizer=ps.STLSQ(threshold=float(params["threshold"]), alpha=float(params["alpha"])))
model.fit(u, t=dt)
wall = time.perf_counter() - t0
names = lib.get_feature_names()
coef = model.coefficients()[0]  # the equation for p_t
m1 = 1 + chans.shape[0]
look = {n: c for n, c in zip(names, coef)}
ax = np.array([look.get(f"x{j}_1", 0.0) for j in range(m1)])
ay = np.array([look.get(f"x{j}_2", 0.0) for j in range(m1)])
diff = [look.get("x0_11", 0.0), look.get("x0_22", 0.0)]
peerio.save(
    {"wall_s": wall, "version": peerio.version("pysindy"), "n_features": len(names),
     "nonzero": int(np.count_nonzero(coef)), "diffusion": diff},
    ax=ax, ay=ay,
)
