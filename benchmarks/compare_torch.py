#!/usr/bin/python3
"""metagrad's runtime engine against torch on the CPU, workload by workload, in one run.

    benchmarks/compare_torch.py BUILD/benchmarks/bench_runtime_ops [--threads N] [--rounds R]
                                [--filter REGEX]

Each round runs the C++ benchmark program once (every workload of benchmarks/runtime_ops.cpp,
Google Benchmark's time per iteration) and then the same workloads in torch (the same names,
defined below), so that both sides see the same load on a shared machine. The table gives the
median over the rounds of each side's time per iteration and their ratio (metagrad / torch:
below 1 is faster than torch). Run it with Debian's python3-torch (/usr/bin/python3); without
torch it prints metagrad's times alone. Both sides use N threads (default 1): torch through
torch.set_num_threads, metagrad and OpenBLAS through OMP_NUM_THREADS and OPENBLAS_NUM_THREADS.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

torch = None  # imported by main(), after the thread counts are set in the environment


def torch_workloads():
    """name -> a function that prepares the workload and returns its timed body."""
    w = {}
    f32 = dict(dtype=torch.float32)

    def leaf(n, v, grad):
        return torch.full((n,), v, requires_grad=grad, **f32)

    for n in (1_000, 100_000, 1_000_000):
        def mul_(n=n):
            a = leaf(n, 1.5, False)
            return lambda: a.mul_(1.0)

        def add_(n=n):
            a, b = leaf(n, 1.5, False), leaf(n, 0.0, False)
            return lambda: a.add_(b)

        def zero_(n=n):
            a = leaf(n, 1.5, False)
            return lambda: a.zero_()

        def sgd_(n=n):
            p, q = leaf(n, 1.5, False), leaf(n, 0.0, False)
            return lambda: p.sub_(q * 0.01)

        def add(n=n):
            a, b = leaf(n, 1.5, False), leaf(n, 0.5, False)
            return lambda: a + b

        def exp(n=n):
            a = leaf(n, 0.5, False)
            return lambda: torch.exp(a)

        def mul_bwd(n=n):
            a, b = leaf(n, 1.5, True), leaf(n, 0.5, True)

            def run():
                (a * b).sum().backward()
                a.grad = None
                b.grad = None
            return run

        def tanh_bwd(n=n):
            a = leaf(n, 0.5, True)

            def run():
                torch.tanh(a).sum().backward()
                a.grad = None
            return run

        def sum_all(n=n):
            a = leaf(n, 0.5, False)
            return lambda: a.sum()

        s = str(n)
        w["inplace/mul_/" + s] = mul_
        w["inplace/add_/" + s] = add_
        w["inplace/zero_/" + s] = zero_
        w["inplace/sgd_/" + s] = sgd_
        w["fwd/add/" + s] = add
        w["fwd/exp/" + s] = exp
        w["fwdbwd/mul/" + s] = mul_bwd
        w["fwdbwd/tanh/" + s] = tanh_bwd
        w["fwd/sum/" + s] = sum_all

    def rows():
        torch.manual_seed(0)
        x = torch.randn(1024, 1024, requires_grad=True)

        def run():
            y = torch.logsumexp(x, 1).mean() + (torch.softmax(x, 1) * x).sum()
            y.backward()
            x.grad = None
        return run

    def sum_dim():
        x = torch.full((1024, 1024), 0.5, requires_grad=True)

        def run():
            x.sum(1).sum().backward()
            x.grad = None
        return run

    def ramp():  # row r: r, r + 1/1024, ... (distinct values)
        return (torch.arange(1024 * 1024, dtype=torch.float32) / 1024).reshape(1024, 1024)

    def max_dim():
        x = ramp().requires_grad_()

        def run():
            torch.max(x, 1).values.sum().backward()
            x.grad = None
        return run

    def topk8():
        x = ramp().requires_grad_()

        def run():
            torch.topk(x, 8, 1).values.sum().backward()
            x.grad = None
        return run

    def argmax():
        x = ramp()
        return lambda: torch.argmax(x, 1)

    def mlp_step(none=False):
        torch.manual_seed(1)
        w1 = (torch.randn(784, 128) * 0.05).requires_grad_()
        w2 = (torch.randn(128, 10) * 0.1).requires_grad_()
        x = torch.randn(64, 784)
        targets = torch.arange(64) % 10

        def run():
            h = torch.tanh(x @ w1)
            loss = torch.nn.functional.cross_entropy(h @ w2, targets)
            loss.backward()
            with torch.no_grad():
                w1.sub_(w1.grad * 0.01)
                w2.sub_(w2.grad * 0.01)
            for p in (w1, w2):  # gradients reset by zero_() or to None
                if none:
                    p.grad = None
                else:
                    p.grad.zero_()
        return run

    def chain():
        x = torch.full((1_000_000,), 0.5, requires_grad=True)

        def run():
            s = torch.sin(x) * x + torch.exp(-(x * x))
            (s * s).sum().backward()
            x.grad = None
        return run

    w["rows/softmax_logsumexp/1024x1024"] = rows
    w["rows/sum_dim/1024x1024"] = sum_dim
    w["rows/max_dim/1024x1024"] = max_dim
    w["rows/topk8/1024x1024"] = topk8
    w["rows/argmax/1024x1024"] = argmax
    w["mlp_step/64x784x128x10"] = mlp_step
    w["mlp_step_set_grad/64x784x128x10"] = lambda: mlp_step(none=True)
    w["chain/1000000"] = chain
    return w


def time_torch(prepare, budget=0.15):
    """Seconds per iteration: the mean over a loop of about `budget` seconds."""
    run = prepare()
    for _ in range(3):
        run()
    k, t = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(k):
            run()
        t = time.perf_counter() - start
        if t > budget / 4 or k >= 1 << 20:
            break
        k *= 4
    k = max(1, int(k * budget / max(t, 1e-9)))
    start = time.perf_counter()
    for _ in range(k):
        run()
    return (time.perf_counter() - start) / k


def run_metagrad(binary, regex, env):
    out = subprocess.run([binary, "--benchmark_format=json", "--benchmark_min_time=0.15",
                          "--benchmark_filter=" + regex], check=True, capture_output=True,
                         text=True, env=env).stdout
    times = {}
    for b in json.loads(out)["benchmarks"]:
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        times[b["name"]] = b["real_time"] * scale
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("binary")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--filter", default=".")
    a = p.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.threads)  # OpenBLAS reads it when torch loads it
    env = dict(os.environ)
    global torch
    try:
        import torch as t
        torch = t
    except ImportError:  # metagrad's side alone
        pass
    ours, theirs = {}, {}
    workloads = torch_workloads() if torch else {}
    if torch:
        torch.set_num_threads(a.threads)
    for _ in range(a.rounds):
        for name, t in run_metagrad(a.binary, a.filter, env).items():
            ours.setdefault(name, []).append(t)
        for name, prepare in workloads.items():
            if re.search(a.filter, name):
                theirs.setdefault(name, []).append(time_torch(prepare))
    version = torch.__version__ if torch else "not importable"
    print(f"threads {a.threads}, {a.rounds} rounds, medians; torch {version}")
    print(f"{'workload':40} {'metagrad':>12} {'torch':>12} {'ratio':>7}")
    ratios = []
    for name in ours:
        m = statistics.median(ours[name])
        line = f"{name:40} {m * 1e6:10.1f}us"
        if name in theirs:
            t = statistics.median(theirs[name])
            ratios.append((m / t, name))
            line += f" {t * 1e6:10.1f}us {m / t:7.2f}"
        print(line)
    if ratios:
        print("worst ratios: " + ", ".join(f"{n} {r:.2f}" for r, n in sorted(ratios)[-5:][::-1]))
    missing = [n for n in workloads if re.search(a.filter, n) and n not in ours]
    if missing:
        sys.exit("compare_torch.py: no metagrad benchmark for " + ", ".join(missing))


if __name__ == "__main__":
    main()
