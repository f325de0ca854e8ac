#!/usr/bin/python3
"""The op coverage of benchmarks/runtime_ops.cpp as a picture: metagrad / torch per op and size.

    benchmarks/plot_ratios.py OUT.svg RUN.json [RUN.json ...]

Each RUN.json is what `benchmarks/compare_torch.py --json` wrote (one thread count each). The
picture has one row per op and, for each run, one column per workload kind (fwd, fwdbwd,
inplace) and size (1e3, 1e5, 1e6); a cell shows the ratio, coloured green below 1 (metagrad
faster), red above. It is plain SVG, written without plotting libraries. It also prints the five
worst ratios of each run.
"""
import json
import math
import re
import sys

SIZES = ("1000", "100000", "1000000")
SIZE_LABEL = {"1000": "1e3", "100000": "1e5", "1000000": "1e6"}
KINDS = ("fwd", "fwdbwd", "inplace")


def colour(r):
    """Green (0.25x or faster) through white (1x) to red (4x or slower)."""
    t = max(-1.0, min(1.0, math.log(r, 4)))
    if t < 0:
        g = 1 + t * 0.55
        return f"rgb({int(255 * (1 + t * 0.7))},{int(255 * (1 + t * 0.15))},{int(255 * g)})"
    return f"rgb(255,{int(255 * (1 - t * 0.6))},{int(255 * (1 - t * 0.6))})"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, runs = sys.argv[1], [json.load(open(p)) for p in sys.argv[2:]]
    pattern = re.compile(r"^(fwd|fwdbwd|inplace)/([a-z0-9_]+)/(\d+)$")
    ops = []  # in the benchmark's order
    cells = []  # per run: {(kind, op, size): ratio}
    for run in runs:
        c = {}
        for name, row in run["workloads"].items():
            m = pattern.match(name)
            if not m or "ratio" not in row:
                continue
            kind, op, size = m.groups()
            key = ("inplace" if kind == "inplace" else "") + op
            if key not in ops:
                ops.append(key)
            c[(kind, op, size)] = row["ratio"]
        cells.append(c)
        worst = sorted(((r, "/".join(k)) for k, r in c.items()), reverse=True)[:5]
        print(f"threads {run['threads']}: worst " + ", ".join(f"{n} {r:.2f}" for r, n in worst))
    columns = []  # (run index, kind, size)
    for i in range(len(runs)):
        for kind in KINDS:
            for size in SIZES:
                if any(k[0] == kind and k[2] == size for k in cells[i]):
                    columns.append((i, kind, size))
    label_w, cell_w, cell_h, head_h = 120, 38, 15, 48
    width = label_w + cell_w * len(columns) + 10
    height = head_h + cell_h * len(ops) + 30
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="9">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for j, (i, kind, size) in enumerate(columns):
        x = label_w + j * cell_w + cell_w / 2
        if size == SIZES[0]:
            svg.append(f'<text x="{x + cell_w}" y="{head_h - 26}" text-anchor="middle" '
                       f'font-weight="bold">{kind}, {runs[i]["threads"]} thr</text>')
        svg.append(f'<text x="{x}" y="{head_h - 8}" text-anchor="middle">{SIZE_LABEL[size]}</text>')
    for r, key in enumerate(ops):
        inplace = key.startswith("inplace")
        op = key[len("inplace"):] if inplace else key
        y = head_h + r * cell_h
        svg.append(f'<text x="{label_w - 4}" y="{y + cell_h - 4}" text-anchor="end">{op}</text>')
        for j, (i, kind, size) in enumerate(columns):
            if (kind == "inplace") != inplace or (kind, op, size) not in cells[i]:
                continue
            ratio = cells[i][(kind, op, size)]
            x = label_w + j * cell_w
            svg.append(f'<rect x="{x}" y="{y}" width="{cell_w - 1}" height="{cell_h - 1}" '
                       f'fill="{colour(ratio)}"/>')
            svg.append(f'<text x="{x + cell_w / 2}" y="{y + cell_h - 4}" '
                       f'text-anchor="middle">{ratio:.2f}</text>')
    torch_version = runs[0].get("torch", "?")
    svg.append(f'<text x="4" y="{height - 10}">metagrad time / torch {torch_version} time, '
               'float32, medians; green: metagrad faster</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
