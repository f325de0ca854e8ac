#!/usr/bin/python3
"""The Rosenbrock Hessian of benchmarks/hessian.cpp in torch, on one thread.

    benchmarks/hessian_torch.py [BUILD/benchmarks/bench_hessian] [--rounds R]

Times torch.autograd.functional.hessian(f, x, vectorize=True) at x_0 = (0.8, ..., 0.8) in 100
dimensions, and the same Newton solve as hessian.cpp (torch.linalg.solve for the step, until
|g| < 1e-10). Each round runs the C++ benchmark program once, then torch, so that both see the
same load; the table gives the medians over the rounds and the ratios (metagrad / torch). Run it
with Debian's python3-torch (/usr/bin/python3).
"""
import argparse
import json
import statistics
import subprocess
import time

import torch

N = 100


def rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def start():
    return torch.full((N,), 0.8, dtype=torch.float64)


def hessian(x):
    return torch.autograd.functional.hessian(rosenbrock, x, vectorize=True)


def newton():
    x = start()
    for it in range(100):
        xg = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(rosenbrock(xg), xg)
        if g.norm() < 1e-10:
            return it
        x = x - torch.linalg.solve(hessian(x), g)
    return 100


def per_call(fn, seconds=0.5):
    fn()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return (time.perf_counter() - t0) / calls


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bench", nargs="?")
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(1)
    x = start()
    rows = {"hessian": ([], []), "newton": ([], [])}
    for _ in range(a.rounds):
        if a.bench:
            out = subprocess.run([a.bench, "--benchmark_format=json", "--benchmark_filter=metagrad"],
                                 check=True, capture_output=True, text=True, env={
                                     "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}).stdout
            for b in json.loads(out)["benchmarks"]:
                scale = {"us": 1e-6, "ms": 1e-3, "ns": 1e-9}[b["time_unit"]]
                key = "hessian" if "hessian" in b["name"] else "newton"
                rows[key][0].append(b["real_time"] * scale)
        rows["hessian"][1].append(per_call(lambda: hessian(x)))
        rows["newton"][1].append(per_call(newton, 2.0))
    print(f"newton steps in torch: {newton()}")
    print(f"{'workload':10} {'metagrad':>12} {'torch':>12} {'ratio':>7}")
    for k, (m, t) in rows.items():
        tm = statistics.median(t)
        if m:
            mm = statistics.median(m)
            print(f"{k:10} {mm * 1e6:10.1f}us {tm * 1e6:10.1f}us {mm / tm:7.3f}")
        else:
            print(f"{k:10} {'':>12} {tm * 1e6:10.1f}us")


if __name__ == "__main__":
    main()
