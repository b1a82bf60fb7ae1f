r"""The time-mixed snapshot noise drawn directly, with its exact distribution (issue 20).

The batched draws of :mod:`fpirl.uncertainty._batched` need the noise ``e`` (all ``K + 1``
snapshots at every node) only through ``L`` fixed time mixes ``y = X e`` (``X`` the
``L x (K + 1)`` matrix of the POD modes of the data and residual, ``L << K + 1`` for smooth data).
Drawing all ``(K + 1) n`` normal numbers and mixing them wastes most of them. With the noise model
of :func:`fpirl.uncertainty._batched._noise`,

.. math::
    e_k[j] = s_k[j] z_k[j] - [\text{normalize}]\, p_k[j]\, c_k,\qquad c_k = \sum_j w_j s_k[j] z_k[j],
    \qquad z \sim N(0, I),

(``s`` the noise shape of :func:`noise_shape`, ``w`` the node weights), ``y[:, j] = a_j - X (p_j \odot c)``
with ``a_j = B_j z_j``, ``B_j = X \operatorname{diag}(s_j)``. Per node, ``B_j B_j^T = U_j \Lambda_j U_j^T``
(``L x L``, eigenvalues below ``EIG_RTOL`` of the largest dropped), and

* ``a_j = U_j \Lambda_j^{1/2} \xi_j``, ``\xi_j \sim N(0, I_L)`` independent over the nodes: the exact law of ``B_j z_j``;
* given all ``\xi``, ``z_j = Q_j \xi_j + (I - Q_j Q_j^T) \zeta_j`` with ``Q_j = B_j^T U_j \Lambda_j^{-1/2}``
  (orthonormal columns, ``Q_j^T z_j = \xi_j``) and ``\zeta_j`` independent standard normals, so

  .. math::
      c = \sum_j w_j \operatorname{diag}(s_j^2) X^T \beta_j + C_c^{1/2} \eta,\qquad
      \beta_j = U_j \Lambda_j^{-1/2} \xi_j,\qquad
      C_c = \sum_j w_j^2 \big(\operatorname{diag}(s_j^2) - H_j H_j^T\big),\ H_j = \operatorname{diag}(s_j^2) X^T U_j \Lambda_j^{-1/2},

  ``\eta \sim N(0, I_{K+1})``.

The mixes are drawn as ``X = R Q`` with orthonormal rows ``Q`` (QR): ``y = R (Q e)``, and ``Q e`` by the above
with ``Q`` for ``X``: the per-node covariances of ``Q`` are as well conditioned as the noise's time profile at
the node (those of ``X`` inherit its near-dependent rows: condition numbers up to ``5e11`` at 4-D), so their
Cholesky factors serve as the roots (``U_j Lambda_j^{1/2}`` of the eigendecomposition where one is not
well conditioned; any root gives the same law).

So one draw of ``y`` costs ``L n + K + 1`` normal numbers instead of ``(K + 1) n``, and its law is
exactly that of ``X e`` (test: the covariance implied by the sampler, a linear map of its normal
numbers, equals the dense ``X T (X T)^T`` of the noise map ``e = T z`` to rounding). The per-node
maps ``root_j``, ``pinv_j`` act on all draws of a batch as one stacked GEMM (in single precision
when sampling: rounding about ``1e-7``, tested against the double path), and the ``(K + 1) x n``
fields ``p`` and ``w s^2`` that the normalisation meets enter through their POD modes (a few rows
for smooth data; eigenvalues below ``EIG_RTOL`` of the largest dropped).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.linalg.blas

from ..core._threads import halves, one_blas_thread
from ..mdp.support import relative_support

#: Relative eigenvalue cut of the per-node ``L x L`` covariances (directions of no variance) and of
#: every POD of the posterior (:func:`pod_basis`: the time compression, the fields of the expectations).
EIG_RTOL = 1e-13
#: Nodes per chunk when the global covariance ``C_c`` is accumulated.
_CHUNK_NODES = 4096


def noise_shape(model: str, pfull: np.ndarray) -> np.ndarray:
    """The nodal noise shape ``s_k`` of the snapshot-noise model (:mod:`fpirl.uncertainty._snapshot_noise`), shape
    ``pfull.shape`` (``(K + 1, *grid)``, the fitted snapshots).

    ``'multiplicative'``: ``s_k = p_k``. ``'additive'``: ``s_k = 1`` on the data's support, the nodes where the
    time mean of the snapshots is at least :data:`fpirl.mdp.support.SUPPORT_RELATIVE` of its largest (the
    ``data_support`` of the result), and 0 elsewhere: where the snapshots show no mass they show no noise either
    (noise of that size would put the node in the support), and noise modelled there would move psi only
    through the ridge's extrapolation (a second-order bias thousands of times psi's range on a walled box).
    The additive shape is a read-only broadcast view (one field in memory).
    """
    pfull = np.asarray(pfull, dtype=float)
    if model == "multiplicative":
        return pfull
    return np.broadcast_to(support_shape(pfull), pfull.shape)


def support_shape(pfull: np.ndarray) -> np.ndarray:
    """The additive shape on one snapshot, ``(*grid)``: 1.0 on the data's support (:func:`noise_shape`), else 0.0."""
    return relative_support(np.mean(pfull, axis=0)).astype(float)


def pod_spectrum(X: np.ndarray, rtol: float = EIG_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """``(lam (M,), V (K, M))``: the eigenvalues and eigenvectors of ``X X^T`` (``X`` flattened to ``K``
    rows) whose eigenvalues are above ``rtol`` of the largest, i.e. the time vectors of the POD modes
    of the rows of ``X`` and their energies (ascending)."""
    flat = X.reshape(X.shape[0], -1)
    lam, V = np.linalg.eigh(flat @ flat.T)
    keep = lam > rtol * max(lam[-1], 1e-300)
    return lam[keep], V[:, keep]


def pod_basis(X: np.ndarray, rtol: float = EIG_RTOL) -> np.ndarray:
    """``V (K, M)`` of :func:`pod_spectrum`."""
    return pod_spectrum(X, rtol)[1]


def pod_modes(X: np.ndarray, rtol: float = EIG_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """``(V, Y)`` with ``X = V Y`` along the first axis up to the dropped modes (:func:`pod_basis`),
    ``Y = V^T X`` the POD modes (shape ``(M, *X.shape[1:])``)."""
    V = pod_basis(X, rtol)
    return V, (V.T @ X.reshape(X.shape[0], -1)).reshape((-1,) + X.shape[1:])


#: Per-node covariances go through their Cholesky factors (``root = C``, ``pinv = C^{-T}``: a batch of ``L x L``
#: factors and inverses costs about 0.2 s where the eigendecompositions cost 0.46 s at ``15^4`` nodes, ``L = 11``)
#: when every one is this well conditioned (squared ratio of the factor's smallest to largest diagonal entry);
#: else (or None) through the eigendecomposition.
CHOLESKY_RTOL = 1e-8


def _stacked(f, x: np.ndarray) -> tuple:
    """``f`` (a stacked numpy.linalg function) on the stack ``x``, its two halves on two threads
    (:func:`fpirl.core._threads.halves`): the same values as one call, each output re-stacked."""
    parts = [r if isinstance(r, tuple) else (r,) for r in halves(lambda sl: f(x[sl]), x.shape[0])]
    return tuple(np.concatenate(p) for p in zip(*parts))


def _roots(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(root, pinv)`` for a stack of covariances ``gram`` ``(m, L, L)``: ``root root^T = gram`` and
    ``pinv root^T`` the projector on its range (any such square root gives the law of the module doc).
    The stack's halves on two threads (:func:`_stacked`)."""
    if gram.shape[0] > 1 and CHOLESKY_RTOL is not None:
        try:
            (C,) = _stacked(np.linalg.cholesky, gram)
        except np.linalg.LinAlgError:
            C = None
        if C is not None:
            dg = np.diagonal(C, axis1=1, axis2=2)
            if np.all(dg.min(axis=1) ** 2 > CHOLESKY_RTOL * dg.max(axis=1) ** 2):
                (inv,) = _stacked(np.linalg.inv, C)
                return C, np.ascontiguousarray(np.swapaxes(inv, 1, 2))
    lam, U = _stacked(np.linalg.eigh, gram)  # (m, L), (m, L, L)
    keep = lam > EIG_RTOL * np.maximum(lam[:, -1:], 1e-300)
    lam = np.where(keep, lam, 0.0)
    inv = np.where(keep, 1.0 / np.sqrt(np.where(keep, lam, 1.0)), 0.0)
    return np.ascontiguousarray(U * np.sqrt(lam)[:, None, :]), np.ascontiguousarray(U * inv[:, None, :])


class ReducedNoise:
    """Draws of ``y = X e`` (shape ``(S, L, n)``) with the exact law of the mixed snapshot noise (module doc).

    Parameters
    ----------
    mix : ndarray (L, K + 1)
        The time mixes ``X``.
    pfull : ndarray (K + 1, *grid)
        The fitted snapshots (the noise shape and the normalisation).
    model : {'multiplicative', 'additive'}
    normalize : bool
        The fit scales each snapshot to unit mass (first-order effect on the noise).
    weights : ndarray (*grid)
        Node weights of the grid quadrature (:meth:`fpirl.core.grid.Grid.node_weights`).
    """

    def __init__(self, mix, pfull, model, normalize, weights):
        with one_blas_thread():  # thin products (per-node L x L, K + 1 rows): BLAS threads only cost here
            self._build(mix, pfull, model, normalize, weights)

    def _build(self, mix, pfull, model, normalize, weights):
        self.mix = np.asarray(mix, dtype=float)
        L, k1 = self.mix.shape
        self.L, self.K1 = L, k1
        # X = lift Q with orthonormal rows Q: Q e is drawn and lifted (the per-node covariances of Q are as
        # well conditioned as the noise's time profile, where those of X inherit X's near-dependent rows)
        Qt, Rt = np.linalg.qr(self.mix.T)
        self.X, self.lift = np.ascontiguousarray(Qt.T), np.ascontiguousarray(Rt.T)
        X = self.X
        self.grid_shape = pfull.shape[1:]
        P = pfull.reshape(k1, -1)
        self.n = P.shape[1]
        self.P = P
        self.normalize = bool(normalize)
        s2 = noise_shape(model, pfull).reshape(k1, -1) ** 2
        # per node B_j B_j^T = X diag(s_j^2) X^T: one GEMM (L^2 x (K+1)) @ ((K+1) x n); additive noise: X X^T on the
        # support's nodes, zero off it, and one covariance for all of them where the support is every node
        uniform = model != "multiplicative" and bool(np.all(s2[0] == 1.0))
        outer = (X[:, None, :] * X[None, :, :]).reshape(L * L, k1)
        gram = (outer @ s2).T.reshape(-1, L, L) if model == "multiplicative" else outer.sum(axis=1).reshape(1, L, L)
        # a_j = root_j xi_j, beta_j = pinv_j xi_j: (n or 1, L, L), one stacked GEMM per draw batch
        self.root, self.pinv = _roots(0.5 * (gram + np.swapaxes(gram, 1, 2)))
        if model != "multiplicative" and not uniform:
            on = s2[0][:, None, None]
            self.root, self.pinv = self.root * on, self.pinv * on
        if not self.normalize:
            return
        w = np.asarray(weights, dtype=float).ravel()
        self.S2w = s2 * w[None, :]  # (K+1, n): w_j s_k[j]^2
        cc = np.diag(s2 @ (w * w))  # diag(sum_j w_j^2 s_j^2)
        if uniform:  # sum_j w_j^2 X^T pinv pinv^T X
            H = X.T @ self.pinv[0]
            cc -= float(w @ w) * (H @ H.T)
        else:
            # H_j w_j = w_j diag(s_j^2) X^T pinv_j: (K+1, chunk, L), X^T pinv_j of a chunk of nodes as one GEMM;
            # sum_j (H_j w_j)(H_j w_j)^T by the symmetric rank-k update (half the products of Hf @ Hf.T)
            pinv_t = np.ascontiguousarray(self.pinv.transpose(1, 0, 2))  # (L, n, L)

            def partial(nodes):  # the sum over a range of nodes, chunk by chunk
                hh = np.zeros((k1, k1), order="F")
                for lo in range(nodes.start, nodes.stop, _CHUNK_NODES):
                    hi = min(nodes.stop, lo + _CHUNK_NODES)
                    H = (X.T @ pinv_t[:, lo:hi].reshape(L, -1)).reshape(k1, hi - lo, L)
                    H *= self.S2w[:, lo:hi, None]
                    hh = scipy.linalg.blas.dsyrk(1.0, H.reshape(k1, -1).T, beta=1.0, c=hh, trans=1, overwrite_c=1)
                return hh

            hh = sum(halves(partial, self.n))  # the nodes' two halves on two threads
            cc -= np.triu(hh) + np.triu(hh, 1).T
        cc = 0.5 * (cc + cc.T)
        lc, Uc = np.linalg.eigh(cc)
        self.croot = Uc * np.sqrt(np.clip(lc, 0.0, None))[None, :]
        # the (K+1, n) fields the draws meet, through their POD modes: a few rows for smooth data
        self.P_modes, self.S2w_modes = pod_modes(self.P), pod_modes(self.S2w)

    def from_normals(self, xi: np.ndarray, eta: np.ndarray | None = None) -> np.ndarray:
        """``y`` from given standard normals ``xi`` ``(S, n, L)`` and ``eta`` ``(S, K + 1)`` (the sampler is
        linear in them: the tests read its covariance off unit vectors)."""
        xt = np.ascontiguousarray(xi.transpose(1, 2, 0))
        return self._from_normals(lambda sl: xt[sl], xt.shape[-1], xt.dtype != np.float64, eta)

    def _from_normals(self, normals, S: int, single: bool, eta: np.ndarray | None) -> np.ndarray:
        """:meth:`from_normals` with the normals of the nodes ``sl`` given as ``normals(sl)`` in the layout
        ``(len(sl), L, S)`` (per node one small GEMM): the per-node maps act on the two halves of the nodes on
        two threads (one BLAS thread each), each half's normals made there."""
        root, pinv, P_modes, S2w_modes = self._single() if single else (
            self.root, self.pinv, getattr(self, "P_modes", None), getattr(self, "S2w_modes", None))
        y = np.empty((S, self.L, self.n), np.float32 if single else float)  # (S, L, n)

        def half(sl):
            xs = normals(sl)
            y[:, :, sl] = np.matmul(root[sl] if root.shape[0] > 1 else root, xs).transpose(2, 1, 0)
            if not self.normalize:
                return None
            beta = np.matmul(pinv[sl] if pinv.shape[0] > 1 else pinv, xs)  # (len(sl), L, S)
            return S2w_modes[1][:, sl] @ beta.reshape(-1, self.L * S)  # this half's part of the node sum

        with one_blas_thread():
            parts = halves(half, self.n)
        if self.normalize:
            t = S2w_modes[0] @ (parts[0] + parts[1])  # (K+1, L S)
            c = np.einsum("ik,kis->sk", self.X, t.reshape(self.K1, self.L, S)) + eta @ self.croot.T
            # X (p_j * c), p through its POD modes (in the precision of the normals: no double temporaries)
            y -= np.matmul(((self.X[None] * c[:, None, :]) @ self.P_modes[0]).astype(y.dtype), P_modes[1])
        return np.matmul(self.lift.astype(y.dtype), y)  # X e = lift (Q e)

    def _single(self):
        """The per-node maps and the modes of ``p``, ``w s^2`` in single precision (built once)."""
        if getattr(self, "_roots32", None) is None:
            f = np.float32
            modes = [None, None]
            if self.normalize:
                modes = [(self.P_modes[0], self.P_modes[1].astype(f)), tuple(x.astype(f) for x in self.S2w_modes)]
            self._roots32 = (self.root.astype(f), self.pinv.astype(f), *modes)
        return self._roots32

    def sample(self, rng, n_draws: int) -> np.ndarray:
        """``n_draws`` draws of ``y``, shape ``(n_draws, L, *grid)`` (the per-node normals and their
        per-node map in single precision: rounding about ``1e-7``, the Monte Carlo error ``1 / sqrt(S)``)."""
        # the two halves of the nodes draw from two generators seeded here (made on two threads)
        halves_rng = [np.random.default_rng(int(s)) for s in rng.integers(2**63, size=2)]
        eta = rng.standard_normal((n_draws, self.K1)) if self.normalize else None

        def normals(sl):
            return halves_rng[int(sl.start > 0)].standard_normal((sl.stop - sl.start, self.L, n_draws), dtype=np.float32)

        return self._from_normals(normals, n_draws, True, eta).reshape((n_draws, self.L) + self.grid_shape)


def _noise(block, carry, model, normalize, grid, rng, overlap: int = 1, support=1.0):
    """Unit-scale noise of the snapshots of ``block`` (its first ``overlap`` ones are ``carry`` when given), and the
    normals of its last ``overlap`` snapshots (the next block's ``carry``); ``support``: the additive shape
    (:func:`support_shape` of all the snapshots)."""
    z = rng.standard_normal((block.shape[0] - (0 if carry is None else carry.shape[0]),) + block.shape[1:])
    if carry is not None:
        z = np.concatenate([carry, z])
    e = z * block if model == "multiplicative" else z * support
    if normalize:  # the fit scales each snapshot to unit mass: first-order effect on the noise
        e -= block * grid.integrate(e).reshape((-1,) + (1,) * grid.ndim)
    return e, z[-overlap:]


class PrefetchedNoise:
    """``count`` noise draws (:meth:`fpirl.uncertainty._batched.BatchedDraws.noise_into`) drawn into one buffer as they are iterated."""

    def __init__(self, bd, count, model, normalize, rng):
        self.bd, self.count, self.args = bd, count, (model, normalize, rng)

    def __len__(self):
        return self.count

    def __iter__(self):
        # the next draw is drawn on a second thread while this one is used (two buffers, one generator
        # used by that thread only: the same numbers in the same order)
        bufs = [self.bd._buffer(f"noise{i}", (1,) + self.bd.pfull.shape)[0] for i in range(2)]
        with ThreadPoolExecutor(1) as pool:
            nxt = pool.submit(self.bd.noise_into, bufs[0], *self.args)
            for i in range(self.count):
                e = nxt.result()
                if i + 1 < self.count:
                    nxt = pool.submit(self.bd.noise_into, bufs[(i + 1) % 2], *self.args)
                yield e
