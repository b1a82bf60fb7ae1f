r"""Density estimator: density snapshots from tracks by cloud-in-cell, then the VSI of the paper.

Every snapshot ``k`` (frames ``0, s, 2s, ...`` for the stride ``s``) takes the observations of
the frames ``k s - w .. k s + w`` (pooling window ``w``, 0 by default) and deposits them onto
the FE grid with the multilinear hat functions (:func:`fpirl.tracks.binning.cloud_in_cell`, the
linear-FE projection the weak form wants):

.. math::
    p_k(x_j) = \frac{1}{n_k v_j} \sum_{p \in \text{snapshot } k} w_j(x_p),

with ``v_j`` the node weight (trapezoid rule) and ``n_k`` the number of observations, so every
snapshot has unit mass. Optional smoothing convolves each snapshot with a Gaussian of standard
deviation ``h_i`` per axis, mirrored at reflecting walls and wrapped on periodic axes (so mass
is conserved and nothing leaks through a wall), with Scott's rule
``h_i = sigma_i n_k^{-1/(d+4)}`` (``sigma_i`` the spread of the points on axis ``i``; on periodic
axes the circular spread) or a given bandwidth. The snapshots then go to
:class:`fpirl.estimators.identify.PotentialEstimator` (eq. ``vsi_regression``).

Defaults, with the reasons measured in docs/benchmarks.md: FE elements per axis
``N = clip(round(2.1 n^{1/(d+2)}), 4, 64)`` for ``n`` observations per snapshot (a finer grid
makes the binned densities and their gradients noisier, a coarser one biases them; the exponent
is the bias-variance balance of a binned gradient, the factor the measured optimum in 2-D);
Hermite elements ``max(2, min(8, round(N / 4)))`` (halves rounded up, :func:`hermite_rule`); snapshot stride
:data:`DEFAULT_STRIDE`.
The density path ignores which observation follows which; tracks entering or leaving the field of
view change the density without any drift (the snapshots are normalised to unit mass, which
removes only the change of the total).
"""

from __future__ import annotations

import numpy as np
import scipy.ndimage
from tqdm.auto import tqdm

from ..core._errors import FpirlInputError
from .._version import __version__ as _version
from ..tracks.binning import cloud_in_cell
from ..core.density import DensitySnapshots
from .identify import PotentialEstimator
from ..tracks.table import TrackTable
from ._base import TrackEstimatorMixin, check_beta, check_elements, check_tracks

#: Default snapshot stride (frames between snapshots): every frame. On the 2-D benchmark of
#: docs/benchmarks.md the error was flat for strides 1..20 (1 best by a hair) and worse at 40.
DEFAULT_STRIDE = 1
#: FE elements per axis ``N = FE_RULE_FACTOR n^{1/(d+2)}`` for ``n`` observations per snapshot
#: (measured on the 2-D benchmark: best N = 10, 14, 20 for n = 500, 2000, 10^4).
FE_RULE_FACTOR = 2.1
#: Minimum number of observations per snapshot; frames with fewer are pooled or left out.
MIN_POINTS = 10


def hermite_rule(fe_elements: int) -> int:
    """Hermite elements for ``N`` FE elements: ``max(2, min(8, floor(N / 4 + 1/2)))``, halves rounded up.

    (Python's ``round`` sends halves to the even neighbour: 2 for ``N = 10``. Over five potentials and two
    sampling regimes of docs/benchmarks.md, 3 elements on 10 FE elements had a smaller psi error than 2 for
    every potential, 0.13-0.37 against 0.14-0.38, mean 0.205 against 0.258.)
    """
    return max(2, min(8, int(np.floor(fe_elements / 4 + 0.5))))


def frame_index(tracks: TrackTable) -> np.ndarray:
    """Frame number ``round((t - t_min) / dt)`` of every observation."""
    return np.rint((tracks.time - tracks.time.min()) / tracks.dt).astype(np.int64)


def scott_bandwidth(points: np.ndarray, lower, upper, periodic: bool) -> np.ndarray:
    """Scott's rule ``sigma_i n^{-1/(d+4)}`` per axis (circular spread on periodic axes)."""
    n, d = points.shape
    if periodic:
        length = np.asarray(upper) - np.asarray(lower)
        ang = 2 * np.pi * (points - lower) / length
        r = np.hypot(np.mean(np.cos(ang), axis=0), np.mean(np.sin(ang), axis=0))
        sigma = length / (2 * np.pi) * np.sqrt(-2.0 * np.log(np.clip(r, 1e-12, 1.0)))
        sigma = np.minimum(sigma, length / np.sqrt(12.0))
    else:
        sigma = points.std(axis=0)
    return sigma * n ** (-1.0 / (d + 4))


def smooth_density(values: np.ndarray, grid, bandwidth) -> np.ndarray:
    """Gaussian smoothing of nodal values (std ``bandwidth`` per axis, in the axis units).

    Periodic axes wrap; reflecting axes mirror about the wall node (``mode='mirror'``), which keeps
    the trapezoid mass of a symmetric kernel up to the discretisation.
    """
    sig = np.asarray(bandwidth, dtype=float) / grid.spacing
    mode = "wrap" if grid.periodic else "mirror"
    out = scipy.ndimage.gaussian_filter(values, sigma=sig, mode=mode, truncate=4.0)
    return np.maximum(out, 0.0)


class TrackDensityEstimator(TrackEstimatorMixin):
    """Fit psi (and beta) to the density snapshots of tracks (cloud-in-cell + VSI).

    Parameters
    ----------
    hermite_elements : 'auto', int or tuple of int
        Hermite elements of psi; ``'auto'``: :func:`hermite_rule` per axis for ``N`` FE elements.
    fe_elements : 'auto', int or tuple of int
        FE grid of the snapshots; ``'auto'``: ``clip(round(2.1 n^{1/(d+2)}), 4, 64)`` with ``n`` the
        median number of observations per snapshot.
    beta : float, optional
        Fixed inverse temperature; None estimates it as ``beta_from`` says.
    beta_from : {'increments', 'vsi'}
        With ``beta=None``: from the mean squared increment, ``2 dt / beta = <|dx|^2> / d``
        (default; the drift adds only ``O(dt)`` relative), or jointly in the VSI as the paper does
        (``1/beta`` is then attenuated by the noise of the snapshots' gradients: on the 2-D
        benchmark of docs/benchmarks.md it came out ~10x too large).
    ridge : float or 'gcv', optional
        Passed to :class:`~fpirl.estimators.identify.PotentialEstimator`.
    stride : int
        Frames between consecutive snapshots.
    pool : int or 'auto'
        Half-width ``w`` of the window of frames pooled into one snapshot; ``'auto'``: the
        smallest ``w`` (at most a quarter of the frames) giving the median snapshot at least
        :data:`MIN_POINTS` observations (windows of neighbouring snapshots may overlap: a moving
        average). Only the longest run of consecutive snapshots with at least
        :data:`MIN_POINTS` observations is used (snapshot times must be uniform).
    smoothing : None, 'scott' or float or sequence of float
        Kernel smoothing of the snapshots (bandwidth in the axis units).
    time_scheme : {'midpoint', 'explicit'}
    progress : bool

    Attributes
    ----------
    coef_, beta_, hermite_, grid_, penalty_, residual_, settings_
        As :class:`fpirl.estimators.identify.PotentialEstimator` (``grid_`` is the snapshot grid).
    dt_ : float
        The table's sampling interval (one MDP step); the snapshot spacing is ``stride * dt_``.
    estimator_ : PotentialEstimator
        The inner VSI fit.
    pool_, bandwidth_, n_snapshots_
        Pooling half-width used, mean smoothing bandwidth (or None), number of snapshots.
    """

    name = "density"

    def __init__(self, *, hermite_elements="auto", fe_elements="auto", beta=None, beta_from="increments", ridge=None,
                 stride=DEFAULT_STRIDE, pool="auto", smoothing=None, time_scheme="midpoint", progress=False):
        self.hermite_elements = hermite_elements
        self.fe_elements = fe_elements
        self.beta = beta
        self.beta_from = beta_from
        self.ridge = ridge
        self.stride = stride
        self.pool = pool
        self.smoothing = smoothing
        self.time_scheme = time_scheme
        self.progress = progress

    # ------------------------------------------------------------------------------------
    def snapshots(self, tracks: TrackTable) -> DensitySnapshots:
        """The density snapshots of ``tracks`` on the FE grid (sets ``grid_``, ``pool_``, ``bandwidth_``)."""
        snaps, learned = self._snapshots(tracks)
        for name, value in learned.items():
            setattr(self, name, value)
        return snaps

    def _snapshots(self, tracks: TrackTable) -> tuple[DensitySnapshots, dict]:
        """The snapshots and the learned attributes they fix (``grid_``, ``pool_``, ``bandwidth_``,
        ``n_snapshots_``), without setting them."""
        tracks = check_tracks(tracks)
        if tracks.n_obs == 0:
            raise FpirlInputError("the track table is empty")
        stride = self.stride
        if isinstance(stride, bool) or int(stride) != stride or stride < 1:
            raise FpirlInputError(f"stride must be a positive integer, got {stride!r}")
        stride = int(stride)
        frame = frame_index(tracks)
        counts = np.bincount(frame)
        n_frames = counts.size
        snap_frames = np.arange(0, n_frames, stride)
        if snap_frames.size < 2:
            raise FpirlInputError(f"the tracks span {n_frames} frames: need at least two snapshots with stride {stride}")
        csum = np.concatenate([[0], np.cumsum(counts)])

        def pooled(w):
            lo = np.clip(snap_frames - w, 0, n_frames)
            hi = np.clip(snap_frames + w + 1, 0, n_frames)
            return csum[hi] - csum[lo]

        if self.pool == "auto":
            w = 0
            while np.median(pooled(w)) < MIN_POINTS and w < n_frames // 4:
                w += 1
        else:
            if isinstance(self.pool, bool) or int(self.pool) != self.pool or self.pool < 0:
                raise FpirlInputError(f"pool must be 'auto' or a non-negative integer, got {self.pool!r}")
            w = int(self.pool)
        n_snap = pooled(w)
        ok = n_snap >= MIN_POINTS
        if np.count_nonzero(ok) < 2:
            raise FpirlInputError(f"fewer than two snapshots have {MIN_POINTS} observations; pool more frames")
        # the longest run of consecutive usable snapshots (times must stay uniform)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
        runs = edges.reshape(-1, 2)
        first, last = runs[np.argmax(runs[:, 1] - runs[:, 0])]
        if last - first < 2:
            raise FpirlInputError(f"no two consecutive snapshots have {MIN_POINTS} observations; pool more frames")
        snap_frames = snap_frames[first:last]
        d = tracks.ndim
        if isinstance(self.fe_elements, str):
            if self.fe_elements != "auto":
                raise FpirlInputError(f"fe_elements must be 'auto' or integers, got {self.fe_elements!r}")
            n_med = float(np.median(n_snap[first:last]))
            fe = (int(np.clip(np.rint(FE_RULE_FACTOR * n_med ** (1.0 / (d + 2))), 4, 64)),) * d
        else:
            fe = check_elements(self.fe_elements, d, "fe_elements", 2)
        grid = tracks.grid(fe)
        order = np.argsort(frame, kind="stable")
        fsorted = frame[order]
        weights = grid.node_weights()
        # the observations of every snapshot's pooled frames (a frame may feed several snapshots), all deposited in
        # one pass, one field per snapshot
        starts, stops = np.searchsorted(fsorted, snap_frames - w), np.searchsorted(fsorted, snap_frames + w + 1)
        lengths = stops - starts
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        labels = np.repeat(np.arange(snap_frames.size), lengths)
        rows = order[np.arange(labels.size) - offsets[labels] + starts[labels]]
        mass = cloud_in_cell(grid, tracks.values[rows], labels=labels, n_labels=snap_frames.size)
        values = mass / (lengths.reshape((-1,) + (1,) * d) * weights)
        bandwidths = []
        it = range(snap_frames.size) if self.smoothing is not None else ()
        if self.progress and self.smoothing is not None:
            it = tqdm(it, desc="smoothing snapshots", unit="snapshot")
        for k in it:  # optional smoothing: a bandwidth per snapshot
            pts = tracks.values[rows[offsets[k]:offsets[k] + lengths[k]]]
            if isinstance(self.smoothing, str):
                if self.smoothing != "scott":
                    raise FpirlInputError(f"smoothing must be None, 'scott' or a bandwidth, got {self.smoothing!r}")
                h = scott_bandwidth(pts, tracks.lower, tracks.upper, tracks.periodic)
            else:
                h = np.broadcast_to(np.asarray(self.smoothing, dtype=float), (d,))
                if not np.all(np.isfinite(h)) or np.any(h < 0):
                    raise FpirlInputError(f"smoothing bandwidth must be non-negative, got {self.smoothing!r}")
            bandwidths.append(h)
            values[k] = smooth_density(values[k], grid, h)
        learned = {"grid_": grid, "pool_": w, "bandwidth_": np.mean(bandwidths, axis=0) if bandwidths else None,
                   "n_snapshots_": int(snap_frames.size)}
        times = tracks.time.min() + snap_frames * tracks.dt
        return DensitySnapshots(grid, times, values), learned

    def fit(self, tracks: TrackTable) -> "TrackDensityEstimator":
        """Build the snapshots and fit psi (and beta) by the VSI."""
        beta = check_beta(self.beta)
        if self.beta_from not in ("increments", "vsi"):
            raise FpirlInputError(f"beta_from must be 'increments' or 'vsi', got {self.beta_from!r}")
        snaps, learned = self._snapshots(tracks)
        beta_source = "given" if beta is not None else self.beta_from
        if beta is None and self.beta_from == "increments":
            _, dx = tracks.increments()
            msd = float(np.mean(dx * dx)) if dx.size else 0.0
            if not msd > 0:
                raise FpirlInputError("no increments to estimate beta from; give beta or beta_from='vsi'")
            beta = 2.0 * tracks.dt / msd
        grid = snaps.grid
        if isinstance(self.hermite_elements, str):
            if self.hermite_elements != "auto":
                raise FpirlInputError(f"hermite_elements must be 'auto' or integers, got {self.hermite_elements!r}")
            herm = tuple(hermite_rule(n) for n in grid.elements)
            herm_sel = "rule"
        else:
            herm_sel = "fixed"
            herm = check_elements(self.hermite_elements, grid.ndim, minimum=2 if grid.periodic else 1, auto=True)
        # the noise correction only with beta estimated: the histograms' noise is correlated in time (the same tracks
        # from frame to frame), which the correction's noise estimate does not model; with it, psi was worse on 3 of the
        # 5 short-track sets of bench_track_density_rule.py (e.g. 7.0% -> 8.2%), unchanged on the long ones
        inner = PotentialEstimator(hermite_elements=herm, beta=beta, estimate_beta=beta is None, ridge=self.ridge,
                                   time_scheme=self.time_scheme, progress=self.progress,
                                   correct_noise=beta is None).fit(snaps)
        for name, value in learned.items():  # every check passed: the learned attributes, all at once
            setattr(self, name, value)
        self.estimator_ = inner
        self.coef_ = inner.coef_
        self.beta_ = inner.beta_
        self.hermite_ = inner.hermite_
        self.penalty_ = inner.penalty_
        self.residual_ = inner.residual_
        self.dt_ = float(tracks.dt)
        settings = dict(inner.settings_)
        settings.update(
            estimator=self.name,
            hermite_selection=herm_sel,
            fe_selection="rule" if isinstance(self.fe_elements, str) else "fixed",
            snapshot_stride=int(self.stride),
            snapshot_pool=int(self.pool_),
            n_snapshots=self.n_snapshots_,
            smoothing="none" if self.smoothing is None else str(self.smoothing),
            dt=float(tracks.dt),
            snapshot_dt=float(snaps.dt),
            beta_source=beta_source,
            beta_estimated=int(beta_source != "given"),
            fpirl_version=_version,
        )
        if self.bandwidth_ is not None:
            settings["bandwidth"] = ",".join(f"{v:.4g}" for v in self.bandwidth_)
        self.settings_ = settings
        return self
