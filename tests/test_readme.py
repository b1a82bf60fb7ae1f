"""The README's Python example runs as written (on a small density file made here)."""

import re
from pathlib import Path

import numpy as np

from fpirl import DensitySnapshots, Grid, write_density
from fpirl.forward import simulate_density, von_mises_bump

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    grid = Grid([-1, -1], [1, 1], 12, names=["s", "a"], roles=["state", "action"])
    psi = lambda x: 0.4 * np.cos(np.pi * x[..., 0]) * np.cos(np.pi * x[..., 1])
    grad = lambda x: np.stack([-0.4 * np.pi * np.sin(np.pi * x[..., 0]) * np.cos(np.pi * x[..., 1]),
                               -0.4 * np.pi * np.cos(np.pi * x[..., 0]) * np.sin(np.pi * x[..., 1])], -1)
    times = 0.02 * np.arange(10)
    values = simulate_density(grid, psi, grad, 5.0, von_mises_bump(grid.lower, grid.upper, [0.2, 0.1], 1.0), times)
    monkeypatch.chdir(tmp_path)
    write_density("density.nc", DensitySnapshots(grid, times, values))
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "result.nc").exists() and (tmp_path / "result.png").stat().st_size > 0
