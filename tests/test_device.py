"""The batched mixed-flux product (fpirl.weakform._device): on NumPy against the operator's per-mode loop,
on CuPy (where a GPU is present) against NumPy, and the errors when CuPy or a device is missing."""

import importlib.util

import numpy as np
import pytest

from fpirl import DensitySnapshots, Grid, HermiteSpace, PotentialEstimator
from fpirl.core._errors import FpirlInputError
from fpirl.weakform import _device
from fpirl.weakform._device import BatchedMixedFlux, array_namespace
from fpirl.weakform.matfree_mixed import MixedFluxOperator

HAS_CUPY = importlib.util.find_spec("cupy") is not None


def _gpu() -> bool:
    if not HAS_CUPY:
        return False
    try:
        array_namespace("cuda")
    except FpirlInputError:
        return False
    return True


def snapshots(rng, boundary, shape, n_t=5):
    g = Grid([-1.0] * len(shape), [1.0 + 0.5 * b for b in range(len(shape))], shape, boundary=boundary)
    return DensitySnapshots(g, np.arange(n_t) * 0.1, 0.5 + rng.random((n_t,) + g.shape))


@pytest.mark.parametrize("rules", [("gauss", "corrected"), ("nodal", "nodal"), ("gauss", "nodal")])
@pytest.mark.parametrize("boundary,shape,compress", [("periodic", [6, 5], 1e-13), ("reflecting", [5, 4, 6], 1e-13),
                                                     ("periodic", [4, 5, 4], None)])
def test_batched_product_is_the_per_mode_loop(rng, monkeypatch, rules, boundary, shape, compress):
    """All modes (or streamed time pairs) in batches give the loop's ``A c`` to rounding, also when the
    batches are forced to one mode each (the block-size rule)."""
    s = snapshots(rng, boundary, shape)
    H = HermiteSpace.on_grid(s.grid, [2] * len(shape))
    op = MixedFluxOperator(s, H, derivative=rules[0], transverse=rules[1], chunk_bytes=1, compress=compress)
    C = rng.standard_normal((2, H.n_coef))
    ref = [op.matvec(c) for c in C]
    for block in (_device.BLOCK_BYTES, 1):
        monkeypatch.setattr(_device, "BLOCK_BYTES", block)
        batched = BatchedMixedFlux(op, np)
        for c, r in zip(C, ref):
            for _ in range(2):  # the second product reads the cached points
                np.testing.assert_allclose(batched.matvec(c), r, rtol=0, atol=1e-12 * np.abs(r).max())


@pytest.mark.parametrize("boundary,shape", [("periodic", [6, 5]), ("reflecting", [5, 4, 6])])
def test_batched_set_up_pass_is_the_operators(rng, monkeypatch, boundary, shape):
    """The batched pass over the time pairs gives the operator's right-hand sides, sums, row count, trace and
    marginals to rounding (one-mode batches too)."""
    s = snapshots(rng, boundary, shape)
    op = MixedFluxOperator(s, HermiteSpace.on_grid(s.grid, [2] * len(shape)), chunk_bytes=1)
    for block in (_device.BLOCK_BYTES, 1):
        monkeypatch.setattr(_device, "BLOCK_BYTES", block)
        ne, trace, marginals = BatchedMixedFlux(op, np).right_hand_sides()
        for key in ("xtg", "xtc"):
            r = getattr(op.rhs, key)
            np.testing.assert_allclose(getattr(ne, key), r, rtol=0, atol=1e-12 * np.abs(r).max())
        for key in ("gg", "gc", "cc"):
            assert getattr(ne, key) == pytest.approx(getattr(op.rhs, key), rel=1e-12)
        assert ne.n_rows == op.rhs.n_rows and trace == pytest.approx(op.trace, rel=1e-12)
        for m, r in zip(marginals, op.marginals):
            np.testing.assert_allclose(m, r, rtol=1e-12)


def test_unfactored_rules_are_refused(rng):
    s = snapshots(rng, "periodic", [5, 5])
    op = MixedFluxOperator(s, HermiteSpace.on_grid(s.grid, (2, 2)), transverse="gauss")
    with pytest.raises(FpirlInputError, match="transverse"):
        BatchedMixedFlux(op, np)


def test_unknown_device_is_a_one_line_error(rng):
    s = snapshots(rng, "periodic", [5, 5])
    with pytest.raises(FpirlInputError, match="device must be one of"):
        MixedFluxOperator(s, HermiteSpace.on_grid(s.grid, (2, 2)), device="tpu")
    with pytest.raises(FpirlInputError, match="device must be one of"):
        PotentialEstimator(beta=1.0, hermite_elements=2, device="gpu").fit(s)


@pytest.mark.skipif(_gpu(), reason="a CUDA device is present")
def test_cuda_without_a_gpu_is_a_one_line_error(rng):
    s = snapshots(rng, "periodic", [5, 5])
    with pytest.raises(FpirlInputError, match="device='cuda'"):
        array_namespace("cuda")
    with pytest.raises(FpirlInputError, match="device='cuda'"):
        PotentialEstimator(beta=1.0, hermite_elements=2, solver="mixed-flux", device="cuda").fit(s)


def test_cuda_needs_the_mixed_flux(rng):
    s = snapshots(rng, "periodic", [5, 5])
    with pytest.raises(FpirlInputError, match="mixed-flux"):
        PotentialEstimator(beta=1.0, hermite_elements=2, solver="assembled", device="cuda").fit(s)


@pytest.mark.skipif(not _gpu(), reason="needs CuPy and a CUDA device")
def test_cuda_product_and_fit_equal_the_cpu_ones(rng):
    """On a GPU: the set-up and the batched product on CuPy equal the CPU ones, and a whole fit gives the same psi."""
    s = snapshots(rng, "periodic", [6, 5, 6])
    H = HermiteSpace.on_grid(s.grid, (2, 2, 2))
    cpu = MixedFluxOperator(s, H)
    gpu = MixedFluxOperator(s, H, device="cuda")
    for key in ("xtg", "xtc"):
        r = getattr(cpu.rhs, key)
        np.testing.assert_allclose(getattr(gpu.rhs, key), r, rtol=0, atol=1e-12 * np.abs(r).max())
    assert gpu.trace == pytest.approx(cpu.trace, rel=1e-12) and gpu.rhs.cc == pytest.approx(cpu.rhs.cc, rel=1e-12)
    c = rng.standard_normal(H.n_coef)
    r = cpu.matvec(c)
    np.testing.assert_allclose(gpu.matvec(c), r, rtol=0, atol=1e-11 * np.abs(r).max())
    fits = [PotentialEstimator(beta=1.0, hermite_elements=2, solver="mixed-flux", device=dev).fit(s)
            for dev in ("cpu", "cuda")]
    np.testing.assert_allclose(fits[1].coef_, fits[0].coef_, rtol=0, atol=1e-6 * np.abs(fits[0].coef_).max())
    assert fits[1].settings_["device"] == "cuda"


def test_fit_device_option_errors_are_one_line(rng, tmp_path, capsys):
    """``fpirl fit --device``: a path other than the mixed flux (and, without a GPU, CuPy or the device
    missing) is a one-line error with exit 2 and no result file; the option is refused for tables."""
    from fpirl.cli import main
    from fpirl.io import write_density

    data = tmp_path / "d.nc"
    write_density(data, snapshots(rng, "periodic", [6, 6]))
    out = tmp_path / "r.nc"
    cases = [(["--solver", "assembled", "--device", "cuda"], "runs only the mixed-flux")]
    if not _gpu():
        cases.append((["--solver", "mixed-flux", "--device", "cuda"], "device='cuda'"))
    for extra, message in cases:
        rc = main(["fit", str(data), "-o", str(out), "--beta", "1", "--hermite-elements", "2", "--no-progress", *extra])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and message in err and len(err.splitlines()) == 1, err
        assert not out.exists()
    table = tmp_path / "t.csv"
    table.write_text("track,time,x\n" + "".join(f"{k},{t},{0.1 * t + k}\n" for k in range(2) for t in range(5)))
    rc = main(["fit", str(table), "-o", str(out), "--track", "track", "--time", "time", "--state", "x",
               "--device", "cuda", "--no-progress"])
    assert rc == 2 and "--device" in capsys.readouterr().err and not out.exists()
