"""fpirl side by side with the tools a user would pick instead (one command, one machine, same data).

Run (in fpirl's environment; the peers get their own virtual environments under ``--cache``)::

    python benchmarks/peers/run.py -o DIR [--quick] [--parts tracks,pde,irl,forward,assembly]

Prints one table and writes ``DIR/peers.md``, ``DIR/peers.json`` and figures ``DIR/peers_*.png``.
Peers (pinned in ``benchmarks/peers/requirements/``): StochasticForceInference, pysindy,
kramersmoyal, fplanck, imitation (+ torch, CPU wheel). None of them is a dependency of fpirl.
A peer that cannot be installed stops the run before any computation with one line naming it and
pip's error (exit status 1).
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "workers")]

from _venvs import DEFAULT_CACHE, PEERS, PeerInstallError, ensure_env, versions

PARTS = ("tracks", "pde", "irl", "forward", "assembly", "transfer")
NEEDS = {"tracks": ("sfi", "pysindy", "kramersmoyal"), "pde": ("pysindy",), "irl": ("imitation",), "transfer": ("imitation",),
         "forward": ("fplanck",), "assembly": ()}
DISTS = {"sfi": ["StochasticForceInference", "jax"], "pysindy": ["pysindy", "scikit-learn"],
         "kramersmoyal": ["kramersmoyal"], "fplanck": ["fplanck", "numpy"],
         "imitation": ["imitation", "torch", "gymnasium", "stable-baselines3"]}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--outdir", required=True, help="output directory (created)")
    ap.add_argument("--quick", action="store_true", help="smaller problems (a pipeline check, minutes)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="where the peers' virtual environments live")
    ap.add_argument("--seed", type=int, default=2026, help="seed of every random draw")
    return ap


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        print(f"peers: error: unknown part(s) {', '.join(bad)} (choose from {', '.join(PARTS)})", file=sys.stderr)
        return 2
    outdir = Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    cache = Path(args.cache)
    t_start = time.perf_counter()
    # 1. every peer this run needs, installed (or reused) before any computation
    env_versions = {}
    t0 = time.perf_counter()
    for key in sorted({k for p in parts for k in NEEDS[p]}):
        try:
            py = ensure_env(key, cache)
        except PeerInstallError as exc:
            print(f"peers: error: {exc}", file=sys.stderr)
            return 1
        env_versions[PEERS[key].name] = versions(py, DISTS[key])
    t_install = time.perf_counter() - t0
    print(f"[peers] environments ready in {t_install:.0f} s: " + "; ".join(
        ", ".join(f"{k} {v}" for k, v in d.items()) for d in env_versions.values()))

    import numpy as np  # noqa: F401  (fpirl's environment from here on)
    import report
    from _bridge import PeerRunError

    results = {"quick": args.quick, "seed": args.seed, "versions": env_versions, "parts": {},
               "machine": {"python": platform.python_version(), "cpus": _cpu_count(), "load_start": _load()}}
    for part in parts:
        t0 = time.perf_counter()
        print(f"[peers] part {part} ...")
        try:
            res = _run_part(part, args, cache)
        except PeerRunError as exc:
            print(f"peers: error: {exc}", file=sys.stderr)
            return 1
        res["part_wall_s"] = time.perf_counter() - t0
        results["parts"][part] = res
        print(f"[peers] part {part} done in {res['part_wall_s']:.0f} s")
    results["machine"]["load_end"] = _load()
    results["total_wall_s"] = time.perf_counter() - t_start
    results["install_wall_s"] = t_install
    results["command"] = "python benchmarks/peers/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(report.table(results))
    report.write(results, outdir)
    print(f"[peers] wrote {outdir / 'peers.md'} (total {results['total_wall_s']:.0f} s)")
    return 0


def _run_part(part: str, args, cache) -> dict:
    if part == "transfer":
        import part_transfer

        return part_transfer.run(args.quick, cache, seed=args.seed)
    if part == "forward":
        import part_forward

        res = part_forward.run(args.quick, cache)
    elif part == "assembly":
        import part_assembly

        res = part_assembly.run(args.quick)
    elif part == "pde":
        import part_pde

        res = part_pde.run(args.quick, cache, seed=args.seed)
    elif part == "tracks":
        import part_tracks

        res = part_tracks.run(args.quick, cache, seed=args.seed)
    else:
        import part_irl

        res = part_irl.run(args.quick, cache, seed=args.seed)
    return res


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("peers: interrupted", file=sys.stderr)
        sys.exit(130)
    except subprocess.SubprocessError as exc:  # pragma: no cover
        print(f"peers: error: {exc}", file=sys.stderr)
        sys.exit(1)
