"""Worker-side half of ``_bridge``: read ``IN.npz`` (arrays + JSON params), write ``OUT.npz``.

Workers run in the peer's own environment: they may import numpy and the peer only.
"""

import json
import sys

import numpy as np


def load():
    """``(params, arrays)`` from the input file named on the command line."""
    with np.load(sys.argv[1], allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "params"}
        params = json.loads(str(z["params"]))
    return params, arrays


def save(info: dict, **arrays):
    """Write the output file named on the command line."""
    np.savez(sys.argv[2], info=np.array(json.dumps(info)), **arrays)


def version(dist: str) -> str:
    from importlib.metadata import version as v

    return v(dist)
