"""The matrix-free normal operator and CG path (fpirl.weakform.matfree) against the assembled one."""

import numpy as np
import pytest

from fpirl import DensitySnapshots, FpirlInputError, Grid, HermiteSpace, PotentialEstimator
from fpirl import identify
from fpirl.weakform._separable import SeparableProblem
from fpirl.weakform.assembly import assemble_normal_equations
from fpirl.weakform.matfree import NormalOperator, StreamingSnapshots

CASES = [
    (2, (9, 8), (3, 2), "periodic"),
    (2, (9, 8), (3, 2), "reflecting"),
    (3, (8, 7, 8), (2, 2, 3), "periodic"),
    (3, (8, 7, 8), (2, 2, 3), "reflecting"),
]


def smooth_data(rng, d, elements, boundary, n_t=5):
    """Positive snapshots with a transient (a linear-algebra test: no physics needed)."""
    g = Grid([-1.0] * d, [1.0] * d, elements, boundary=boundary)
    x = g.mesh()
    base = np.exp(-np.sum((x - 0.2) ** 2, -1))
    vals = np.stack([base * (1 + 0.1 * k * np.sin(np.pi * x[..., 0])) + 0.3 * rng.random(g.shape) for k in range(n_t)])
    return DensitySnapshots(g, np.arange(n_t) * 0.1, vals)


@pytest.mark.parametrize("compress, scheme", [(1e-13, "midpoint"), (None, "midpoint"), (None, "simpson")])
@pytest.mark.parametrize("d, elements, hermite_elements, boundary", CASES)
def test_operator_equals_assembled_matrix(rng, d, elements, hermite_elements, boundary, compress, scheme):
    s = smooth_data(rng, d, elements, boundary)
    H = HermiteSpace.on_grid(s.grid, hermite_elements)
    ne = assemble_normal_equations(s, H, time_scheme=scheme)
    # one residual row per chunk: streaming (Simpson's chunks share two snapshots)
    op = NormalOperator(s, H, chunk_bytes=1, compress=compress, time_scheme=scheme)
    assert op.chunk == 1 and (op.n_modes is None) == (compress is None)
    C = rng.standard_normal((3, H.n_coef))
    AC = np.stack([op.matvec(c) for c in C])
    np.testing.assert_allclose(AC, C @ ne.xtx, rtol=0, atol=1e-12 * np.abs(ne.xtx).max() * np.abs(C).sum(1).max())
    for name in ("xtg", "xtc"):
        a, b = getattr(op.rhs, name), getattr(ne, name)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(b).max())
    for name in ("gg", "gc", "cc", "n_rows"):
        assert getattr(op.rhs, name) == pytest.approx(getattr(ne, name), rel=1e-12)
    assert op.trace == pytest.approx(np.trace(ne.xtx), rel=1e-12)


@pytest.mark.parametrize("d, elements, hermite_elements, boundary", CASES)
def test_matrix_free_fit_equals_assembled_fit(rng, d, elements, hermite_elements, boundary):
    s = smooth_data(rng, d, elements, boundary)
    # ridge 1e-6: on these small random-data cases the default leaves A + lam P nearly singular and CG slow
    kw = dict(hermite_elements=hermite_elements, beta=3.0, cg_tol=1e-12, ridge=1e-6)
    a = PotentialEstimator(solver="assembled", **kw).fit(s)
    m = PotentialEstimator(solver="matrix-free", **kw).fit(s)
    assert a.solver_ == "assembled" and m.solver_ == "matrix-free"
    assert np.abs(m.coef_ - a.coef_).max() <= 1e-8 * np.abs(a.coef_).max()
    assert m.penalty_ == pytest.approx(a.penalty_, rel=1e-12)
    assert m.residual_ == pytest.approx(a.residual_, rel=1e-8)
    assert m.settings_["solver"] == "matrix-free" and m.cg_info_["relative_residual"][0] <= 1e-12


def test_matrix_free_beta_estimate_equals_assembled(rng):
    s = smooth_data(rng, 2, (9, 8), "periodic")
    kw = dict(hermite_elements=(3, 2), estimate_beta=True, cg_tol=1e-12)
    a = PotentialEstimator(solver="assembled", **kw).fit(s)
    m = PotentialEstimator(solver="matrix-free", **kw).fit(s)
    assert m.beta_ == pytest.approx(a.beta_, rel=1e-8)
    assert m.beta_identifiability_ == pytest.approx(a.beta_identifiability_, rel=1e-6)
    assert np.abs(m.coef_ - a.coef_).max() <= 1e-8 * np.abs(a.coef_).max()
    assert len(m.cg_info_["iterations"]) == 2  # Schur complement: two CG solves


class _CountingArray:
    """A sliceable array that records how many snapshots each read asks for."""

    def __init__(self, values):
        self.values, self.shape, self.reads = values, values.shape, []

    def __getitem__(self, key):
        self.reads.append(key.stop - key.start)
        return self.values[key]


def test_streaming_reads_chunks_only(rng):
    s = smooth_data(rng, 2, (9, 8), "periodic", n_t=7)
    lazy = _CountingArray(s.values)
    stream = StreamingSnapshots(s.grid, s.times, lazy)
    op = NormalOperator(stream.normalize(chunk=2), HermiteSpace.on_grid(s.grid, 2), chunk_bytes=1)
    op.matvec(np.ones(op.hermite.n_coef))
    assert max(lazy.reads) <= 2 < s.n_times
    # the estimator takes the stream as it is (auto picks the matrix-free path) and matches the in-memory fit
    est = PotentialEstimator(hermite_elements=2, beta=3.0, cg_tol=1e-12).fit(StreamingSnapshots(s.grid, s.times, lazy))
    ref = PotentialEstimator(hermite_elements=2, beta=3.0, solver="assembled").fit(s)
    assert est.solver_ == "matrix-free"
    assert np.abs(est.coef_ - ref.coef_).max() <= 1e-8 * np.abs(ref.coef_).max()


def test_fit_from_a_lazily_opened_density_file(rng, tmp_path):
    from fpirl.io import write_density

    s = smooth_data(rng, 2, (9, 8), "periodic")
    path = write_density(tmp_path / "d.nc", s)
    stream = StreamingSnapshots.open(path)
    assert not isinstance(stream.values, np.ndarray)  # read chunk by chunk
    est = PotentialEstimator(hermite_elements=2, beta=3.0, cg_tol=1e-12).fit(stream)
    ref = PotentialEstimator(hermite_elements=2, beta=3.0, solver="assembled").fit(s)
    assert est.solver_ == "matrix-free"
    assert np.abs(est.coef_ - ref.coef_).max() <= 1e-8 * np.abs(ref.coef_).max()


def test_streaming_validates_chunks():
    g = Grid([-1.0, -1.0], [1.0, 1.0], 4)
    bad = np.ones((3,) + g.shape)
    bad[2, 0, 0] = -1.0
    stream = StreamingSnapshots(g, [0.0, 0.1, 0.2], bad)
    with pytest.raises(FpirlInputError, match="negative"):
        stream.read(0, 3)
    with pytest.raises(FpirlInputError, match="uniformly"):
        StreamingSnapshots(g, [0.0, 0.1, 0.3], bad)


def test_auto_picks_matrix_free_by_size(rng, monkeypatch):
    s = smooth_data(rng, 2, (9, 8), "periodic")
    assert PotentialEstimator(hermite_elements=2, beta=3.0).fit(s).solver_ == "assembled"
    monkeypatch.setattr(identify, "ASSEMBLED_MEMORY_LIMIT", 1.0)
    assert PotentialEstimator(hermite_elements=2, beta=3.0).fit(s).solver_ == "matrix-free"


@pytest.mark.parametrize("kwargs, match", [({"solver": "dense"}, "solver"),
                                           ({"solver": "matrix-free", "ridge": "gcv"}, "gcv")])
def test_bad_solver_options(rng, kwargs, match):
    s = smooth_data(rng, 2, (9, 8), "periodic")
    with pytest.raises(FpirlInputError, match=match):
        PotentialEstimator(hermite_elements=2, beta=3.0, **kwargs).fit(s)


def test_recovery_in_five_dimensions():
    """5-D separable potential, data = product of accurate 1-D spectral FP solutions (independent)."""
    problem = SeparableProblem(5, hermite_elements=2, beta=2.0, dt=0.02, steps=4, resolution=128)
    est = PotentialEstimator(hermite_elements=2, beta=problem.beta, solver="matrix-free", cg_tol=1e-6)
    est.fit(problem.streaming(6))
    # observed 15.1% with 6 nodes per axis (12.4% with 6 steps, 7.4% with 8 nodes and 6 steps; the
    # error is the FE discretisation's): the bound leaves room for rounding only
    assert problem.error(est) < 0.16
    assert est.residual_ < 0.5


def test_cli_fit_solver_option(rng, tmp_path, cli):
    from fpirl.io import read_result, write_density

    s = smooth_data(rng, 2, (9, 8), "periodic")
    data = write_density(tmp_path / "d.nc", s)
    coef = {}
    for solver in ("assembled", "matrix-free"):
        out = tmp_path / f"{solver}.nc"
        proc = cli("fit", data, "-o", out, "--beta", "3", "--hermite-elements", "2", "--solver", solver, "--no-progress")
        assert proc.returncode == 0, proc.stderr
        ds = read_result(out)
        assert ds.attrs["solver_solver"] == solver
        coef[solver] = ds["hermite_coefficients"].values
    assert np.abs(coef["matrix-free"] - coef["assembled"]).max() <= 1e-6 * np.abs(coef["assembled"]).max()
    cli.assert_input_error(cli("fit", data, "-o", tmp_path / "x.nc", "--beta", "3", "--solver", "matrix-free",
                               "--ridge", "gcv", "--no-progress"), "gcv")


def test_cli_streams_density_files_above_the_size_limit(rng, tmp_path, monkeypatch):
    """Above ``STREAM_BYTES`` ``fpirl fit`` opens the file lazily and the matrix-free path streams it;
    the potential equals the in-memory (assembled) fit's."""
    import fpirl.cli.fit as cli_fit
    from fpirl.cli import main
    from fpirl.io import read_result, write_density

    s = smooth_data(rng, 2, (9, 8), "periodic")
    data = write_density(tmp_path / "d.nc", s)
    args = ["--beta", "3", "--hermite-elements", "2", "--ridge", "1e-6", "--uncertainty", "none", "--no-progress"]
    assert main(["fit", str(data), "-o", str(tmp_path / "whole.nc"), *args]) == 0
    monkeypatch.setattr(cli_fit, "STREAM_BYTES", 0.0)
    assert main(["fit", str(data), "-o", str(tmp_path / "streamed.nc"), *args]) == 0
    whole, streamed = read_result(tmp_path / "whole.nc"), read_result(tmp_path / "streamed.nc")
    assert whole.attrs["solver_solver"] == "assembled" and streamed.attrs["solver_solver"] == "matrix-free"
    a, b = whole["hermite_coefficients"].values, streamed["hermite_coefficients"].values
    assert np.abs(b - a).max() <= 1e-7 * np.abs(a).max()


def test_cli_auto_uncertainty_skips_the_posterior_of_a_streamed_file_over_budget(rng, tmp_path, monkeypatch):
    """``--uncertainty auto`` on a streamed file: the posterior when its estimated cost (with the file's
    re-reads) is within the budget, else one warning naming ``--uncertainty posterior`` and no uncertainty."""
    import fpirl.cli.fit as cli_fit
    import fpirl.uncertainty.estimate as unc
    from fpirl.cli import main
    from fpirl.io import read_result, write_density

    s = smooth_data(rng, 2, (9, 8), "periodic")
    data = write_density(tmp_path / "d.nc", s)
    args = ["--beta", "3", "--hermite-elements", "2", "--ridge", "1e-6", "--no-progress"]
    monkeypatch.setattr(cli_fit, "STREAM_BYTES", 0.0)
    assert main(["fit", str(data), "-o", str(tmp_path / "in.nc"), *args]) == 0
    assert read_result(tmp_path / "in.nc").attrs["uncertainty"] == "posterior"
    monkeypatch.setattr(unc, "STREAMED_PASSES", 10**12)  # the re-reads, not the solves, go over the budget
    with pytest.warns(RuntimeWarning, match="streamed file.*--uncertainty posterior"):
        assert main(["fit", str(data), "-o", str(tmp_path / "out.nc"), *args]) == 0
    out = read_result(tmp_path / "out.nc")
    assert out.attrs["uncertainty"] == "none" and "potential_std" not in out
    monkeypatch.setattr(cli_fit, "STREAM_BYTES", 2e9)  # read whole: no re-reads, the posterior is kept
    assert main(["fit", str(data), "-o", str(tmp_path / "whole.nc"), *args]) == 0
    assert read_result(tmp_path / "whole.nc").attrs["uncertainty"] == "posterior"
