"""Virtual environments for the peer tools (never dependencies of fpirl itself).

Every peer gets its own environment under a cache directory, made from the requirement files in
``benchmarks/peers/requirements/`` (installed in order, one ``pip install -r`` each). An
environment is reused while a stamp file matches the hash of its requirement files and the
interpreter version; otherwise it is rebuilt. A failed install raises :class:`PeerInstallError`
with one line naming the peer and pip's error.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements"
DEFAULT_CACHE = HERE / ".venvs"


class PeerInstallError(RuntimeError):
    """A peer tool could not be installed (message: one line, peer and pip's error)."""


@dataclass(frozen=True)
class Peer:
    key: str
    name: str  # as on PyPI
    requirements: tuple[str, ...]  # files in REQUIREMENTS, installed in this order
    check: str  # python statement that must succeed in the environment


PEERS = {
    "sfi": Peer("sfi", "StochasticForceInference", ("sfi.txt",), "import SFI"),
    "pysindy": Peer("pysindy", "pysindy", ("pysindy.txt",), "import pysindy"),
    "kramersmoyal": Peer("kramersmoyal", "kramersmoyal", ("kramersmoyal.txt",), "import kramersmoyal"),
    "fplanck": Peer("fplanck", "fplanck", ("fplanck.txt",), "import fplanck"),
    "imitation": Peer(
        "imitation",
        "imitation",
        ("imitation-torch.txt", "imitation.txt"),
        "import imitation.algorithms.mce_irl, torch",
    ),
}


def _stamp(peer: Peer) -> str:
    h = hashlib.sha256(sys.version.encode())
    for name in peer.requirements:
        h.update(name.encode())
        h.update((REQUIREMENTS / name).read_bytes())
    return h.hexdigest()


def _python(env: Path) -> Path:
    return env / "bin" / "python"


def _pip_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    line = errors[-1] if errors else (lines[-1] if lines else "no output")
    return line[:300]


def ensure_env(key: str, cache: Path = DEFAULT_CACHE, log=print) -> Path:
    """Python interpreter of the environment of peer ``key``, building it when needed.

    Raises
    ------
    PeerInstallError
        When venv creation, ``pip install`` or the import check fails.
    """
    peer = PEERS[key]
    env = Path(cache) / key
    stamp_file = env / ".fpirl-peer-stamp"
    stamp = _stamp(peer)
    if stamp_file.exists() and stamp_file.read_text().strip() == stamp and _python(env).exists():
        return _python(env)
    if env.exists():
        shutil.rmtree(env)
    env.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    log(f"[peers] installing {peer.name} into {env} (once; reused while its requirements are unchanged)")
    proc = subprocess.run([sys.executable, "-m", "venv", str(env)], capture_output=True, text=True, check=False)
    if proc.returncode:
        raise PeerInstallError(f"{peer.name}: could not create a virtual environment: {_pip_error(proc.stderr)}")
    py = str(_python(env))
    for req in peer.requirements:
        proc = subprocess.run(
            [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS / req)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode:
            (env / "pip-error.log").write_text(proc.stdout + proc.stderr)
            raise PeerInstallError(
                f"{peer.name} could not be installed (pip, {req}): {_pip_error(proc.stderr + proc.stdout)}"
            )
    proc = subprocess.run([py, "-c", peer.check], capture_output=True, text=True, check=False)
    if proc.returncode:
        raise PeerInstallError(f"{peer.name} installed but does not import: {_pip_error(proc.stderr)}")
    stamp_file.write_text(stamp + "\n")
    log(f"[peers] {peer.name} installed in {time.perf_counter() - t0:.0f} s")
    return _python(env)


def versions(python: Path, packages: list[str]) -> dict[str, str]:
    """Installed versions of ``packages`` in the environment of ``python``."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n        out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError:\n        out[p] = 'missing'\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([str(python), "-c", code, *packages], capture_output=True, text=True, check=False)
    if proc.returncode:
        return {p: "?" for p in packages}
    import json

    return json.loads(proc.stdout)
