"""The scikit-learn contract, once for every estimator: keyword-only parameters stored as given,
get_params/set_params, an unfitted copy by ``type(est)(**est.get_params())``, ``fit`` returns self,
a refit (and a copy's fit) gives identical learned attributes, a failed fit leaves none behind,
and use before fit raises NotFittedError (a ValueError and an AttributeError)."""

from __future__ import annotations

import dataclasses
import inspect
import warnings

import numpy as np
import pytest
from _simtracks import make_tracks, velocity_table

from fpirl import (DensitySnapshots, FpirlInputError, Grid, HelmholtzCheck, IncrementsEstimator, NotFittedError,
                   PotentialEstimator, TrackDensityEstimator)
from fpirl.problems.realdata._model import VelocityPotentialEstimator


def _grad(x):
    return np.pi * np.sin(np.pi * x) + 0.5 * x  # psi = -cos(pi x) + x^2 / 4


@pytest.fixture(scope="module")
def tracks():
    return make_tracks(_grad, 2.0, 30, 60, 1e-2, -1.0, 1.0, "reflecting", 5)


@pytest.fixture(scope="module")
def velocity_tracks():
    from fpirl.forward.markov import sample_sde

    rng = np.random.default_rng(6)
    paths = sample_sde(_grad, 2.0, rng.uniform(-1, 1, (20, 1)), 1e-2, 40, rng, [-1.0], [1.0], "reflecting")
    return velocity_table(paths, 1e-2, ["x"], [-1.0], [1.0])


@pytest.fixture(scope="module")
def snapshots():
    grid = Grid([-np.pi], [np.pi], [16], ["x"], ["state"], "periodic")
    t = 0.05 * np.arange(6)
    x = grid.coords[0]
    values = (1 + 0.4 * np.exp(-t)[:, None] * np.cos(x)[None, :] + 0.2 * np.exp(-4 * t)[:, None]
              * np.sin(2 * x)[None, :]) / (2 * np.pi)
    return DensitySnapshots(grid, t, values)


def _equilibrium(snaps):
    return DensitySnapshots(snaps.grid, snaps.times, np.broadcast_to(snaps.values[0], snaps.values.shape).copy())


def _tiny(tracks):
    return tracks.select_tracks([0])


#: (id, estimator, data fixture, failing estimator, data transform for the failing fit)
CASES = [
    ("potential", lambda: PotentialEstimator(hermite_elements=3, beta=2.0), "snapshots",
     lambda: PotentialEstimator(hermite_elements=3, estimate_beta=True), _equilibrium),
    ("increments-cv", lambda: IncrementsEstimator(cv_elements=(2, 3, 4), cv_folds=3), "tracks",
     lambda: IncrementsEstimator(cv_elements=(2, 3, 4), cv_folds=3, fe_elements=1), None),
    ("increments-noise", lambda: IncrementsEstimator(hermite_elements=3, noise_correction=True), "tracks",
     lambda: IncrementsEstimator(hermite_elements=3, noise_correction=True, fe_elements=1), None),
    ("density", lambda: TrackDensityEstimator(hermite_elements=3, fe_elements=16), "tracks",
     lambda: TrackDensityEstimator(hermite_elements=0, fe_elements=16), None),
    ("helmholtz", lambda: HelmholtzCheck(n_boot=20), "tracks", lambda: HelmholtzCheck(n_boot=20, degree=40), _tiny),
    ("velocity-psi", lambda: VelocityPotentialEstimator(hermite_elements=2), "velocity_tracks",
     lambda: VelocityPotentialEstimator(hermite_elements=0), None),
]
IDS = [c[0] for c in CASES]


def learned(est) -> dict:
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def same(a, b) -> bool:
    """Deep equality (arrays elementwise with NaN = NaN, dataclasses and objects by their fields)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (np.isnan(a) and np.isnan(b))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if hasattr(a, "__dict__") and not callable(a):
        return type(a) is type(b) and same(vars(a), vars(b))
    return a == b


def test_same_sees_differences():
    assert same({"a": np.array([1.0, np.nan]), "b": (1, 2.0)}, {"a": np.array([1.0, np.nan]), "b": (1, 2.0)})
    assert not same({"a": np.array([1.0, 2.0])}, {"a": np.array([1.0, 2.0 + 1e-15])})
    assert not same({"a": np.array([1.0])}, {"a": np.array([1.0]), "b": None})
    assert not same(Grid([0.0], [1.0], [4]), Grid([0.0], [1.0], [5]))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_parameters_are_keyword_only_and_round_trip(case):
    _, make, *_ = case
    est = make()
    sig = inspect.signature(type(est).__init__)
    assert all(p.kind is p.KEYWORD_ONLY for name, p in sig.parameters.items() if name != "self")
    with pytest.raises(TypeError):
        type(est)(3)
    params = est.get_params()
    assert sorted(params) == sorted(n for n in sig.parameters if n != "self")
    assert all(params[k] is getattr(est, k) for k in params)  # stored as given
    copy = type(est)(**params)
    assert copy is not est and same(copy.get_params(), params) and not learned(copy)
    assert est.set_params(**params) is est and same(est.get_params(), params)
    name = sorted(params)[0]
    est.set_params(**{name: "changed"})
    assert est.get_params()[name] == "changed" and getattr(est, name) == "changed"
    with pytest.raises(ValueError, match="not a parameter"):
        est.set_params(no_such_parameter=1)
    assert repr(est).startswith(type(est).__name__ + "(") and f"{name}='changed'" in repr(est)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fit_refit_copy_and_failed_fit(case, request):
    _, make, data_name, make_failing, transform = case
    data = request.getfixturevalue(data_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. few transitions for the adequacy check
        est = make()
        assert est.fit(data) is est
        first = learned(est)
        assert first
        assert est.fit(data) is est
        assert same(learned(est), first), "a refit changed the learned attributes"
        copy = type(est)(**est.get_params())
        assert same(learned(copy.fit(data)), first), "a copy made by get_params fits differently"

        bad = make_failing()
        with pytest.raises(FpirlInputError):
            bad.fit(data if transform is None else transform(data))
    assert learned(bad) == {}, f"a failed fit left {sorted(learned(bad))}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_use_before_fit_raises_not_fitted(case):
    est = case[1]()
    probe = est.to_attrs if isinstance(est, HelmholtzCheck) else est.potential_on_grid
    with pytest.raises(NotFittedError, match="not fitted") as info:
        probe()
    assert isinstance(info.value, ValueError) and isinstance(info.value, AttributeError)
    assert not hasattr(est, "potential_on_grid") or not hasattr(est, "coef_")
