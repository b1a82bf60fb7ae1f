"""The README's Python examples run as written: the first builds density.nc from numpy arrays,
the next fits it, writes and plots the result."""

import re
from pathlib import Path

from fpirl import read_density

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2, "README has no python examples"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
    data = read_density(tmp_path / "density.nc")
    assert data.n_times == 30 and data.times[0] == 1.0 and data.grid.shape == (41, 41)
    assert (tmp_path / "result.nc").exists() and (tmp_path / "result.png").stat().st_size > 0
