#!/usr/bin/python3
"""metagrad's runtime engine against torch on the CPU, workload by workload, in one run.

    benchmarks/compare_torch.py BUILD/benchmarks/bench_runtime_ops [--threads N] [--rounds R]
                                [--filter REGEX] [--json FILE]

Each round runs the C++ benchmark program once (every workload of benchmarks/runtime_ops.cpp,
Google Benchmark's time per iteration) and then the same workloads in torch (the same names,
defined below), so that both sides see the same load on a shared machine. The table gives the
median over the rounds of each side's time per iteration and their ratio (metagrad / torch:
below 1 is faster than torch). Run it with Debian's python3-torch (/usr/bin/python3); without
torch it prints metagrad's times alone. Both sides use N threads (default 1): torch through
torch.set_num_threads, metagrad and OpenBLAS through OMP_NUM_THREADS and OPENBLAS_NUM_THREADS.
--json writes the medians and ratios for benchmarks/plot_ratios.py.
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


DOMAINS = {"sym": (-1.0, 1.0), "pos": (0.5, 1.5), "near_one": (0.999, 1.001)}


def coverage(w, n):
    """The op coverage of benchmarks/runtime_ops.cpp (add_coverage), in torch."""
    F = torch.nn.functional

    def ramp(d, reversed_=False, m=None):
        lo, hi = DOMAINS[d]
        if reversed_:
            lo, hi = hi, lo
        return torch.linspace(lo, hi, m or n, dtype=torch.float32)

    unaries = {
        "neg": ("sym", lambda x: -x), "exp": ("sym", torch.exp), "log": ("pos", torch.log),
        "log1p": ("pos", torch.log1p), "expm1": ("sym", torch.expm1),
        "sqrt": ("pos", torch.sqrt), "rsqrt": ("pos", torch.rsqrt), "abs": ("sym", torch.abs),
        "sin": ("sym", torch.sin), "cos": ("sym", torch.cos), "tan": ("sym", torch.tan),
        "tanh": ("sym", torch.tanh), "sigmoid": ("sym", torch.sigmoid),
        "relu": ("sym", torch.relu), "erf": ("sym", torch.erf),
        "square": ("sym", torch.square), "reciprocal": ("pos", torch.reciprocal),
        "softplus": ("sym", F.softplus), "clamp": ("sym", lambda x: torch.clamp(x, -0.5, 0.5)),
        "pow_number": ("pos", lambda x: torch.pow(x, 2.5)),
    }
    binaries = {
        "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
        "div": lambda x, y: x / y, "pow": torch.pow, "maximum": torch.maximum,
        "minimum": torch.minimum, "atan2": torch.atan2,
        "where": lambda x, y: torch.where(x > y, x, y),
    }
    comparisons = {
        "gt": lambda x, y: x > y, "lt": lambda x, y: x < y, "ge": lambda x, y: x >= y,
        "le": lambda x, y: x <= y, "eq": lambda x, y: x == y, "ne": lambda x, y: x != y,
    }
    reductions = {
        "sum": ("sym", torch.sum, lambda x, d: torch.sum(x, d)),
        "prod": ("near_one", torch.prod, lambda x, d: torch.prod(x, d)),
        "amax": ("sym", lambda x: torch.amax(x, 0), lambda x, d: torch.amax(x, d)),
        "amin": ("sym", lambda x: torch.amin(x, 0), lambda x, d: torch.amin(x, d)),
        "mean": ("sym", torch.mean, lambda x, d: torch.mean(x, d)),
        "var": ("sym", torch.var, lambda x, d: torch.var(x, d)),
        "norm": ("sym", torch.linalg.vector_norm, lambda x, d: torch.linalg.vector_norm(x, dim=d)),
        "logsumexp": ("sym", lambda x: torch.logsumexp(x, 0), lambda x, d: torch.logsumexp(x, d)),
    }
    in_places = {
        "add_": lambda a, b: a.add_(b), "sub_": lambda a, b: a.sub_(b),
        "mul_": lambda a, b: a.mul_(1.0), "div_": lambda a, b: a.div_(1.0),
        "pow_": lambda a, b: a.pow_(2.0), "clamp_": lambda a, b: a.clamp_(0.75, 1.25),
        "copy_": lambda a, b: a.copy_(b), "fill_": lambda a, b: a.fill_(0.5),
        "zero_": lambda a, b: a.zero_(), "neg_": lambda a, b: a.neg_(),
        "abs_": lambda a, b: a.abs_(), "exp_": lambda a, b: a.exp_(),
        "log_": lambda a, b: a.log_(), "sqrt_": lambda a, b: a.sqrt_(),
        "sin_": lambda a, b: a.sin_(), "cos_": lambda a, b: a.cos_(),
        "tanh_": lambda a, b: a.tanh_(), "sigmoid_": lambda a, b: a.sigmoid_(),
        "relu_": lambda a, b: a.relu_(),
    }
    s = "/" + str(n)
    rows = n // 1000

    def fwd(make, f):
        def prepare():
            args = make(False)
            return lambda: f(*args)
        return prepare

    def fwdbwd(make, f):
        def prepare():
            args = make(True)

            def run():
                f(*args).sum().backward()
                for a in args:
                    a.grad = None
            return run
        return prepare

    for name, (d, f) in unaries.items():
        make = (lambda d: lambda g: (ramp(d).requires_grad_(g),))(d)
        w["fwd/" + name + s] = fwd(make, f)
        w["fwdbwd/" + name + s] = fwdbwd(make, f)

    def two(g):
        return ramp("pos").requires_grad_(g), ramp("pos", True).requires_grad_(g)
    for name, f in binaries.items():
        w["fwd/" + name + s] = fwd(two, f)
        w["fwdbwd/" + name + s] = fwdbwd(two, f)
    for name, f in comparisons.items():
        w["fwd/" + name + s] = fwd(two, f)

    def matrix_and_row(g):
        return (ramp("pos", m=rows * 1000).reshape(rows, 1000).requires_grad_(g),
                ramp("pos", True, m=1000).requires_grad_(g))
    for name in ("add", "mul"):
        w["fwd/bcast_" + name + s] = fwd(matrix_and_row, binaries[name])
        w["fwdbwd/bcast_" + name + s] = fwdbwd(matrix_and_row, binaries[name])
    for name, (d, f_all, f_dim) in reductions.items():
        vec = (lambda d: lambda g: (ramp(d).requires_grad_(g),))(d)
        mat = (lambda d: lambda g: (ramp(d, m=rows * 1000).reshape(rows, 1000)
                                    .requires_grad_(g),))(d)
        along = (lambda f_dim: lambda x: f_dim(x, 1))(f_dim)
        w["fwd/" + name + s] = fwd(vec, f_all)
        w["fwdbwd/" + name + s] = fwdbwd(vec, f_all)
        w["fwd/" + name + "_dim" + s] = fwd(mat, along)
        w["fwdbwd/" + name + "_dim" + s] = fwdbwd(mat, along)
    for name, f in in_places.items():
        w["inplace/" + name + s] = fwd(lambda g: (ramp("pos"), ramp("pos", True)), f)


def torch_workloads():
    """name -> a function that prepares the workload and returns its timed body."""
    w = {}
    f32 = dict(dtype=torch.float32)

    def leaf(n, v, grad):
        return torch.full((n,), v, requires_grad=grad, **f32)

    for n in (1_000, 100_000, 1_000_000):
        coverage(w, n)

        def sgd_(n=n):
            p, q = leaf(n, 1.5, False), leaf(n, 0.0, False)
            return lambda: p.sub_(q * 0.01)
        w["inplace/sgd_/" + str(n)] = sgd_

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
    p.add_argument("--json", help="write the medians and ratios to this file")
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
    ratios, rows = [], {}
    for name in ours:
        m = statistics.median(ours[name])
        rows[name] = {"metagrad_s": m}
        line = f"{name:40} {m * 1e6:10.1f}us"
        if name in theirs:
            t = statistics.median(theirs[name])
            ratios.append((m / t, name))
            rows[name].update(torch_s=t, ratio=m / t)
            line += f" {t * 1e6:10.1f}us {m / t:7.2f}"
        print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "rounds": a.rounds, "torch": version,
                       "workloads": rows}, f, indent=1)
    if ratios:
        print("worst ratios: " + ", ".join(f"{n} {r:.2f}" for r, n in sorted(ratios)[-5:][::-1]))
    missing = [n for n in workloads if re.search(a.filter, n) and n not in ours]
    if missing:
        sys.exit("compare_torch.py: no metagrad benchmark for " + ", ".join(missing))


if __name__ == "__main__":
    main()
