"""Density and result files: round trips, validation of bad input, atomic writes."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

import fpirl.io._files
from fpirl import DensitySnapshots, FpirlInputError, Grid, HermiteSpace
from fpirl.mdp import MDP
from fpirl.io import (
    atomic_path,
    atomic_write,
    check_output_path,
    density_dataset,
    grid_from_dataset,
    model_from_result,
    read_density,
    read_result,
    result_dataset,
    write_density,
    write_result,
)


def _grid(boundary="periodic"):
    return Grid([-1.0, 0.0], [1.0, 2.0], [6, 4], names=["s", "a"], roles=["state", "action"], boundary=boundary)


def _snapshots(rng, boundary="periodic", n_t=3):
    g = _grid(boundary)
    return DensitySnapshots(g, 0.1 * np.arange(n_t), rng.random((n_t, *g.shape)) + 0.1)


def _fake_estimator(grid, n_h=2):
    herm = HermiteSpace.on_grid(grid, n_h)
    coef = herm.remove_mean(np.arange(herm.n_coef, dtype=float).reshape(herm.shape) / herm.n_coef)
    return SimpleNamespace(
        grid_=grid,
        hermite_=herm,
        coef_=coef,
        beta_=2.5,
        penalty_=1e-9,
        residual_=0.05,
        settings_={"time_scheme": "midpoint", "quadrature_points": 3, "beta_estimated": False},
        potential_on_grid=lambda g=None: herm.evaluate_grid(coef, (grid if g is None else g).coords),
    )


def _only(tmp_path, *names):
    """The directory holds exactly ``names`` (no temp files, no partial results)."""
    assert sorted(os.listdir(tmp_path)) == sorted(names)


# --------------------------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("boundary", ["periodic", "reflecting"])
def test_density_round_trip(tmp_path, rng, boundary):
    snap = _snapshots(rng, boundary)
    path = write_density(tmp_path / "d.nc", snap)
    back = read_density(path)
    assert back.grid == snap.grid
    np.testing.assert_allclose(back.values, snap.values)
    np.testing.assert_allclose(back.times, snap.times)
    assert back.grid.roles == ("state", "action")
    _only(tmp_path, "d.nc")


def test_density_file_follows_contract(tmp_path, rng):
    snap = _snapshots(rng, "reflecting")
    write_density(tmp_path / "d.nc", snap)
    with xr.open_dataset(tmp_path / "d.nc") as ds:
        assert ds["density"].dims == ("time", "s", "a")
        assert ds.attrs["boundary"] == "reflecting"
        assert ds["s"].attrs["role"] == "state" and ds["a"].attrs["role"] == "action"
        assert ds["a"].attrs["lower"] == 0.0 and ds["a"].attrs["upper"] == 2.0
        np.testing.assert_allclose(ds["a"].values, [0, 0.5, 1.0, 1.5, 2.0])  # N + 1 reflecting nodes


def test_result_round_trip(tmp_path):
    grid = _grid()
    est = _fake_estimator(grid)
    mdp = MDP(grid, 2.5, 0.1, 0.9, q_value=-np.ones(grid.shape), policy=np.full(grid.shape, 0.5), transition=None,
              reward=np.zeros(grid.shape))
    ds = result_dataset(est, mdp=mdp, dt=0.1,
                        extra={"density_fit_residual": np.zeros(grid.shape), "note": "hello"})
    path = write_result(tmp_path / "r.nc", ds)
    back = read_result(path)
    for name in ("potential", "q_value", "policy", "reward", "hermite_coefficients", "density_fit_residual"):
        assert name in back.data_vars
    assert back["hermite_coefficients"].dims == ("hermite_s", "hermite_a")
    np.testing.assert_allclose(back["hermite_coefficients"].values, est.coef_)
    assert abs(float(back["potential"].mean())) < 0.2  # zero mean in L2 sense, nodes ~ close
    a = back.attrs
    assert a["beta"] == 2.5 and a["dt"] == 0.1 and a["gamma"] == 0.9
    assert a["boundary"] == "periodic" and a["state_dims"] == "s" and a["action_dims"] == "a"
    assert list(np.atleast_1d(a["hermite_elements"])) == [2, 2]
    assert list(np.atleast_1d(a["fe_elements"])) == [6, 4]
    assert a["solver_time_scheme"] == "midpoint" and a["solver_quadrature_points"] == 3
    assert a["note"] == "hello" and "fpirl_version" in a
    assert grid_from_dataset(back, "potential") == grid
    _only(tmp_path, "r.nc")


def test_result_without_mdp_has_no_mdp_fields(tmp_path):
    grid = Grid([0.0], [1.0], 5, names=["x"], boundary="reflecting")
    ds = result_dataset(_fake_estimator(grid))
    assert set(ds.data_vars) == {"potential", "hermite_coefficients"}
    assert ds.attrs["action_dims"] == "" and np.isnan(ds.attrs["gamma"])
    back = read_result(write_result(tmp_path / "r.nc", ds))
    assert back.attrs["action_dims"] == ""


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------
def _write_raw(tmp_path, ds, name="bad.nc"):
    path = tmp_path / name
    ds.to_netcdf(path)
    return path


def _good_ds(rng, boundary="periodic"):
    return density_dataset(_snapshots(rng, boundary))


def _expect(path, *words):
    with pytest.raises(FpirlInputError) as info:
        read_density(path)
    msg = str(info.value)
    assert "\n" not in msg
    for w in words:
        assert w.lower() in msg.lower(), msg
    return msg


def test_nan_density(tmp_path, rng):
    ds = _good_ds(rng)
    ds["density"][1, 2, 3] = np.nan
    _expect(_write_raw(tmp_path, ds), "nan")


def test_negative_density(tmp_path, rng):
    ds = _good_ds(rng)
    ds["density"][0, 0, 0] = -0.5
    _expect(_write_raw(tmp_path, ds), "negative")


def test_time_last_and_descending_axes_read_as_the_contract(tmp_path, rng):
    """A density stored as ``(s, a, time)`` with ``s`` descending reads as ``(time, s, a)`` on increasing nodes,
    eagerly and streamed."""
    from fpirl.weakform._streaming import StreamingSnapshots

    ds = _good_ds(rng)
    ref = read_density(_write_raw(tmp_path, ds, "ref.nc"))
    odd = ds.transpose("s", "a", "time").isel(s=slice(None, None, -1))
    assert odd["density"].dims == ("s", "a", "time") and odd["s"].values[0] > odd["s"].values[-1]
    path = _write_raw(tmp_path, odd, "odd.nc")
    got = read_density(path)
    assert got.grid == ref.grid
    np.testing.assert_array_equal(got.values, ref.values)
    np.testing.assert_array_equal(got.times, ref.times)
    with StreamingSnapshots.open(path) as lazy:
        assert lazy.grid == ref.grid
        np.testing.assert_array_equal(lazy.read(0, 2), ref.values[:2])


def test_rounding_negatives_read_as_zero(tmp_path, rng):
    """Negatives within 1e-10 of the snapshot's maximum (a forward solver's rounding) are 0, eagerly
    and streamed; just beyond that they are an error."""
    from fpirl.core.density import ROUNDING_RTOL
    from fpirl.weakform._streaming import StreamingSnapshots

    ds = _good_ds(rng)
    top = float(ds["density"][1].max())
    ds["density"][1, 0, 0] = -0.5 * ROUNDING_RTOL * top
    path = _write_raw(tmp_path, ds, "round.nc")
    snaps = read_density(path)
    assert snaps.values[1, 0, 0] == 0.0 and snaps.values.min() == 0.0
    np.testing.assert_array_equal(snaps.values[0], ds["density"].values[0])
    with StreamingSnapshots.open(path) as lazy:
        np.testing.assert_array_equal(lazy.read(0, 3), snaps.values)
    ds["density"][1, 0, 0] = -2 * ROUNDING_RTOL * top
    msg = _expect(_write_raw(tmp_path, ds, "neg.nc"), "negative", "snapshot 1")
    with StreamingSnapshots.open(tmp_path / "neg.nc") as lazy, pytest.raises(FpirlInputError, match="negative"):
        lazy.read(0, 3)
    assert f"{-2 * ROUNDING_RTOL * top:.3g}" in msg


def test_nonuniform_coordinates(tmp_path, rng):
    ds = _good_ds(rng)
    x = ds["s"].values.copy()
    x[2] += 0.05
    ds = ds.assign_coords(s=("s", x, ds["s"].attrs))
    _expect(_write_raw(tmp_path, ds), "'s'", "uniform")


def test_coordinates_inconsistent_with_bounds(tmp_path, rng):
    ds = _good_ds(rng)
    ds["s"].attrs["upper"] = 3.0
    _expect(_write_raw(tmp_path, ds), "'s'", "upper")


def test_periodic_nodes_must_exclude_upper(tmp_path, rng):
    ds = _good_ds(rng, "reflecting")  # nodes include both walls
    ds.attrs["boundary"] = "periodic"
    _expect(_write_raw(tmp_path, ds), "periodic")


def test_no_time_dim(tmp_path, rng):
    ds = _good_ds(rng).isel(time=0, drop=True)
    _expect(_write_raw(tmp_path, ds), "dims", "time")


def test_no_time_coordinate_eager_and_streamed(tmp_path, rng):
    """A time dim without its coordinate is an error on both paths (xarray would index it 0, 1, 2, ...: dt = 1)."""
    from fpirl.weakform._streaming import StreamingSnapshots

    path = _write_raw(tmp_path, _good_ds(rng).drop_vars("time"))
    _expect(path, "no 'time' coordinate")
    with pytest.raises(FpirlInputError, match="no 'time' coordinate"):
        StreamingSnapshots.open(path)


def test_density_without_spatial_axes(tmp_path):
    ds = xr.Dataset({"density": ("time", np.ones(3))}, coords={"time": [0.0, 1.0, 2.0]}, attrs={"boundary": "periodic"})
    _expect(_write_raw(tmp_path, ds), "no spatial axes")


def test_axis_without_coordinate(tmp_path, rng):
    ds = _good_ds(rng).drop_vars("a")
    _expect(_write_raw(tmp_path, ds), "'a'", "coordinate")


def test_single_snapshot(tmp_path, rng):
    ds = _good_ds(rng).isel(time=slice(0, 1))
    _expect(_write_raw(tmp_path, ds), "two")


def test_nonuniform_times(tmp_path, rng):
    ds = _good_ds(rng).assign_coords(time=[0.0, 0.1, 0.3])
    _expect(_write_raw(tmp_path, ds), "uniformly", "differ by up to 0.33")


def test_times_uniform_in_single_precision_are_read(tmp_path, rng):
    """Steps of 0.05 stored as float32 deviate by about 1e-6 of the step (refused before); a deviation above single
    precision's rounding is still refused, by every reader."""
    from fpirl.distributed import stream_header
    from fpirl.weakform.matfree import StreamingSnapshots

    ds = _good_ds(rng)
    times = (0.05 * np.arange(1, 61)).astype(np.float32)
    ds = xr.concat([ds.isel(time=[0])] * 60, dim="time").assign_coords(time=times)
    path = _write_raw(tmp_path, ds)
    assert np.abs(np.diff(times.astype(float)) / 0.05 - 1).max() > 1e-6  # what the earlier check refused
    assert read_density(path).dt == pytest.approx(0.05, rel=1e-5)
    assert StreamingSnapshots.open(path).times.size == 60
    assert stream_header(path)[1] == 60  # the Dask path's header check: the same rule
    jitter = times.astype(float) + 1e-4 * 0.05 * (np.arange(60) % 2)
    bad = _write_raw(tmp_path, ds.assign_coords(time=jitter))
    _expect(bad, "uniformly")
    with pytest.raises(FpirlInputError, match="uniformly"):
        stream_header(bad)


@pytest.mark.parametrize(
    "where, key, words",
    [
        ("dataset", "boundary", ["boundary"]),
        ("s", "role", ["'s'", "role"]),
        ("a", "lower", ["'a'", "lower"]),
        ("s", "upper", ["'s'", "upper"]),
    ],
)
def test_missing_attrs(tmp_path, rng, where, key, words):
    ds = _good_ds(rng)
    attrs = ds.attrs if where == "dataset" else ds[where].attrs
    del attrs[key]
    _expect(_write_raw(tmp_path, ds), *words)


def test_bad_role_and_boundary(tmp_path, rng):
    ds = _good_ds(rng)
    ds["a"].attrs["role"] = "control"
    _expect(_write_raw(tmp_path, ds, "r.nc"), "role")
    ds = _good_ds(rng)
    ds.attrs["boundary"] = "open"
    _expect(_write_raw(tmp_path, ds, "b.nc"), "boundary")


def test_missing_density_variable(tmp_path, rng):
    ds = _good_ds(rng).rename({"density": "rho"})
    _expect(_write_raw(tmp_path, ds), "'density'", "rho")


def test_unknown_file_type(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("1 2 3\n")
    _expect(path, "unknown file type", ".txt")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_tables_are_routed_to_read_tracks(tmp_path, suffix):
    path = tmp_path / f"tracks{suffix}"
    path.write_text("track,time,x\n")
    _expect(path, "trajectory table", "read_tracks")


def test_missing_and_corrupt_files(tmp_path):
    _expect(tmp_path / "nope.nc", "no such file")
    bad = tmp_path / "garbage.nc"
    bad.write_bytes(b"this is not netCDF at all")
    _expect(bad, "cannot read")


def test_read_result_rejects_density_files(tmp_path, rng):
    path = write_density(tmp_path / "d.nc", _snapshots(rng))
    with pytest.raises(FpirlInputError, match="not an fpirl result"):
        read_result(path)


# --------------------------------------------------------------------------------------------
# atomic writes
# --------------------------------------------------------------------------------------------
def test_failed_write_leaves_nothing(tmp_path):
    def writer(tmp):
        tmp.write_text("half a file")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "out.nc", writer)
    _only(tmp_path)


def test_failed_write_keeps_previous_file(tmp_path, rng):
    path = write_density(tmp_path / "d.nc", _snapshots(rng))
    before = path.read_bytes()

    def writer(tmp):
        tmp.write_text("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, writer)
    assert path.read_bytes() == before
    _only(tmp_path, "d.nc")


def test_write_errors_are_input_errors(tmp_path, rng):
    snap = _snapshots(rng)
    with pytest.raises(FpirlInputError, match="directory does not exist"):
        write_density(tmp_path / "missing" / "d.nc", snap)
    with pytest.raises(FpirlInputError, match="unknown file type"):
        write_density(tmp_path / "d.h5", snap)
    _only(tmp_path)


def test_output_path_checks(tmp_path, monkeypatch):
    (tmp_path / "file.nc").write_text("x")
    with pytest.raises(FpirlInputError, match="is a file, not a directory"):
        check_output_path(tmp_path / "file.nc" / "sub" / "out.nc")
    with pytest.raises(FpirlInputError, match="directory does not exist"):
        check_output_path(tmp_path / "missing" / "out.nc")
    with pytest.raises(FpirlInputError, match="must end in .nc"):
        check_output_path(tmp_path / "out.txt", (".nc",))
    with pytest.raises(FpirlInputError, match="is the input file"):
        check_output_path(tmp_path / "." / "file.nc", inputs=(None, tmp_path / "file.nc"))
    assert check_output_path(tmp_path / "new.nc", (".nc",), inputs=(tmp_path / "file.nc",)) == tmp_path / "new.nc"
    # an unwritable directory is found before any work (os.access: tests may run as root)
    real = os.access
    monkeypatch.setattr(fpirl.io._files.os, "access", lambda p, mode: False if Path(p) == tmp_path else real(p, mode))
    with pytest.raises(FpirlInputError, match="permission denied") as info:
        check_output_path(tmp_path / "new.nc")
    assert str(tmp_path / "new.nc") in str(info.value)


def test_write_errors_name_the_users_file_not_the_temporary_one(tmp_path, monkeypatch):
    target = tmp_path / "r.nc"

    def writer(tmp):
        raise PermissionError(13, "Permission denied", str(tmp))

    with pytest.raises(OSError) as info:
        atomic_write(target, writer)
    assert info.value.filename == str(target) and ".tmp" not in str(info.value)

    def no_temp(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".r.nc.abc.tmp"))

    monkeypatch.setattr(fpirl.io._files.tempfile, "mkstemp", no_temp)
    with pytest.raises(FpirlInputError) as info:
        with atomic_path(target):
            pass
    assert str(target) in str(info.value) and ".tmp" not in str(info.value)
    _only(tmp_path)


def test_result_dataset_needs_typed_inputs():
    grid = _grid()
    with pytest.raises(TypeError, match="lacks coef_"):
        result_dataset(SimpleNamespace(grid_=grid))
    with pytest.raises(TypeError, match="fpirl.mdp.MDP"):
        result_dataset(_fake_estimator(grid), mdp=SimpleNamespace(q_value=np.zeros(grid.shape)))


def test_model_from_result_round_trip(tmp_path):
    grid = _grid()
    est = _fake_estimator(grid)
    back = read_result(write_result(tmp_path / "r.nc", result_dataset(est, dt=0.1)))
    model = model_from_result(back)
    assert model.grid == grid and model.beta == 2.5 and model.dt == 0.1
    np.testing.assert_allclose(model.coef, est.coef_)
    x = np.array([[0.3, 1.2], [-0.9, 0.1]])
    np.testing.assert_allclose(model.potential(x), est.hermite_.evaluate(est.coef_, x))
    with pytest.raises(FpirlInputError, match="dt"):
        model_from_result(result_dataset(est))


def test_writes_go_through_symbolic_links(tmp_path, rng):
    """``-o LINK`` writes where the link points (also a link whose target does not exist yet) and keeps the
    link, as opening the path would; a link into a missing directory or a loop of links is a one-line error."""
    (tmp_path / "data").mkdir()
    old = tmp_path / "data" / "old.nc"
    old.write_text("previous")
    link = tmp_path / "link.nc"
    link.symlink_to(old)
    write_density(link, _snapshots(rng))
    assert link.is_symlink() and os.readlink(link) == str(old)
    assert read_density(link).values.shape == read_density(old).values.shape
    dangling = tmp_path / "dangling.nc"
    dangling.symlink_to(tmp_path / "data" / "new.nc")
    write_density(dangling, _snapshots(rng))
    assert dangling.is_symlink() and (tmp_path / "data" / "new.nc").is_file()
    _only(tmp_path / "data", "old.nc", "new.nc")
    nowhere = tmp_path / "nowhere.nc"
    nowhere.symlink_to(tmp_path / "missing" / "x.nc")
    with pytest.raises(FpirlInputError, match="is a link to .*directory does not exist"):
        write_density(nowhere, _snapshots(rng))
    a, b = tmp_path / "a.nc", tmp_path / "b.nc"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(FpirlInputError, match="loop"):
        write_density(a, _snapshots(rng))
    assert a.is_symlink() and b.is_symlink()


def test_axis_units_and_names_are_carried_to_the_result(tmp_path, rng):
    """``units``/``long_name``/``standard_name`` of the data's axis coordinates reach the result's axes (they were
    dropped); other attrs, and the role/lower/upper the result writes itself, are left as they are."""
    from fpirl.io.netcdf import copy_axis_attrs

    ds = _good_ds(rng)
    axes = [n for n in ds.coords if n != "time"]
    for n in axes:
        ds[n].attrs.update(units="um", long_name=f"position {n}", comment="not carried")
    path = _write_raw(tmp_path, ds, "units.nc")
    result = xr.Dataset(coords={n: xr.Variable(n, ds[n].values, {"role": "state", "lower": -9.0}) for n in axes})
    out = copy_axis_attrs(result, path)
    for n in axes:
        assert out[n].attrs == {"role": "state", "lower": -9.0, "units": "um", "long_name": f"position {n}"}
    assert copy_axis_attrs(result, tmp_path / "missing.nc") is result  # decoration only: nothing to add
