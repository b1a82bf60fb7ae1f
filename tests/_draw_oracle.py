"""The per-draw snapshot-noise computation: the tests' oracle of :mod:`fpirl.uncertainty._batched` and
:mod:`fpirl.uncertainty._expected` (the original code of :func:`fpirl.uncertainty._snapshot_noise.snapshot_posterior`,
one noise draw at a time, band pass by band pass)."""

import numpy as np

from fpirl.uncertainty._reduced_noise import _noise


def _draw(res, model, normalize, rng, need_bands=True):
    """One unit-scale noise draw, band pass by band pass over all pairs: ``(u, b, q, rr, energy, ug, bg, qg)``
    with ``u = D(p)^T r(e)``, ``b = D(e)^T r_hat``, the second-order band ``q``, ``rr = ||r(e)||^2`` and the
    per-node energy ``sum_k r(e)_k^2`` (the gamma rows apart; only ``rr, energy`` without the bands). The
    original per-draw computation, kept as the tests' oracle of :mod:`fpirl.uncertainty._batched` and
    :mod:`fpirl.uncertainty._expected`."""
    op = res.op
    Wa = np.zeros(op._band_shape()) if need_bands else None
    Wb = np.zeros_like(Wa) if need_bands else None
    Wq = np.zeros_like(Wa) if need_bands else None
    ug = bg = qg = rr = 0.0
    energy = np.zeros(op.shape)
    carry = None
    blocks = [b for b, *_ in res.fitted()]  # overlapping by op.overlap snapshots
    mean = np.mean(np.concatenate([b if i == 0 else b[op.overlap:] for i, b in enumerate(blocks)]), axis=0)
    support = (mean >= 1e-3 * mean.max()).astype(float)  # the additive shape: 1 where the data show mass
    for block, pbar, c, rhat in res.fitted():
        e, carry = _noise(block, carry, model, normalize, op.grid, rng, op.overlap, support)
        ebar, ce, re = res.apply(e)
        rr += float(np.vdot(re, re))
        energy += np.sum(re * re, axis=0)
        if need_bands:
            res.accumulate(Wa, re, pbar)
            res.accumulate(Wb, rhat, ebar)
            res.accumulate(Wq, re, ebar)
            ug += float(np.vdot(c, re))
            bg += float(np.vdot(ce, rhat))
            qg += float(np.vdot(ce, re))
    if not need_bands:
        return None, None, rr, energy
    return (op._adjoint(Wa).ravel(), op._adjoint(Wb).ravel(), op._adjoint(Wq).ravel(), rr, energy,
            ug, bg, qg)
