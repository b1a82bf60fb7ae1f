"""Per-track noise scale (fpirl.estimators.track_noise): the Student-t sequential predictive is the
marginal likelihood of the Gaussian-Gamma model (oracle: numerical integration over the precision),
``evaluate`` scores it, the CV keeps it on heterogeneous tracks and drops it on homogeneous ones, and the
simulator draws per-track scales with the Gamma law (oracle: scipy's inverse-gamma distribution)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from _simtracks import velocity_table
from fpirl.estimators import IncrementsEstimator
from fpirl.estimators.track_noise import TrackNoise, check_track_noise
from fpirl.core._errors import FpirlInputError
from fpirl.evaluation.heldout import TransitionModel, fpirl_loglik
from fpirl.forward.track_paths import sample_velocity_tracks
from fpirl.tracks.steps import observed_transitions

C, BETA, DT = 1.5, 2.0, 0.1


def _marginal(r, s2, nu, c):
    """log of int prod_k N(r_k; 0, c s2_k / tau I) Gamma(tau; nu/2, rate nu/2) dtau, by quadrature."""
    m = r.shape[1]
    q = np.sum(r * r, axis=1) / (c * s2)
    logconst = -0.5 * m * np.sum(np.log(2 * np.pi * c * s2))
    k = r.shape[0]

    def f(t):  # integrand without the constant
        return np.exp(0.5 * m * k * np.log(t) - 0.5 * t * q.sum() + scipy.stats.gamma.logpdf(t, nu / 2, scale=2 / nu))

    val, _ = scipy.integrate.quad(f, 0, np.inf, limit=200, epsabs=0, epsrel=1e-11)
    return logconst + np.log(val)


def test_predictive_product_is_the_gaussian_gamma_marginal(rng):
    nu, c, m = 3.5, 0.7, 2
    lengths = (6, 1, 9)
    track = np.repeat(np.arange(3), lengths)
    s2 = rng.uniform(0.5, 2.0, track.size)  # the model's variance differs per step (mobility)
    r = rng.normal(size=(track.size, m)) * np.sqrt(s2)[:, None] * rng.gamma(2, 1, 3)[track][:, None]
    noise = TrackNoise(nu, c, 1.0)
    lp = noise.log_predictive(np.sum(r * r, 1) / s2, m, track) - 0.5 * m * np.log(s2)
    for t in range(3):
        sel = track == t
        assert lp[sel].sum() == pytest.approx(_marginal(r[sel], s2[sel], nu, c), rel=1e-8, abs=1e-8)
    # the forgetting factor: lambda = 0 keeps only the previous step (a one-step-back t), checked by hand
    lp0 = TrackNoise(nu, c, 0.0).log_predictive(np.sum(r * r, 1) / s2, m, track)
    u = np.sum(r * r, 1) / s2 / c
    # second step of track 0: n = nu + m, S = u_0
    t = scipy.stats.multivariate_t(loc=np.zeros(m), shape=(nu + u[0]) / (nu + m) * np.eye(m), df=nu + m)
    assert lp0[1] == pytest.approx(t.logpdf(r[1] / np.sqrt(s2[1] * c)) - 0.5 * m * np.log(c), rel=1e-10)
    # nu -> infinity, c = 1: the Gaussian
    g = TrackNoise(1e8, 1.0, 1.0).log_predictive(np.sum(r * r, 1) / s2, m, track)
    np.testing.assert_allclose(g, scipy.stats.norm.logpdf(r / np.sqrt(s2)[:, None]).sum(1), atol=1e-4)


def _het_tracks(rng, scales, steps=60):
    """Velocity OU tracks (psi = C |a|^2), track i with noise variance times scales[i] (plain numpy)."""
    n = scales.size
    a = np.zeros((steps + 1, n, 2))
    a[0] = rng.normal(0, np.sqrt(1 / (2 * C * BETA)), (n, 2)) * np.sqrt(scales)[:, None]
    for k in range(steps):
        a[k + 1] = a[k] * (1 - 2 * C * DT) + np.sqrt(2 * DT / BETA * scales)[:, None] * rng.normal(size=(n, 2))
    pos = np.concatenate([np.zeros((1, n, 2)), np.cumsum(a[1:] * DT, axis=0)])
    return velocity_table(pos, DT, ("x", "y"), pos.min((0, 1)) - 1, pos.max((0, 1)) + 1)


def _fit(table, spec):
    return IncrementsEstimator(hermite_elements=(0, 0, 2, 2), drift_axes="actions", mobility=0, second_lag=False,
                               track_noise=spec).fit(table)


def test_cv_keeps_the_track_noise_on_heterogeneous_tracks_and_drops_it_on_homogeneous_ones(rng):
    nu = 3.5
    het = _het_tracks(rng, 1.0 / rng.gamma(nu / 2, 2 / nu, 50))
    est = _fit(het, "auto")
    assert est.track_noise_ is not None
    assert est.settings_["track_noise_cv_gain"] > 2 * est.settings_["track_noise_cv_se"]
    assert 3.0 <= est.track_noise_.nu < 10.0
    # evaluate scores it: the result attrs carry it, and it beats the same model without it on new tracks
    test = _het_tracks(rng, 1.0 / rng.gamma(nu / 2, 2 / nu, 30))
    tr = observed_transitions(test)
    assert TransitionModel.from_any(est).track_noise == est.track_noise_
    attrs = est.result_extra()
    assert TrackNoise.from_attrs(attrs) == est.track_noise_
    plain = _fit(het, "off")
    assert plain.track_noise_ is None and plain.settings_["track_noise"] == 0
    assert fpirl_loglik(est, tr).mean() > fpirl_loglik(plain, tr).mean() + 0.05
    # homogeneous tracks: the CV drops it
    hom = _het_tracks(rng, np.ones(50))
    assert _fit(hom, "auto").track_noise_ is None
    assert _fit(hom, "on").track_noise_ is not None  # forced on: fitted anyway


def test_a_scale_at_its_bound_is_a_warning(rng):
    """beta fixed 100 times too large: the increments are 10 times wider than 2 dt / beta implies, the per-track
    scale runs into its upper bound (its estimate ~ 100 > 20), and the fit says so; at the true beta it does not."""
    import warnings

    tracks = _het_tracks(rng, 1.0 / rng.gamma(3.0, 1 / 3.0, 40))
    kw = dict(hermite_elements=(0, 0, 2, 2), drift_axes="actions", mobility=0, second_lag=False, track_noise="on")
    with pytest.warns(UserWarning, match="per-track noise scale reached a bound"):
        est = IncrementsEstimator(beta=100 * BETA, **kw).fit(tracks)
    assert est.track_noise_.scale == pytest.approx(20.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert 0.05 < IncrementsEstimator(beta=BETA, **kw).fit(tracks).track_noise_.scale < 20.0


def test_simulated_track_scales_follow_the_gamma_law(rng):
    nu, c, n, steps = 8.0, 0.5, 300, 800
    big = 1e6

    def grad(x):
        return np.concatenate([np.zeros_like(x[:, :2]), 2 * C * x[:, 2:]], axis=1)

    x0 = np.concatenate([np.zeros((n, 2)), rng.normal(0, 0.3, (n, 2))], axis=1)
    pos = sample_velocity_tracks(grad, BETA, DT, x0, steps, [-big] * 2 + [-50] * 2, [big] * 2 + [50] * 2,
                                 "reflecting", rng, track_noise=TrackNoise(nu, c, 1.0))
    a = np.concatenate([x0[None, :, 2:], np.diff(pos, axis=0) / DT])
    r = a[1:] - a[:-1] * (1 - 2 * C * DT)  # residuals of the known one-step mean
    per_track = np.mean(np.sum(r * r, axis=2), axis=0) / 2 / (2 * DT / BETA)  # ~ c / tau_i
    # c / tau with tau ~ Gamma(nu/2, rate nu/2) is inverse-gamma(nu/2, scale c nu/2)
    ks = scipy.stats.kstest(per_track, scipy.stats.invgamma(nu / 2, scale=c * nu / 2).cdf)
    assert ks.pvalue > 1e-3
    # and not the constant-scale law (the check can fail)
    assert scipy.stats.kstest(per_track, scipy.stats.invgamma(nu / 2, scale=nu / 2).cdf).pvalue < 1e-6
    assert np.std(per_track) > 0.2


def test_track_noise_spellings():
    assert check_track_noise("auto") == "auto" and check_track_noise("on") is True
    assert check_track_noise(False) is False and check_track_noise("off") is False
    with pytest.raises(FpirlInputError):
        check_track_noise("maybe")
    with pytest.raises(FpirlInputError):
        TrackNoise.from_attrs({"track_noise_nu": -1.0, "track_noise_scale": 1.0, "track_noise_forgetting": 1.0})


def test_cli_track_noise_is_typed_back_and_scored_by_evaluate(rng, tmp_path, capsys):
    import json

    import pandas as pd

    from fpirl.cli import main
    from fpirl.io import read_result
    from fpirl import read_tracks

    table = _het_tracks(rng, 1.0 / rng.gamma(1.5, 2 / 3.0, 30), steps=40)
    S = list(table.state_axes)
    csv = tmp_path / "t.csv"
    pd.DataFrame({"id": table.track, "t": table.time, "x": table.values[:, S[0]], "y": table.values[:, S[1]]}).to_csv(
        csv, index=False)
    cols = ["--track", "id", "--time", "t", "--state", "x,y", "--action", "velocity"]
    fixed = ["--hermite-elements", "0,0,2,2", "--ridge", "0.01", "--mobility", "0", "--second-lag", "off",
             "--uncertainty", "none"]
    out = tmp_path / "r.nc"
    assert main(["fit", str(csv), "-o", str(out), *cols, *fixed, "--track-noise", "on"]) == 0
    printed = capsys.readouterr().out
    assert "per-track noise scale: nu=" in printed and "--track-noise on" in printed
    ds = read_result(out)
    noise = TrackNoise.from_attrs(ds.attrs)
    assert noise is not None and int(ds.attrs["solver_track_noise"]) == 1
    assert main(["evaluate", str(out), str(csv), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["loglik"]["fpirl"]
    back = read_tracks(csv, track="id", time="t", state=["x", "y"], action="velocity")
    est = IncrementsEstimator(hermite_elements=(0, 0, 2, 2), ridge=0.01, mobility=0, second_lag=False,
                              track_noise=True).fit(back)
    assert est.track_noise_ == pytest.approx(noise)
    assert got == pytest.approx(float(np.mean(fpirl_loglik(est, observed_transitions(back)))), rel=1e-9)
    assert main(["fit", str(csv), "-o", str(tmp_path / "bad.nc"), *cols, "--track-noise", "maybe"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fpirl: error: argument --track-noise") and err.count("\n") == 1
    assert not (tmp_path / "bad.nc").exists()


def test_fit_gradient_matches_finite_differences(rng):
    from fpirl.estimators.track_noise import _loglik_and_gradient

    track = np.repeat(np.arange(6), [5, 1, 9, 3, 12, 8])
    u = rng.gamma(1, 2, track.size) * rng.gamma(2, 1, 6)[track]
    for p in ([np.log(4.0), np.log(0.7), 0.6], [np.log(10.0), 0.2, 1.0], [np.log(3.0), -0.3, 0.3]):
        p = np.array(p)
        val, grad = _loglik_and_gradient(u, 2, track, p)
        assert val == pytest.approx(np.mean(TrackNoise(np.exp(p[0]), np.exp(p[1]), p[2]).log_predictive(u, 2, track)))
        h = 1e-6
        num = [(_loglik_and_gradient(u, 2, track, p + h * e)[0] - _loglik_and_gradient(u, 2, track, p - h * e)[0])
               / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-8)


def test_mobility_degree_is_chosen_under_the_track_noise():
    """Tracks whose noise scale differs per track, constant in velocity: faster tracks are noisier, so the
    Gaussian CV takes the spread for speed-dependent noise (degree 2); scored under the per-track scale
    the CV keeps the constant mobility, the true model."""
    rng = np.random.default_rng(0)
    het = _het_tracks(rng, 1.0 / rng.gamma(1.75, 2 / 3.5, 60), steps=80)
    kw = dict(hermite_elements=(0, 0, 2, 2), drift_axes="actions", second_lag=False)
    assert IncrementsEstimator(track_noise=False, **kw).fit(het).mobility_ is not None
    est = IncrementsEstimator(**kw).fit(het)
    assert est.mobility_ is None and est.track_noise_ is not None


@pytest.mark.parametrize("lam", [0.0, 0.37, 1.0])
def test_discounted_sums_equal_the_loop_within_each_track_stacked_or_not(rng, lam):
    from fpirl.estimators.track_noise import discounted_sums, track_layout

    track = np.repeat([3, 5, 6, 9], [4, 1, 6, 3])
    x = rng.normal(size=(2, track.size))
    want = np.zeros_like(x)
    for k in range(track.size):  # the definition: sum over earlier rows of the same track
        for j in range(k):
            if track[j] == track[k]:
                want[:, k] += lam ** (k - 1 - j) * x[:, j]
    got, dgot = discounted_sums(x, track, lam, derivative=True)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(discounted_sums(x[1], track, lam, layout=track_layout(track)), want[1], rtol=1e-12,
                               atol=1e-12)
    if 0.0 < lam < 1.0:  # the derivative in lambda by central differences
        h = 1e-6
        num = (discounted_sums(x, track, lam + h) - discounted_sums(x, track, lam - h)) / (2 * h)
        np.testing.assert_allclose(dgot, num, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("lam", [0.0, 0.37, 1.0])
def test_discounted_counts_by_place_in_the_track_equal_the_loop(lam):
    """``N(a) = m sum_{i<a} lam^i`` tabulated per place and gathered: the discounted sum of the constant ``m``
    over earlier rows of the same track, and its derivative in lambda (the sum of ``(k-1-j) lam^(k-2-j)``)."""
    from fpirl.estimators.track_noise import _discounted_counts, track_layout

    track = np.repeat([3, 5, 6, 9], [4, 1, 7, 3])
    age = track_layout(track)[1]
    N, dN = _discounted_counts(2, lam, age)
    want, dwant = np.zeros(track.size), np.zeros(track.size)
    for k in range(track.size):
        for j in range(k):
            if track[j] == track[k]:
                e = k - 1 - j
                want[k] += 2 * lam**e
                dwant[k] += 2 * e * lam ** (e - 1) if e > 0 else 0.0
    np.testing.assert_allclose(N[age], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dN[age], dwant, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lam", [0.0, 0.37, 0.999, 1.0])
@pytest.mark.parametrize("n", [1, 31, 32, 2500, 2048])
def test_first_order_sums_equal_the_recurrence(rng, lam, n):
    """The blocked sums (three levels of blocks at 2,500 rows) against the recurrence ``G_k = lam G_{k-1} + x_{k-1}``
    run row by row, for two stacked series."""
    from fpirl.estimators.track_noise import FILTER_BLOCK, first_order_sums

    assert FILTER_BLOCK**2 < 2048 < 2500
    x = rng.normal(size=(2, n))
    want = np.zeros_like(x)
    for k in range(1, n):
        want[:, k] = lam * want[:, k - 1] + x[:, k - 1]
    got = first_order_sums(x, lam)
    assert got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(want).max()))
    np.testing.assert_allclose(first_order_sums(x[0], lam), want[0], rtol=1e-12, atol=1e-12 * max(1.0, np.abs(want).max()))
