#!/usr/bin/env python3
"""What a file that includes a header but calls nothing still instantiates, and why.

A non-template inline function is compiled in every file that includes it, called or not, and so
is every template it names: std::vector<T>::push_back, std::stable_sort, a kernel per dtype.
Those instantiations are most of what including the runtime engine costs (docs/performance.md,
"Cheap headers"). This script finds them: it compiles a unit at -O0 with
-fkeep-inline-functions, so that the object holds every inline function and every template
instantiated for them, reads the call graph from the relocations, and lists the non-template
functions ("roots") by the template code reachable from them through templates only.

    benchmarks/compile_time/eager_roots.py                      # umbrella.cpp, 40 roots
    benchmarks/compile_time/eager_roots.py -n 100 -f mg:: some_unit.cpp

Columns: bytes of template code only that root reaches (what making it a template in name only,
`template <int = 0>`, saves), bytes it reaches in all, its own size, its name. The first line
gives the total: the template code reachable from non-template functions, against all template
code in the object. Sizes are -O0 code bytes, a proxy for the compiler's work (the total follows
GCC's -ftime-report memory within a few percent).
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=True).stdout


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("unit", nargs="?", default=os.path.join(here, "umbrella.cpp"))
    ap.add_argument("-n", type=int, default=40, help="roots to list")
    ap.add_argument("-f", default="", help="list only roots whose name contains this")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "unit.o")
        subprocess.run([a.cxx, "-std=c++20", "-O0", "-fkeep-inline-functions", "-DXTENSOR_USE_XSIMD",
                        "-I" + os.path.join(root, "include"), "-I" + os.path.join(root, "detail"),
                        "-c", a.unit, "-o", obj], check=True)
        sizes = {}
        for line in run(["nm", "-S", "--defined-only", obj]).splitlines():
            p = line.split()
            if len(p) == 4 and p[2] in "TtWw":
                sizes[p[3]] = int(p[1], 16)
        calls = collections.defaultdict(set)
        current = None
        for line in run(["objdump", "-dr", "--no-show-raw-insn", obj]).splitlines():
            m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
            if m:
                current = m.group(1)
                continue
            m = re.search(r"R_X86_64_(?:PLT32|PC32|32S?|64)\s+(\S+?)(?:[-+]0x[0-9a-f]+)?$", line)
            if m and current and m.group(1) in sizes and m.group(1) != current:
                calls[current].add(m.group(1))

    names = list(sizes)
    demangled = dict(zip(names, run(["c++filt"], "\n".join(names)).splitlines()))

    def qualified(n):  # the name without return type and parameters
        d = demangled[n]
        d = re.sub(r"^(?:decltype\(auto\)|auto) ", "", d)
        depth, out = 0, []
        for c in d:  # cut at the first '(' outside template brackets
            if c == "<":
                depth += 1
            elif c == ">":
                depth -= 1
            elif c == "(" and depth == 0 and not "".join(out).endswith("operator"):
                break
            out.append(c)
        return "".join(out)

    def is_template(n):
        q = qualified(n).replace("operator<<", "").replace("operator<", "")
        return "<" in q

    roots = [n for n in names if not is_template(n)]
    reach = {}
    for r in roots:
        seen, stack = set(), [c for c in calls[r] if is_template(c)]
        while stack:
            x = stack.pop()
            if x not in seen:
                seen.add(x)
                stack.extend(c for c in calls[x] if is_template(c) and c not in seen)
        reach[r] = seen
    owners = collections.Counter(t for r in roots for t in reach[r])
    reachable = set().union(*reach.values()) if reach else set()
    all_templates = sum(sizes[n] for n in names if is_template(n))
    print(f"template code reachable from non-template functions: "
          f"{sum(sizes[t] for t in reachable)} bytes in {len(reachable)} functions "
          f"(all template code: {all_templates} bytes)")
    rows = sorted(((sum(sizes[t] for t in reach[r] if owners[t] == 1),
                    sum(sizes[t] for t in reach[r]), r) for r in roots), reverse=True)
    shown = 0
    for own, total, r in rows:
        if shown == a.n:
            break
        if a.f in demangled[r]:
            print(f"{own:8d} {total:8d} {sizes[r]:6d}  {demangled[r][:160]}")
            shown += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
