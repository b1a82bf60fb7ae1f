"""Modified Mountain Car benchmark (issue 5): numbers and timings of ``fpirl benchmark mountaincar``.

Run:  .venv/bin/python benchmarks/bench_mountain_car.py [--quick] [--elements 10,20,30,40,50] [-o DIR]

Prints, and writes to ``DIR/bench_mountain_car.json``:
* soft Q-iteration: grid, iterations, seconds; gymnasium goal rate of the Boltzmann policy;
* Hermite fit error of Q; scaling, beta, dt and KL(p_50 || p_0);
* per N: relative errors of psi and d psi/d s (FP and MDP-map data), KL ratio, fit seconds;
* the acceptance checks (errors decrease over N on FP data, KL ratio < 10% at the finest N,
  N = 50 fit <= 60 s, whole benchmark <= 15 min).

A second run with the same DIR reuses the cached soft Q and FP data (delete DIR/cache for a
cold run).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--elements", default=None, help="comma-separated N list")
    ap.add_argument("-o", "--output", default=None, help="output directory (default: a temporary one)")
    args = ap.parse_args(argv)

    from fpirl.problems.experiment import json_default
    from fpirl.problems.mountain_car_report import run_mountaincar

    out = Path(args.output) if args.output else Path(tempfile.mkdtemp(prefix="fpirl-mc-"))
    elements = None if args.elements is None else [int(v) for v in args.elements.split(",")]
    t0 = time.perf_counter()
    s = run_mountaincar(out, elements=elements, quick=args.quick, progress=False, verbose=True)
    total = time.perf_counter() - t0
    mc = s["mountain_car"]
    Ns = s["elements"]
    per = s["per_N"]
    print()
    print(f"output: {out}")
    sq = mc["soft_q"]
    print(f"soft Q: {sq['n_position']}x{sq['n_velocity']}x{sq['n_action']}, alpha={sq['alpha']}, gamma={sq['gamma']}, "
          f"{sq['iterations']} iterations, {sq['solve_seconds']:.1f} s (solve), {sq['load_or_solve_seconds']:.1f} s (this run)")
    if mc.get("validation"):
        v = mc["validation"]
        print(f"gymnasium: {v['goals']}/{v['episodes']} goals, median {v['median_steps']:.0f} steps, "
              f"mean return {v['mean_return']:.1f}")
    f = mc["fit"]
    print(f"Hermite fit {f['hermite_elements']}: relative RMS error {100 * f['relative_error']:.1f}%")
    sc = mc["scaling"]
    print(f"psi range {sc['psi_range']}, beta {sc['beta']}, dt {sc['dt']}, steps {sc['steps']}; "
          f"KL(p_T || p_0) = {per[Ns[-1]]['fp']['kl_reference']:.3f} (N={Ns[-1]})")
    print("N | data | psi rel | dpsi/ds rel | KL ratio | fit s")
    for n in Ns:
        for k in ("fp", "mdp"):
            m = per[n][k]
            print(f"{n} | {k} | {100 * m['psi_relative_error']:.2f}% | {100 * m['grad_relative_error']:.2f}% | "
                  f"{100 * m['kl_ratio']:.2f}% | {m['fit_seconds']:.1f}")
    for a in s["acceptance"]:
        print(f"[{'x' if a['passed'] else ' '}] {a['check']}: {a['value']}")
    fit_last = per[Ns[-1]]["fp"]["fit_seconds"]
    print(f"[{'x' if fit_last <= 60 else ' '}] N = {Ns[-1]} fit <= 60 s: {fit_last:.1f} s")
    print(f"[{'x' if total <= 900 else ' '}] whole benchmark <= 15 min: {total:.1f} s")
    print("timings:", {k: round(v, 1) for k, v in s["timings"].items()})
    (out / "bench_mountain_car.json").write_text(json.dumps(
        {"total_seconds": total, "summary": s}, indent=1, default=json_default))
    return 0


if __name__ == "__main__":
    sys.exit(main())
