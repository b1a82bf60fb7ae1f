"""A straightforward reference assembly, as a generic FEM code would do it.

Used only to validate :mod:`fpirl.weakform.assembly` and to measure its speed-up: it builds the full
d-dimensional tensor quadrature, evaluates p, grad w_j and grad phi_i there, and forms the
residual matrix ``Xi_k`` densely, **one basis column at a time**, for every time step.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .assembly import NormalEquations, hat_matrix, time_pairs
from ..core.hermite import HermiteSpace
from ..core.quadrature import composite_rule, merged_breakpoints


def _kron_all(mats):
    out = sp.csr_matrix(np.ones((1, 1)))
    for M in mats:
        out = sp.kron(out, sp.csr_matrix(M), format="csr")
    return out


def reference_normal_equations(snapshots, hermite: HermiteSpace, *, time_scheme="midpoint", quadrature_points=3):
    """Dense column-by-column assembly of the same :class:`~fpirl.weakform.assembly.NormalEquations`."""
    grid = snapshots.grid
    d = grid.ndim
    rules = []
    for fe, ha in zip(grid.axes, hermite.axes):
        breaks = merged_breakpoints(fe.lower + fe.spacing * np.arange(fe.elements + 1), ha.breakpoints)
        rules.append(composite_rule(breaks, quadrature_points))
    weights = np.ones(1)
    for _, w in rules:
        weights = np.kron(weights, w)
    W0 = [hat_matrix(fe, x, 0) for fe, (x, _) in zip(grid.axes, rules)]
    W1 = [hat_matrix(fe, x, 1) for fe, (x, _) in zip(grid.axes, rules)]
    H0 = [ha.matrix(x, 0) for ha, (x, _) in zip(hermite.axes, rules)]
    H1 = [ha.matrix(x, 1) for ha, (x, _) in zip(hermite.axes, rules)]
    interp = _kron_all(W0)  # nodal values -> values at quadrature points
    grad_w = [_kron_all([W1[b] if b == a else W0[b] for b in range(d)]) for a in range(d)]
    grad_phi = [_kron_all([H1[b] if b == a else H0[b] for b in range(d)]).tocsc() for a in range(d)]
    pbar, pdot = time_pairs(snapshots.values, snapshots.dt, time_scheme)
    n_coef = hermite.n_coef
    xtx = np.zeros((n_coef, n_coef))
    xtg = np.zeros(n_coef)
    xtc = np.zeros(n_coef)
    gg = gc = cc = 0.0
    for pb, pd in zip(pbar.reshape(len(pbar), -1), pdot.reshape(len(pdot), -1)):
        p_q = interp @ pb
        g = interp.T @ (weights * (interp @ pd))
        c = sum(gw.T @ (weights * (gw @ pb)) for gw in grad_w)
        Xi = np.empty((grid.size, n_coef))
        for i in range(n_coef):  # one basis column at a time
            Xi[:, i] = sum(grad_w[a].T @ (weights * p_q * grad_phi[a][:, i].toarray().ravel()) for a in range(d))
        xtx += Xi.T @ Xi
        xtg += Xi.T @ g
        xtc += Xi.T @ c
        gg += g @ g
        gc += g @ c
        cc += c @ c
    return NormalEquations(xtx, xtg, xtc, gg, gc, cc, int(pbar.size))
