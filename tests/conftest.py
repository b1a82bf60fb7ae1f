import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _strict_floating_point():
    old = np.seterr(all="raise", under="ignore")  # underflow in exp(-beta psi) is benign
    yield
    np.seterr(**old)


@pytest.fixture
def rng():
    return np.random.default_rng(20261125)
