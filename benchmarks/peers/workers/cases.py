"""Test cases shared by the runner (fpirl's venv) and the workers (peer venvs): numpy only.

Each forward case is a 2-D Fokker-Planck problem on [-1, 1]^2 given by psi, grad psi, beta and an
initial density (unnormalised). ``refl`` is written in functions of cos(pi (x + 1) / 2), so psi
and p0 are even about both walls: its reflecting solution equals the periodic solution on the
doubled box [-1, 3]^2 -- which gives an independent spectral reference.
"""

import numpy as np

PI = np.pi


def _trig_psi(x, y):
    return 0.45 * np.sin(PI * x) + 0.35 * np.cos(PI * y) + 0.2 * np.cos(PI * (x + y))


def _trig_grad(x, y):
    s = -0.2 * PI * np.sin(PI * (x + y))
    return np.stack([0.45 * PI * np.cos(PI * x) + s, -0.35 * PI * np.sin(PI * y) + s], axis=-1)


def _trig_p0(x, y):
    return np.exp(2.0 * (np.cos(PI * (x - 0.3)) - 1.0) + 2.0 * (np.cos(PI * (y + 0.2)) - 1.0))


def _cx(x):
    return np.cos(0.5 * PI * (x + 1.0))


def _dcx(x):
    return -0.5 * PI * np.sin(0.5 * PI * (x + 1.0))


def _refl_psi(x, y):
    cx, cy = _cx(x), _cx(y)
    return 0.6 * cx + 0.5 * cy + 0.3 * (2 * cx**2 - 1) * cy


def _refl_grad(x, y):
    cx, cy = _cx(x), _cx(y)
    return np.stack([(0.6 + 1.2 * cx * cy) * _dcx(x), (0.5 + 0.3 * (2 * cx**2 - 1)) * _dcx(y)], axis=-1)


def _refl_p0(x, y):
    return np.exp(-4.0 * (_cx(x) - 0.3) ** 2 - 4.0 * (_cx(y) + 0.4) ** 2)


CASES = {
    "trig": {"psi": _trig_psi, "grad": _trig_grad, "p0": _trig_p0, "beta": 4.0, "boundary": "periodic",
             "lower": [-1.0, -1.0], "upper": [1.0, 1.0]},
    "refl": {"psi": _refl_psi, "grad": _refl_grad, "p0": _refl_p0, "beta": 4.0, "boundary": "reflecting",
             "lower": [-1.0, -1.0], "upper": [1.0, 1.0]},
}
