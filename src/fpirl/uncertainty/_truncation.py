r"""Which time modes the snapshot-noise draws keep: the terms below the Monte Carlo error dropped (issue 20).

The draws of :mod:`fpirl.uncertainty._batched` form, per draw, ``u + b`` with

.. math::
    u = \sum_m D(q_m)^T \rho_m,\qquad b = \sum_m D(\bar e_m)^T \hat r_m,

``q_m = \sum_k V_{km} \bar p_k`` the POD modes of the averaged data (eigenvalue ``\lambda_m = ||q_m||^2``),
``\rho_m = A(V_m^T T_d e) + B(V_m^T T_b e)`` the residual of the noise mixed by the same time vector
(``A`` the mass, ``B = \Xi(\cdot)\theta + \gamma C``, ``T_b``, ``T_d`` the time pairs), and likewise
``\hat r_m``, ``\bar e_m = W_m^T T_b e`` for the fitted residual. Every mode costs the same (one residual
field per draw on the ``u`` side, one band GEMM column per node on either side), but on measured
data most modes are noise: the data keep a handful of smooth modes above a floor of noise modes
(``\lambda_m / \lambda_0`` about ``1e-5`` at 2% noise, 4-D), and with small noise ``b`` is of the
order of the noise level times ``u``.

Each term's expected energy is estimated as ``\lambda_m E||\rho_m||^2`` (``u``) and
``\hat\lambda_m E||\bar e_m||^2`` (``b``): the energy of a product of two fields as the product of
their energies (a common factor of both sides, which cancels). With independent unit noise
``e_i = s_i z_i`` (the normalisation's rank-one terms left out: a ranking, not an expectation used
in the posterior)

.. math::
    E||\rho_m||^2 = \sum_i a_{mi}^2 \langle s_i^2, \alpha\rangle + 2 a_{mi} b_{mi} \langle s_i^2, \beta\rangle
    + b_{mi}^2 \langle s_i^2, \gamma\rangle,\qquad
    E||\bar e_m||^2 = \sum_i c_{mi}^2 \langle s_i^2, 1\rangle,

``a_m = T_d^T V_m``, ``b_m = T_b^T V_m``, ``c_m = T_b^T W_m`` and the column energies of the band
operators ``\alpha[n] = \sum_j A[j, n]^2``, ``\beta[n] = \sum_j A[j, n] B[j, n]``,
``\gamma[n] = \sum_j B[j, n]^2``. The smallest terms are dropped while their sum stays below
``(MODE_FRACTION / \sqrt{2 S})^2`` of the total, ``S`` the number of draws: ``1 / \sqrt{2 S}`` is the
relative Monte Carlo error of the posterior std, so the dropped part moves the draws' vectors by
about ``MODE_FRACTION`` (0.3) of it (its energy share's square root), and their variance, the dropped
time modes being nearly independent of the kept ones, by the share itself. Measured on 4-D
Fokker-Planck snapshots with 2% noise (docs/benchmarks.md, issue 20, fifth pass): 5 of 49 data modes
and 1 of 49 residual modes kept, ``potential_std`` moved by a median 3e-5 and at most 4% (one node
with a small std) against the 8.8% Monte Carlo error of every node.
"""

from __future__ import annotations

import numpy as np

from ._reduced_noise import noise_shape

#: The dropped modes' share of the energy of ``u + b`` is at most ``(MODE_FRACTION / sqrt(2 S))^2``.
MODE_FRACTION = 0.3


def energy_tolerance(n_draws: int) -> float:
    """The largest share of the expected energy of the draws' vectors the dropped modes may carry."""
    return float((MODE_FRACTION / np.sqrt(2.0 * max(int(n_draws), 1))) ** 2)


def _fold(P: np.ndarray, periodic: bool) -> np.ndarray:
    """The adjoint of one halo node per side: ``(*grid + 2)`` -> ``(*grid)`` (periodic: the halo added to
    the opposite edge; walls: dropped)."""
    x = P
    for ax in range(P.ndim):
        x = np.moveaxis(x, ax, 0)
        if periodic:
            x = x.copy()
            x[1] += x[-1]
            x[-2] += x[0]
        x = np.moveaxis(x[1:-1], 0, ax)
    return x


def column_energies(expected) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(alpha, beta, gamma)``: per data node ``n`` the column sums ``sum_j A[j, n]^2``, ``sum_j A[j, n] B[j, n]``,
    ``sum_j B[j, n]^2`` of the band operators of ``expected`` (:class:`fpirl.uncertainty._expected.ExpectedResidual`)."""
    shape = expected.shape
    acc = np.zeros((3,) + tuple(n + 2 for n in shape))
    for idx, A, _, B in expected._bands():  # A_l[j] = A[j, j + l - 1]: data node j + l - 1 is padded j + l
        win = (slice(None),) + tuple(slice(i, i + n) for i, n in zip(idx, shape))
        acc[win] += np.stack([A * A, A * B, B * B])
    return tuple(_fold(a, expected.periodic) for a in acc)


def mode_energies(expected, model: str, Vq: np.ndarray, lam_q: np.ndarray, Wr: np.ndarray, lam_r: np.ndarray,
                  Tb: np.ndarray, Td: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The estimated energies (module doc) of the ``u`` terms (time vectors ``Vq`` ``(K, M)``, eigenvalues
    ``lam_q``) and the ``b`` terms (``Wr``, ``lam_r``), for the noise shape ``model``; ``Tb``, ``Td``
    ``(K, K + 1)`` the time pairs."""
    s = noise_shape(model, expected.pfull)
    s2 = (s * s).reshape(s.shape[0], -1)
    ea, eab, eb = (s2 @ c.ravel() for c in column_energies(expected))
    a, b = Vq.T @ Td, Vq.T @ Tb  # (M, K + 1)
    rho = (a * a) @ ea + 2 * (a * b) @ eab + (b * b) @ eb
    c = Wr.T @ Tb
    ebar = (c * c) @ s2.sum(axis=1)
    return lam_q * rho, lam_r * ebar


def kept_modes(wu: np.ndarray, wb: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks of the ``u`` and ``b`` terms kept: the smallest dropped while their sum is at most
    ``tol`` of the total (every term kept when ``tol <= 0``); at least one term of each side is kept."""
    w = np.concatenate([np.clip(wu, 0.0, None), np.clip(wb, 0.0, None)])
    keep = np.ones(w.size, bool)
    if tol > 0 and w.sum() > 0:
        order = np.argsort(w, kind="stable")
        dropped = np.cumsum(w[order]) <= tol * w.sum()
        keep[order[dropped]] = False
    ku, kb = keep[: wu.size], keep[wu.size:]
    for k, w_side in ((ku, wu), (kb, wb)):
        if w_side.size and not k.any():
            k[int(np.argmax(w_side))] = True
    return ku, kb
