#!/usr/bin/env python3
"""The GPU table of docs/performance.md ("On the GPU"): runs gpu_bench (metagrad, the hand-written
kernel, raw cuBLAS, the copy rate) and the same workloads in PyTorch, eager and torch.compile, in
one run on one GPU; prints a Markdown table of medians (CUDA events) and ratios.

    python3 benchmarks/gpu/compare.py build/gpu/benchmarks/gpu/gpu_bench [--rounds 7]
"""
import argparse
import json
import subprocess
import sys


def median_ms(torch, fn, reps, rounds):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    times.sort()
    return times[len(times) // 2]


def torch_rows(rounds):
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    out = {}
    dev = "cuda"

    def loss_grad(x):
        u = torch.sin(x) * x + torch.exp(-x * x)
        loss = (u * u).sum()
        return torch.autograd.grad(loss, [x])

    def chain_values(x):  # the static workload: value and gradient, no graph kept
        s, c = torch.sin(x), torch.cos(x)
        e = torch.exp(-x * x)
        u = s * x + e
        return (u * u).sum(), 2 * u * (c * x + s - 2 * x * e)

    compiled = torch.compile(chain_values)
    for n, name in ((1 << 20, "1M"), (1 << 26, "64M")):
        reps = 20 if n > (1 << 20) else 200
        x = torch.linspace(-1, 1, n, device=dev).requires_grad_()
        out[f"eager_chain/{name}"] = median_ms(torch, lambda: loss_grad(x), 5 if n > 1 << 20 else 50, rounds)
        xd = x.detach()
        out[f"torch_compile_values/{name}"] = median_ms(torch, lambda: compiled(xd), reps, rounds)
    torch.manual_seed(0)
    x = torch.randn(4096, 1024, device=dev, requires_grad=True)

    def rows():
        loss = torch.logsumexp(x, 1).mean() + (torch.softmax(x, 1) * x).sum()
        return torch.autograd.grad(loss, [x])

    out["rows"] = median_ms(torch, rows, 20, rounds)
    x1 = torch.full((1,), 0.5, device=dev, requires_grad=True)

    def per_op():
        y = x1
        for _ in range(50):
            y = torch.sin(y) * 1.0001
        return torch.autograd.grad(y.sum(), [x1])

    out["per_op_100"] = median_ms(torch, per_op, 20, rounds)
    xm = torch.randn(64, 784, device=dev)
    w1 = (torch.randn(784, 128, device=dev) * 0.05).requires_grad_()
    b1 = torch.zeros(128, device=dev, requires_grad=True)
    w2 = (torch.randn(128, 10, device=dev) * 0.1).requires_grad_()
    b2 = torch.zeros(10, device=dev, requires_grad=True)
    labels = torch.arange(64, device=dev) % 10
    params = [w1, b1, w2, b2]

    def mlp():
        h = torch.relu(xm @ w1 + b1)
        loss = torch.nn.functional.cross_entropy(h @ w2 + b2, labels)
        g = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, gp in zip(params, g):
                p.sub_(gp * 0.01)

    out["mlp_step"] = median_ms(torch, mlp, 50, rounds)
    a = torch.randn(4096, 4096, device=dev)
    b = torch.randn(4096, 4096, device=dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    out["matmul_4096"] = median_ms(torch, lambda: a @ b, 10, rounds)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpu_bench")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    proc = subprocess.run([args.gpu_bench, f"--rounds={args.rounds}"], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"gpu_bench failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    mg, device = {}, "?"
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        if "device" in rec:
            device = rec["device"]
        else:
            mg[rec["name"]] = rec
    th = torch_rows(args.rounds)

    def ms(d, k):
        v = d.get(k)
        return None if v is None else (v["ms"] if isinstance(v, dict) else v)

    def cell(v):
        return "—" if v is None else f"{v:.4f}"

    def ratio(a, b):
        return "—" if a is None or b is None else f"{a / b:.2f}x"

    print(f"GPU: {device}; medians of {args.rounds} rounds, milliseconds, float32\n")
    print("| workload | metagrad | reference | reference ms | metagrad / reference |")
    print("|---|---|---|---|---|")
    for sz in ("1M", "64M"):
        copy = mg.get(f"copy/{sz}")
        if copy:
            gbs = copy["bytes"] / (copy["ms"] * 1e-3) / 1e9
            print(f"| copy of x and g, {sz} | — | device copy ({gbs:.0f} GB/s) | {cell(copy['ms'])} | — |")
        s = ms(mg, f"static_value_and_grad/{sz}")
        for ref, key, d in (("hand fused kernel", f"hand_fused/{sz}", mg),
                            ("torch.compile (value and gradient)", f"torch_compile_values/{sz}", th)):
            r = ms(d, key)
            print(f"| static value_and_grad + sum, {sz} | {cell(s)} | {ref} | {cell(r)} | {ratio(s, r)} |")
        e = ms(mg, f"eager_chain/{sz}")
        r = ms(th, f"eager_chain/{sz}")
        print(f"| runtime eager chain, {sz} | {cell(e)} | torch eager | {cell(r)} | {ratio(e, r)} |")
    for key, label in (("rows", "rows [4096,1024]"), ("per_op_100", "100 ops on one element"),
                       ("mlp_step", "MLP step 64x784x128x10"),
                       ("mlp_step_onehot", "MLP step, one-hot cross-entropy"),
                       ("mlp_step_graph", "MLP step, one-hot, CUDA graph replay")):
        a, b = ms(mg, key), ms(th, "mlp_step" if key.startswith("mlp") else key)
        print(f"| {label} | {cell(a)} | torch eager | {cell(b)} | {ratio(a, b)} |")
    a = ms(mg, "matmul_4096")
    for ref, r in (("raw cublasSgemm", ms(mg, "cublas_sgemm_4096")), ("torch (TF32 off)", ms(th, "matmul_4096"))):
        print(f"| matmul 4096^3 f32 | {cell(a)} | {ref} | {cell(r)} | {ratio(a, r)} |")
    if not th:
        print("\n(PyTorch with CUDA is not importable here: the torch columns are empty.)")


if __name__ == "__main__":
    main()
