"""Run a worker script inside a peer's virtual environment and exchange arrays through ``.npz``.

The runner itself runs in fpirl's environment; each peer runs in its own (see ``_venvs``), in a
fresh process: ``python workers/<name>.py IN.npz OUT.npz``. ``IN.npz`` holds the arrays and a
JSON string ``params``; ``OUT.npz`` the worker's arrays and a JSON string ``info`` (timings,
settings, versions).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from _venvs import HERE, PeerInstallError, ensure_env

WORKERS = HERE / "workers"


class PeerRunError(RuntimeError):
    """A peer worker failed (message: one line with the peer and its last error line)."""


def call(peer: str, worker: str, params: dict, arrays: dict | None = None, *, cache=None, timeout=1800):
    """Run ``workers/<worker>.py`` in the environment of ``peer``; return ``(arrays, info)``."""
    kwargs = {} if cache is None else {"cache": Path(cache)}
    python = ensure_env(peer, **kwargs)
    with tempfile.TemporaryDirectory(prefix=f"fpirl-peer-{worker}-") as tmp:
        src, dst = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(src, params=np.array(json.dumps(params)), **(arrays or {}))
        env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        try:
            proc = subprocess.run(
                [str(python), str(WORKERS / f"{worker}.py"), str(src), str(dst)],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise PeerRunError(f"{peer}/{worker}: timed out after {timeout} s") from exc
        if proc.returncode or not dst.exists():
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            last = lines[-1] if lines else f"exit code {proc.returncode}"
            log = Path(tmp).parent / f"fpirl-peer-{worker}.log"
            log.write_text(proc.stdout + "\n" + proc.stderr)
            raise PeerRunError(f"{peer}/{worker} failed: {last.strip()[:300]} (full log: {log})")
        with np.load(dst, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files if k != "info"}
            info = json.loads(str(z["info"])) if "info" in z.files else {}
    return out, info


__all__ = ["PeerInstallError", "PeerRunError", "call"]
