"""Track-level checks: MSD/VACF/speed/turning angles against analytic values, and
``fpirl simulate --tracks`` -> ``fpirl compare TRACKS SIM.csv`` on the README's worked example."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fpirl.evaluation.track_stats import _ks, compare_tracks, track_statistics
from fpirl.forward.markov import sample_sde
from fpirl.tracks.table import TrackTable


def _table(pos, dt):
    """(frames, n, d) positions -> a TrackTable of the positions alone (one segment per track)."""
    frames, n, d = pos.shape
    values = pos.transpose(1, 0, 2).reshape(-1, d)
    track = np.repeat(np.arange(n), frames)
    lo, hi = values.min(0) - 1, values.max(0) + 1
    return TrackTable(values, track, track, np.tile(dt * np.arange(frames), n), dt, tuple("xyz"[:d]),
                      ("state",) * d, lo, hi)


def test_msd_vacf_and_turning_angles_of_known_processes(rng):
    dt, D, alpha, n, frames = 0.5, 0.3, 0.7, 200, 60
    # Brownian motion in 2-D: MSD(tau) = 4 D tau; steps independent -> VACF(tau >= 1) = 0
    bm = np.cumsum(rng.normal(0, np.sqrt(2 * D * dt), (frames, n, 2)), axis=0)
    st = track_statistics(_table(bm, dt), max_lag=10, n_boot=100)
    lags, msd, lo, hi = st.curves["msd"]
    np.testing.assert_allclose(msd, 4 * D * lags, rtol=0.08)
    assert np.mean((lo <= 4 * D * lags) & (4 * D * lags <= hi)) >= 0.8
    assert np.all(np.abs(st.curves["vacf"][1]) < 0.05)
    # isotropic steps: turning angles uniform on (-pi, pi]
    _, dens, _, _ = st.curves["turning_angle"]
    np.testing.assert_allclose(dens, 1 / (2 * np.pi), rtol=0.25)
    # AR(1) velocities v_{k+1} = alpha v_k + noise: normalised VACF(tau) = alpha^tau
    v = np.zeros((frames, n, 2))
    v[0] = rng.normal(0, 1 / np.sqrt(1 - alpha**2), (n, 2))
    for k in range(1, frames):
        v[k] = alpha * v[k - 1] + rng.normal(0, 1, (n, 2))
    pos = np.concatenate([np.zeros((1, n, 2)), np.cumsum(v * dt, axis=0)])
    st = track_statistics(_table(pos, dt), max_lag=6, n_boot=50)
    np.testing.assert_allclose(st.curves["vacf"][1], alpha ** np.arange(1, 7), atol=0.04)
    # speed of 2-D standard normal velocity scaled: Rayleigh; the KS helper against scipy
    a, b = rng.normal(size=300), rng.normal(0.2, 1, 200)
    assert _ks(a, b) == pytest.approx(stats.ks_2samp(a, b).statistic)


def _readme_tracks(n, steps, seed):
    """The README's worked example (psi, beta = 4, dt = 0.002, periodic [-1, 1]^2), fewer agents."""
    def grad_psi(x):
        s, a = x[:, 0], x[:, 1]
        mixed = -0.2 * np.pi * np.sin(np.pi * (s + a))
        return np.stack([0.45 * np.pi * np.cos(np.pi * s) + mixed, -0.35 * np.pi * np.sin(np.pi * a) + mixed], 1)

    rng = np.random.default_rng(seed)
    paths = sample_sde(grad_psi, 4.0, rng.uniform(-1, 1, (n, 2)), 0.002, steps, rng, [-1, -1], [1, 1], "periodic")
    frames, agents, _ = paths.shape
    return pd.DataFrame({"agent": np.tile(np.arange(agents), frames), "t": np.repeat(0.002 * np.arange(frames), agents),
                         "s": paths[..., 0].ravel(), "a": paths[..., 1].ravel()})


@pytest.fixture(scope="module")
def readme_fit(tmp_path_factory):
    from fpirl.cli import main

    d = tmp_path_factory.mktemp("readme_tracks")
    _readme_tracks(150, 100, 0).to_csv(d / "tracks.csv", index=False)
    rc = main(["fit", str(d / "tracks.csv"), "-o", str(d / "r.nc"), "--track", "agent", "--time", "t", "--state", "s",
               "--action", "a", "--boundary", "periodic", "--bounds", "-1:1,-1:1", "--hermite-elements", "2",
               "--ridge", "0.01", "--uncertainty", "none", "--no-progress"])
    assert rc == 0
    return d


def test_readme_simulated_tracks_within_the_data_bands(readme_fit, cli):
    d = readme_fit
    proc = cli("simulate", d / "r.nc", "--tracks", 300, "--steps", 100, "--from", d / "tracks.csv", "-o", d / "sim.csv")
    assert proc.returncode == 0, proc.stderr
    sim = pd.read_csv(d / "sim.csv")
    assert list(sim.columns) == ["agent", "t", "s", "a"] and sim["agent"].nunique() == 300
    assert sim["s"].between(-1, 1).all()
    proc = cli("compare", d / "tracks.csv", d / "sim.csv", "--result", d / "r.nc", "-o", d / "cmp.png", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["tracks"] == {"observed": 150, "simulated": 300}
    for name in ("msd", "vacf"):
        assert out[name]["inside_band"] >= 0.8 and out[name]["discrepancy"] < 1.0, out
    assert (d / "cmp.png").stat().st_size > 0
    # the check can fail: tracks with 4x the noise (beta / 4) leave the MSD band
    from fpirl.io import read_result
    from fpirl.tracks.reading import read_tracks
    from fpirl.workflows import simulate_track_table

    ds = read_result(d / "r.nc")
    ds.attrs["beta"] = ds.attrs["beta"] / 4
    kw = dict(track="agent", time="t", state="s", boundary="periodic", bounds=[(-1, 1)])
    obs = read_tracks(d / "tracks.csv", **kw)
    start = read_tracks(d / "tracks.csv", track="agent", time="t", state="s", action="a", boundary="periodic",
                        bounds=[(-1, 1), (-1, 1)])
    hot = read_tracks(simulate_track_table(ds, 300, 100, rng=1, start=start), **kw)
    summary, _, _ = compare_tracks(obs, hot)
    assert summary["msd"]["inside_band"] < 0.2 and summary["msd"]["discrepancy"] > 3


def test_compare_a_strided_fit_reads_the_data_thinned_and_the_simulation_as_written(readme_fit, cli, tmp_path):
    """A fit with --stride 2 simulates at the thinned step 2 dt: `compare --result` thins the data by the stride and
    reads the simulated table as written (it was thinned twice, and refused: dt 0.008 against 0.004); without
    --result the step mismatch is an error that points to --result."""
    d = readme_fit
    fit = cli("fit", d / "tracks.csv", "-o", tmp_path / "r2.nc", "--track", "agent", "--time", "t", "--state", "s",
              "--action", "a", "--boundary", "periodic", "--bounds", "-1:1,-1:1", "--hermite-elements", "2",
              "--ridge", "0.01", "--uncertainty", "none", "--stride", "2")
    assert fit.returncode == 0, fit.stderr
    sim = cli("simulate", tmp_path / "r2.nc", "--tracks", 100, "--steps", 40, "--from", d / "tracks.csv", "-o",
              tmp_path / "s2.csv")
    assert sim.returncode == 0, sim.stderr
    assert np.diff(pd.read_csv(tmp_path / "s2.csv").query("agent == 0")["t"].to_numpy()) == pytest.approx(0.004)
    proc = cli("compare", d / "tracks.csv", tmp_path / "s2.csv", "--result", tmp_path / "r2.nc", "-o",
               tmp_path / "c2.png", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tracks"] == {"observed": 150, "simulated": 100}
    cli.assert_input_error(cli("compare", d / "tracks.csv", tmp_path / "s2.csv", "--track", "agent", "--time", "t",
                               "--state", "s", "-o", tmp_path / "c3.png"), "pass --result")
    cli.assert_input_error(cli("compare", tmp_path / "r2.nc", tmp_path / "s2.csv", "-o", tmp_path / "c4.png"),
                           "tracks are compared with tracks")


def test_simulate_tracks_errors(readme_fit, cli, tmp_path):
    d = readme_fit
    cli.assert_input_error(cli("simulate", d / "r.nc", "--tracks", 3, "--steps", 5, "-o", tmp_path / "s.nc"), ".csv")
    cli.assert_input_error(cli("simulate", d / "r.nc", "--steps", 5, "--from", d / "tracks.csv", "-o",
                               tmp_path / "s.nc"), "--from needs --tracks")
    cli.assert_input_error(cli("simulate", d / "r.nc", "--tracks", 3, "--steps", 5, "--model", "fp", "-o",
                               tmp_path / "s.csv"), "--tracks")
    cli.assert_input_error(cli("compare", d / "tracks.csv", d / "r.nc", "-o", tmp_path / "c.png"), "two track tables")
    # the column flags of fit name the --from table's columns: without --from they are refused
    cli.assert_input_error(cli("simulate", d / "r.nc", "--tracks", 3, "--steps", 5, "--track", "agent", "-o",
                               tmp_path / "s.csv"), "--track: columns of a --from table")
    cli.assert_input_error(cli("simulate", d / "r.nc", "--steps", 5, "--time", "t", "-o", tmp_path / "s.nc"),
                           "--time: columns of a --from table")
    cli.assert_only(tmp_path)


def test_simulate_from_a_table_with_other_columns(readme_fit, cli, tmp_path):
    """Starts from a table whose track and time columns are named otherwise (given as in fit), rows shuffled."""
    d = readme_fit
    obs = pd.read_csv(d / "tracks.csv")
    other = obs.rename(columns={"agent": "cell", "t": "seconds"})
    n = other["cell"].nunique()  # the first frame first (the tracks' first-seen order), the other rows shuffled
    other = pd.concat([other.iloc[:n], other.iloc[n:].sample(frac=1.0, random_state=4)])
    other.to_csv(tmp_path / "other.csv", index=False)
    cli.assert_input_error(cli("simulate", d / "r.nc", "--tracks", 3, "--steps", 5, "--from", tmp_path / "other.csv",
                               "-o", tmp_path / "s.csv"), "no column 'agent'")
    args = ["--tracks", 40, "--steps", 5, "--seed", 2, "-o"]
    proc = cli("simulate", d / "r.nc", "--from", tmp_path / "other.csv", "--track", "cell", "--time", "seconds",
               "--state", "s", "--action", "a", *args, tmp_path / "s.csv")
    assert proc.returncode == 0, proc.stderr
    proc = cli("simulate", d / "r.nc", "--from", d / "tracks.csv", *args, tmp_path / "ref.csv")
    assert proc.returncode == 0, proc.stderr
    # the same starts (first observations of the same tracks) and the same seed: the same tracks
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "s.csv"), pd.read_csv(tmp_path / "ref.csv"))


def test_velocity_tracks_follow_the_kinematic_ar1(rng):
    """psi = c |a|^2: a_{k+1} = (1 - 2 c dt) a_k + N(0, 2 dt / beta), s_{k+1} = s_k + a_{k+1} dt."""
    from fpirl.forward.track_paths import sample_velocity_tracks

    c, beta, dt, n = 2.0, 3.0, 0.1, 4000
    grad = lambda x: np.concatenate([np.zeros_like(x[:, :2]), 2 * c * x[:, 2:]], axis=1)
    a0 = rng.normal(0, np.sqrt(1 / (2 * c * beta)), (n, 2))  # near the stationary law
    x0 = np.concatenate([np.zeros((n, 2)), a0], axis=1)
    pos = sample_velocity_tracks(grad, beta, dt, x0, 3, [-50, -50, -1, -1], [50, 50, 1, 1], "reflecting", rng)
    v = np.diff(pos, axis=0) / dt
    rho = np.sum(v[1] * v[0]) / np.sum(v[0] * v[0])
    assert rho == pytest.approx(1 - 2 * c * dt, abs=0.03)
    resid = v[1] - (1 - 2 * c * dt) * v[0]
    assert resid.var() == pytest.approx(2 * dt / beta, rel=0.05)


def test_simulate_track_table_uses_the_results_mobility_and_lag(readme_fit):
    """``simulate_track_table`` reads ``mobility_*`` and ``second_lag_rho``: the increments of the action
    follow g = exp(1.5 a) (the formula), and ``fpirl evaluate``'s likelihood prefers the full model on them."""
    from fpirl.estimators._plausibility import scale_notes
    from fpirl.evaluation.heldout import heldout_loglik
    from fpirl.io import read_result
    from fpirl.tracks.reading import read_tracks
    from fpirl.workflows import simulate_track_table

    d, k = readme_fit, 1.5
    ds = read_result(d / "r.nc")
    plain = ds.copy()
    ds.attrs.update({"mobility_degree": 1, "mobility_axes": "a", "mobility_lower": np.array([-1.0]),
                     "mobility_upper": np.array([1.0]), "mobility_coefficients": np.array([0.0, k]),
                     "second_lag_rho": 0.5})
    kw = dict(track="agent", time="t", state="s", action="a", boundary="periodic", bounds=[(-1, 1), (-1, 1)])
    start = read_tracks(d / "tracks.csv", **kw)
    assert scale_notes(start) == []  # the README example is not taken for times in a finer unit
    sim = read_tracks(simulate_track_table(ds, 400, 30, rng=3, start=start), **kw)
    i0, i1 = sim.pairs()
    da = sim.values[i1, 1] - sim.values[i0, 1]
    da -= 2 * np.round(da / 2)
    a = sim.values[i0, 1]
    lo, hi = a < np.quantile(a, 0.25), a > np.quantile(a, 0.75)
    want = np.mean(np.exp(k * a[hi])) / np.mean(np.exp(k * a[lo]))
    np.testing.assert_allclose(da[hi].var() / da[lo].var(), want, rtol=0.15)
    no_lag = ds.copy()
    no_lag.attrs = {key: v for key, v in ds.attrs.items() if key != "second_lag_rho"}
    ll = {name: heldout_loglik(m, sim, check=False).loglik["fpirl"] for name, m in
          (("full", ds), ("no_mobility", plain), ("no_lag", no_lag))}
    assert ll["full"] > ll["no_mobility"] + 0.05 and ll["full"] > ll["no_lag"] + 0.05, ll


def test_default_starts_follow_the_data_density(readme_fit):
    """Without start tracks the starts are drawn from the result's data_density (where the observations were), not
    from exp(-beta psi): a density put on one corner block of nodes puts every start within half a cell of it;
    without data_density the starts come from exp(-beta psi) and spread over the box."""
    from fpirl.io import read_result
    from fpirl.workflows import simulate_track_table

    ds = read_result(readme_fit / "r.nc")
    assert "data_density" in ds
    dens = ds["data_density"]
    corner = np.zeros(dens.shape)
    corner[:2, :2] = 1.0  # the first two nodes of s and of a
    ds["data_density"] = dens.copy(data=corner)
    sim = simulate_track_table(ds, 200, 1, rng=4)
    assert sim.attrs["starts"].startswith("the data's occupation density")
    first = sim.groupby("agent").first()
    s_nodes, a_nodes = (ds[c].values for c in dens.dims)
    for col, nodes in (("s", s_nodes), ("a", a_nodes)):  # periodic [-1, 1]: within the block by minimal image
        h = nodes[1] - nodes[0]
        offset = np.mod(first[col].to_numpy() - (nodes[0] - h / 2), 2.0)
        assert np.all(offset <= 2 * h + 1e-12), col
    plain = simulate_track_table(ds.drop_vars("data_density"), 200, 1, rng=4)
    assert plain.attrs["starts"].startswith("exp(-beta psi)")
    assert plain.groupby("agent").first()["s"].max() > s_nodes[1] + h
