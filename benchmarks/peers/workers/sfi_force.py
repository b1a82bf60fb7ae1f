"""Stochastic Force Inference: linear force inference on tracks (runs in SFI's venv, JAX on CPU).

Bases (vector fields, features last, as SFI's ``make_basis`` wants):

* ``hermite``: the gradients of fpirl's cubic Hermite space (tensor product of C^1 piecewise cubics
  on ``n`` elements per axis, periodic or not), one function dropped to remove the constant mode
  -- the same span of drift fields as fpirl's increments estimator;
* ``fourier``: e_k g(x) for g in {1, sin, cos of pi(x), pi(y), pi(x+y), pi(x-y)} (periodic boxes);
* ``poly``: e_k x^i y^j, i + j <= degree.

The whole pipeline (data object, diffusion, force) runs twice; the first run includes the JIT
compilation, the second is the reported wall time.
"""

import time

import numpy as np
import peerio

params, arrays = peerio.load()
import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from SFI import OverdampedLangevinInference, TrajectoryCollection
from SFI.statefunc import make_basis

lower = np.asarray(params["lower"], float)
upper = np.asarray(params["upper"], float)
d = lower.size
kind = params["basis"]


def hermite_1d(x, lo, hi, n, periodic):
    """Values and derivatives of the 1-D Hermite dofs at scalar x: two vectors of length n_dofs."""
    h = (hi - lo) / n
    ndof = 2 * n if periodic else 2 * (n + 1)
    s = (x - lo) / h
    if periodic:
        s = jnp.mod(s, n)
    c = jnp.clip(jnp.floor(s), 0, n - 1)
    t = s - c
    val = jnp.stack([2 * t**3 - 3 * t**2 + 1, (t**3 - 2 * t**2 + t) * h, -2 * t**3 + 3 * t**2, (t**3 - t**2) * h])
    der = jnp.stack([6 * t**2 - 6 * t, (3 * t**2 - 4 * t + 1) * h, -6 * t**2 + 6 * t, (3 * t**2 - 2 * t) * h]) / h
    ci = c.astype(jnp.int32)
    idx = jnp.stack([2 * ci, 2 * ci + 1, 2 * ci + 2, 2 * ci + 3])
    if periodic:
        idx = jnp.mod(idx, ndof)
    return jnp.zeros(ndof).at[idx].add(val), jnp.zeros(ndof).at[idx].add(der)


if kind == "hermite":
    n_el, periodic = int(params["elements"]), bool(params["periodic"])
    ndof = 2 * n_el if periodic else 2 * (n_el + 1)
    m = ndof * ndof - 1

    def func(x):
        v0, d0 = hermite_1d(x[0], lower[0], upper[0], n_el, periodic)
        v1, d1 = hermite_1d(x[1], lower[1], upper[1], n_el, periodic)
        gx = jnp.outer(d0, v1).ravel()[1:]  # drop dof (value@node0 x value@node0): the constant mode
        gy = jnp.outer(v0, d1).ravel()[1:]
        return jnp.stack([gx, gy])

elif kind == "fourier":
    w = np.pi * 2.0 / (upper - lower)

    def scalars(x):
        a, b = w[0] * (x[0] - lower[0]), w[1] * (x[1] - lower[1])
        return jnp.stack([jnp.ones_like(a), jnp.sin(a), jnp.cos(a), jnp.sin(b), jnp.cos(b), jnp.sin(a + b),
                          jnp.cos(a + b), jnp.sin(a - b), jnp.cos(a - b)])

    m = 18

    def func(x):
        g = scalars(x)
        z = jnp.zeros_like(g)
        return jnp.stack([jnp.concatenate([g, z]), jnp.concatenate([z, g])])

else:  # poly
    deg = int(params["degree"])
    powers = [(i, j) for i in range(deg + 1) for j in range(deg + 1 - i)]
    m = 2 * len(powers)

    def func(x):
        g = jnp.stack([x[0] ** i * x[1] ** j for i, j in powers])
        z = jnp.zeros_like(g)
        return jnp.stack([jnp.concatenate([g, z]), jnp.concatenate([z, g])])


basis = make_basis(func, dim=d, rank=1, n_features=m)
X = jnp.asarray(arrays["X"])  # (T, N, d)
pts = jnp.asarray(arrays["pts"])
walls = []
for rep in range(2):
    t0 = time.perf_counter()
    data = TrajectoryCollection.from_arrays(X=X, dt=float(params["dt"]))
    inf = OverdampedLangevinInference(data)
    inf.compute_diffusion_constant()
    inf.infer_force_linear(basis, preset=params["preset"])
    force = np.asarray(inf.force_inferred(pts))
    walls.append(time.perf_counter() - t0)
peerio.save(
    {"wall_s": walls[1], "compile_s": max(walls[0] - walls[1], 0.0), "version": peerio.version("StochasticForceInference"),
     "preset": inf.metadata.get("force_preset"), "n_features": m,
     "diffusion": float(np.trace(np.asarray(inf.diffusion_average)) / d)},
    force=force,
)
