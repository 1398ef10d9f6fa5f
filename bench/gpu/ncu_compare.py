#!/usr/bin/env python3
"""Agreement of medprof's metrics layer with Nsight Compute (issue: CUPTI profiling).

Two modes:
  ncu_compare.py regex RUN.jsonl [--top N] [--demangled]
      prints an ncu --kernel-name regex matching the function names of the run's top-N kernels
      by trace time (the kernels to profile with ncu). --demangled: a narrower one for
      --kernel-name-base demangled, from the identifiers of each whole name outside parameter
      lists (the two demanglers differ there), so other instantiations of the same function
      (every vectorized_elementwise_kernel) are not profiled too.
  ncu_compare.py covered RUN.jsonl NCU.csv [--top N] [--steps S]
      exit 0 when ncu profiled every one of the top-N kernels with its grid in each of S steps.
  ncu_compare.py compare RUN.jsonl NCU.csv [--top N] [--steps S]
      compares, for the run's top-N kernels, the worker's range-profiler values (scope
      kernel:<name>: per metric the median over launch.samples steps of the kernel's first launch
      with its dominant grid; 1 step when the run does not say) with ncu's values for the same
      kernel and grid (ncu --csv --page raw --print-kernel-base demangled over S measured steps of
      the worker): the median over the same launch in as many of ncu's steps, metric by metric.
      A kernel and grid can serve several problem sizes in one step (GroupNorm's statistics
      kernel: 32 blocks at every level), so the launch is matched by position in its step, never
      pooled. Agreement: within 5 % relative, or 2 points for percentages. Exit 0 when every
      compared value agrees.

RUN.jsonl is `medprof-worker --decode run.pb`.
"""
import argparse
import csv
import io
import json
import re
import statistics
import sys

# medprof name -> (Perfworks metric as ncu names it, is a percentage)
METRICS = {
    "duration_ns": ("gpu__time_duration.sum", False),
    "sm_cycles": ("sm__cycles_elapsed.avg", False),
    "warp_instructions": ("smsp__inst_executed.sum", False),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct", True),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct", True),
    "dram_throughput_pct": ("dram__throughput.avg.pct_of_peak_sustained_elapsed", True),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", True),
    "tensor_pipe_pct": ("sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active", True),
    "fma_pipe_pct": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", True),
}
# ncu units -> factor to medprof's units (ns, cycles, inst, %)
UNIT = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "cycle": 1.0, "inst": 1.0,
        "%": 1.0, "": 1.0, "warp": 1.0, "Kinst": 1e3, "Minst": 1e6, "Ginst": 1e9, "Kcycle": 1e3,
        "Mcycle": 1e6, "Gcycle": 1e9}


STOP = {"void", "at", "native", "std", "cudnn", "anonymous", "namespace", "unnamed", "const", "float", "double",
        "int", "long", "short", "char", "bool", "unsigned", "signed", "lambda", "instance", "operator", "ul",
        "u", "l", "engines_precompiled", "detail", "c10", "Half", "BFloat16", "true", "false", "headeronly",
        "cudnnKernelDataType_t"}


def template_numbers(name):
    """The integer and boolean arguments of the kernel's own template argument list (the first
    level only), in order, as both demanglers print them: cxxabi writes 'nchwToNhwcKernel<float,
    float, float, false, true, (cudnnKernelDataType_t)2>', ncu 'nchwToNhwcKernel<float, float,
    float, 0, 1, 2>'. Two instantiations that differ only there are different kernels."""
    text = name.replace("(anonymous namespace)", " ").replace("<unnamed>", " ").replace("unnamed>", " ")
    args, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(" and depth == 0 and (args or cur):
            break  # the parameter list
        if ch == "<":
            depth += 1
            if depth == 1:
                cur = ""
                continue
        elif ch == ">":
            depth -= 1
            if depth == 0:
                args.append(cur)
                break
        elif ch == "," and depth == 1:
            args.append(cur)
            cur = ""
            continue
        if depth >= 1:
            cur += ch
    out = []
    for a in (x.strip() for x in args):
        a = re.sub(r"^\(\s*[A-Za-z_][\w:]*\s*\)\s*", "", a)  # (enum_t)2 -> 2
        m = re.fullmatch(r"(true|false|-?\d+)(?:[uU][lL]{0,2}|[lL]{1,2})?", a)
        if m:
            out.append({"true": "1", "false": "0"}.get(m.group(1), m.group(1)))
    return tuple(out)


def norm(name):
    """A key that survives the two demanglers (cxxabi in the worker, ncu's own, which drops some
    namespaces): the set of identifiers in the name that are not a qualifier (followed by '::'),
    without builtin types, lambda numbering and ncu's T1/T2 template placeholders, plus the
    ordered numeric template arguments (template_numbers)."""
    text = name.replace("(anonymous namespace)", " ").replace("<unnamed>", " ").replace("unnamed>", " ")
    tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?!\s*::|[A-Za-z0-9_])", text)
    words = frozenset(t for t in tokens if t not in STOP and not re.fullmatch(r"T\d+", t))
    return (words, template_numbers(name))


def load_run(path):
    kernels, metrics = {}, {}
    with open(path) as f:
        for line in f:
            m = json.loads(line)
            if "kernels" in m:
                for k in m["kernels"].get("kernels", []):
                    kernels[k["name"]] = kernels.get(k["name"], 0) + int(k.get("total_ns", 0))
            if "metrics" in m:
                for v in m["metrics"].get("values", []):
                    scope = v.get("scope", "")
                    if scope.startswith("kernel:"):
                        metrics.setdefault(scope[7:], {})[v["name"]] = float(v.get("value", 0.0))
    top = sorted((n for n in kernels if not n.startswith("[")), key=lambda n: -kernels[n])
    return top, metrics


def function_name(demangled):
    """'void at::native::(anon)::Foo<float>(long, float*)' -> 'Foo' (ncu's function base)."""
    s = demangled
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):  # the parameter list: the first '(' at template depth 0 after a name
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0 and (s[i - 1].isalnum() or s[i - 1] in "_>"):
            cut = i
            break
    s = s[:cut]
    out, depth = [], 0
    for ch in s:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    s = s.split(" ")[-1]
    return s.split("::")[-1]


def demangled_pattern(demangled):
    """Identifiers of a demangled name outside any parameter list, in order, joined by '.*':
    'void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, float,
    float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, ...)'
    -> 'vectorized_elementwise_kernel.*BUnaryFunctor.*binary_internal.*MulFunctor.*array'.
    ncu's demangler prints the same identifiers there (it drops 'native', writes lambdas as
    '[lambda() (instance 2)]' and parameters as T1, T2, ...: all left out)."""
    out, depth, word = [], 0, ""
    for ch in demangled + " ":
        if ch.isalnum() or ch == "_":
            word += ch
            continue
        if word and depth == 0:
            out.append(word)
        word = ""
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
    keep = [t for t in out if t not in STOP and t != "native" and not t[0].isdigit() and not re.fullmatch(r"T\d+", t)]
    return ".*".join(keep)


def read_raw_csv(path):
    """An `ncu --csv --page raw` export (ncu's own log lines left out): header, units, data rows, and
    the header's column index by name."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [l for l in f.read().splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        raise SystemExit(f"{path}: no ncu rows (is it ncu --csv --page raw output?)")
    header, units, data = rows[0], rows[1], rows[2:]
    return header, units, data, {h: i for i, h in enumerate(header)}


def parse_dim3(text):
    """"(2,048, 1, 1)" -> (2048, 1, 1): dimensions are split on ", ", and a comma inside a number is
    ncu's thousands separator."""
    return tuple(int(d.replace(",", "")) for d in re.split(r",\s+", text.strip().strip("()")) if d)


def load_ncu(path):
    header, units, data, idx = read_raw_csv(path)
    launches = {}  # (name key, grid) -> values of each such launch, in order; (name key, None) -> any grid
    for r in data:
        key = norm(r[idx["Kernel Name"]])
        grid = parse_dim3(r[idx["Grid Size"]]) if "Grid Size" in idx else None
        vals = {}
        for mname, (pw, _) in METRICS.items():
            if pw in idx:
                raw = r[idx[pw]].replace(",", "")
                try:
                    vals[mname] = float(raw) * UNIT.get(units[idx[pw]], 1.0)
                except ValueError:
                    pass
        launches.setdefault((key, grid), []).append(vals)
        launches.setdefault((key, None), []).append(vals)
    return launches


def grid_of(values):
    """The launch.grid_x|y|z a medprof kernel scope recorded, as a tuple; None when absent."""
    if not values or "launch.grid_x" not in values:
        return None
    return tuple(int(values[f"launch.grid_{x}"]) for x in "xyz")


def first_per_step(launches, steps):
    """The first launch of each of `steps` steps that ran the same launches in the same order;
    just the first launch when the count does not split evenly into steps."""
    if steps <= 1 or len(launches) % steps:
        return launches[:1]
    per = len(launches) // steps
    return launches[::per]


def median_of(launches):
    """Per metric, the median over the launches that have it."""
    out = {}
    for m in METRICS:
        v = [l[m] for l in launches if m in l]
        if v:
            out[m] = statistics.median(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["regex", "compare", "metrics", "runs", "covered"])
    ap.add_argument("run")
    ap.add_argument("ncu", nargs="?")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--steps", type=int, default=1, help="measured steps of the worker ncu profiled")
    ap.add_argument("--demangled", action="store_true", help="regex for --kernel-name-base demangled")
    a = ap.parse_args()
    if a.mode == "metrics":
        print(",".join(pw for pw, _ in METRICS.values()))
        return 0
    top, metrics = load_run(a.run)
    top = top[: a.top]
    if a.mode == "regex":
        if a.demangled:
            patterns = sorted({demangled_pattern(n) for n in top} - {""})
            print("regex:" + "|".join(f"({p})" for p in patterns))
            return 0
        names = sorted({function_name(n) for n in top})
        print("regex:^(" + "|".join(re.escape(n) for n in names) + ")$")
        return 0
    if a.mode == "covered":
        ncu = load_ncu(a.ncu)
        missing = 0
        for name in top:
            grid = grid_of(metrics.get(name))
            got = ncu.get((norm(name), grid), [])
            if len(got) < a.steps:
                missing += 1
                print(f"not covered ({len(got)} launches with grid {grid}, want >= {a.steps}): {name[:100]}")
        print(f"covered: {len(top) - missing} of {len(top)} kernels")
        return 0 if missing == 0 else 1
    if a.mode == "runs":  # two medprof runs (e.g. legacy API vs range profiler): same names
        _, other = load_run(a.ncu)
        ncu = {}
        for n, vals in other.items():
            grid = grid_of(vals)
            ncu[(norm(n), grid)] = [vals]
            ncu.setdefault((norm(n), None), [vals])
    else:
        ncu = load_ncu(a.ncu)
    worst, compared, failed = 0.0, 0, 0
    other_name = "other run" if a.mode == "runs" else "ncu"
    print(f"{'kernel':60s} {'metric':24s} {'medprof':>14s} {other_name:>14s} {'diff':>9s}  ok")
    for name in top:
        mine = metrics.get(name)
        grid = grid_of(mine)
        theirs = ncu.get((norm(name), grid))
        short = (name[:57] + "...") if len(name) > 60 else name
        if mine is None or theirs is None:
            print(f"{short:60s} MISSING in {'medprof' if mine is None else 'ncu'}")
            failed += 1
            continue
        n = max(1, int(mine.get("launch.samples", 1)))
        firsts = first_per_step(theirs, a.steps if a.mode == "compare" else 1)
        if len(firsts) < n:
            print(f"{short:60s} {other_name}: {len(firsts)} step(s) of this launch "
                  f"({len(theirs)} launches with this grid over --steps {a.steps}), medprof {n}")
        theirs = median_of(firsts[:n])
        for m, (_, pct) in METRICS.items():
            if m not in mine or m not in theirs:
                print(f"{short:60s} {m:24s} missing {'medprof' if m not in mine else 'ncu'}")
                failed += 1
                continue
            x, y = mine[m], theirs[m]
            if pct:  # hardware ratios can exceed 100 (L2 hit 101.5 % seen): both sides clamped
                x, y = min(max(x, 0.0), 100.0), min(max(y, 0.0), 100.0)
                diff, ok, shown = x - y, abs(x - y) <= 2.0, f"{x - y:+.2f}pt"
            else:
                rel = (x - y) / y if y else (0.0 if x == 0 else float("inf"))
                diff, ok, shown = rel, abs(rel) <= 0.05, f"{100 * rel:+.2f}%"
            compared += 1
            failed += 0 if ok else 1
            print(f"{short:60s} {m:24s} {x:14.4g} {y:14.4g} {shown:>9s}  {'yes' if ok else 'NO'}")
    print(f"\nmedians over the steps each side profiled the launch in (medprof's launch.samples per kernel)")
    print(f"compared {compared} values over {len(top)} kernels: {compared - failed if failed <= compared else 0} agree, {failed} disagree or missing")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
