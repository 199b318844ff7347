# SPDX-License-Identifier: MIT
"""Prints the ratio table of bench/compare.sh from the JSON lines it saved
(`ratios.py OUT_DIR WORKLOAD ...`), or with --vs-ggml DIR the qmatvec table
of bench/qmatvec_vs_ggml.sh (fucina beside ggml, same run).

For each metric and round: fucina's median, the faster PyTorch
configuration's median in the same round, and their ratio (time metrics:
fucina's time over the peer's, so < 1 means fucina is faster; throughput
metrics: fucina's over the peer's, so > 1 means fucina is faster), next to
the target of ../shared/BENCHMARKS.md. Over several rounds (compare.sh's
COMPARE_ROUNDS) the table gives the medians over rounds, the median of the
per-round ratios, their range, and the rounds that met the target.
"""
import glob
import json
import os
import re
import statistics
import sys


def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def ratio_text(x):
    """A ratio with two decimals, three below 0.1 (tiny_ops' target is 0.05)."""
    return f"{x:.2f}" if x >= 0.1 else f"{x:.3f}"


def get(d, path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def print_table(hdr, rows):
    widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
    print("| " + " | ".join(h.ljust(widths[i]) for i, h in enumerate(hdr)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)) + " |")


def vs_ggml(out_dir):
    """`ratios.py --vs-ggml DIR`: the table of bench/qmatvec_vs_ggml.sh.

    DIR holds <level>.r<round>.<side>.json (side fucina or ggml_<buffer>).
    Each cell is the median over rounds of each run's median GFLOP/s; a
    ratio is fucina's over ggml's (> 1: fucina faster), "vs best" is against
    the fastest ggml buffer for that type and N (the target's peer), and
    "per round" is the range of that ratio taken round by round, fucina
    against the ggml runs next to it.
    """
    runs = {}  # level -> side -> round -> json
    for p in glob.glob(os.path.join(out_dir, "*.r*.*.json")):
        m = re.match(r"(.+)\.r(\d+)\.(.+)\.json$", os.path.basename(p))
        if not m:
            continue
        try:
            with open(p) as f:
                d = json.loads(f.read().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            d = {}
        runs.setdefault(m.group(1), {}).setdefault(m.group(3), {})[int(m.group(2))] = d
    fs = lambda x: f"{x:.4g}" if x is not None else "-"
    for level in sorted(runs, key=lambda lv: lv != "avx512"):
        sides = runs[level]
        bufs = sorted((s for s in sides if s.startswith("ggml_")),
                      key=lambda b: (b != "ggml_CPU", b))
        rounds = sorted({r for side in sides.values() for r in side})
        first = lambda side: next((d for d in sides.get(side, {}).values() if d), {})
        env = first(bufs[0]).get("env", {}) if bufs else {}
        print(f"level {level}: fucina ISA {get(first('fucina'), ['env', 'isa']) or 'n/a'}; "
              f"ggml {env.get('ggml_version', '?')} ({env.get('ggml_commit', '?')}) "
              f"{env.get('cpu_backend', '?')}, threadpool {env.get('threadpool', '?')}; "
              f"{len(rounds)} rounds; CPU {env.get('cpu', '?')}")

        def at(side, r, t, n):
            v = get(sides.get(side, {}).get(r), ["results", t, n, "gflops", "median"])
            return v if num(v) else None

        def med(side, t, n):
            v = [x for x in (at(side, r, t, n) for r in rounds) if x is not None]
            return statistics.median(v) if v else None

        hdr = (["type", "N", "fucina"] + [b[5:] for b in bufs] +
               [f"vs {b[5:]}" for b in bufs] + ["vs best", "per round", "target"])
        rows, dirty = [], 0
        for t in ("q4_0", "q8_0", "q4_k", "q6_k", "f32"):
            for n in ("1", "16"):
                f = med("fucina", t, n)
                g = [med(b, t, n) for b in bufs]
                if f is None and all(x is None for x in g):
                    continue
                rs = lambda x: f"{f / x:.2f}x" if f is not None and x else "-"
                best = max((x for x in g if x is not None), default=None)
                per = []
                for r in rounds:
                    fr = at("fucina", r, t, n)
                    gr = [x for x in (at(b, r, t, n) for b in bufs) if x is not None]
                    if fr is not None and gr:
                        per.append(fr / max(gr))
                    for side in ["fucina"] + bufs:
                        raw = get(sides.get(side, {}).get(r), ["results", t, n, "raw"])
                        dirty += bool(get(raw, ["contaminated"]))
                span = f"{min(per):.2f}-{max(per):.2f}" if per else "-"
                rows.append([t, n, fs(f)] + [fs(x) for x in g] + [rs(x) for x in g] +
                            [rs(best), span, ">= 1.0"])
        print_table(hdr, rows)
        if dirty:
            print(f"({dirty} of these measurements ran while other processes took more "
                  f"than 0.05 cores after every retry: \"contaminated\" in their JSON)")
        print()
    print("GFLOP/s = 2*4096*4096*N / median seconds per call, median over rounds; "
          "ratios > 1 favour fucina; '-' where a buffer cannot hold the type.")


if len(sys.argv) >= 3 and sys.argv[1] == "--vs-ggml":
    vs_ggml(sys.argv[2])
    sys.exit(0)

out_dir = sys.argv[1]
workloads = sys.argv[2:]


def read_json(p):
    try:
        with open(p) as f:
            line = f.read().strip().splitlines()
            return json.loads(line[-1]) if line else {}
    except (OSError, ValueError):
        return {}


def rounds_of(w):
    """The round numbers compare.sh left for workload w, in order."""
    found = set()
    for p in glob.glob(os.path.join(out_dir, f"{w}.r*.*.json")):
        m = re.match(re.escape(w) + r"\.r(\d+)\.[a-z_]+\.json$", os.path.basename(p))
        if m:
            found.add(int(m.group(1)))
    return sorted(found)


def load(w, side, r=None):
    """Round r's JSON of one side (the last round when r is None)."""
    if r is None:
        rs = rounds_of(w)
        if not rs:
            return {}
        r = rs[-1]
    return read_json(os.path.join(out_dir, f"{w}.r{r}.{side}.json"))


# (workload, label, fucina path, peer path, higher_is_better, target text,
#  the target as a number: the ratio to reach, or None)
METRICS = [
    ("gemm", "gemm 1024 GFLOP/s", ["results", "1024", "fucina_gflops", "median"],
     ["results", "1024", "torch_mm_gflops", "median"], True, ">= 1.0 x torch.mm", 1.0),
    ("gemm", "gemm 2048 GFLOP/s", ["results", "2048", "fucina_gflops", "median"],
     ["results", "2048", "torch_mm_gflops", "median"], True, ">= 1.0 x torch.mm", 1.0),
    ("elementwise", "add out= GB/s", ["results", "add_out", "GBps", "median"],
     ["results", "add_out", "GBps", "median"], True, ">= 1.0", 1.0),
    ("elementwise", "add fresh GB/s", ["results", "add_alloc", "GBps", "median"],
     ["results", "add_alloc", "GBps", "median"], True, ">= 4.0", 4.0),
    ("elementwise", "copy GB/s", ["results", "copy", "GBps", "median"],
     ["results", "copy", "GBps", "median"], True, "-", None),
    ("reduce", "sum f32 GB/s", ["results", "sum_f32", "GBps", "median"],
     ["results", "sum_f32", "GBps", "median"], True, ">= 1.0", 1.0),
    ("reduce", "sum bf16 GB/s", ["results", "sum_bf16", "GBps", "median"],
     ["results", "sum_bf16", "GBps", "median"], True, ">= 1.0", 1.0),
    ("norm_softmax", "softmax fwd+bwd ms", ["results", "softmax_fwd_bwd", "ms", "median"],
     ["results", "softmax_fwd_bwd", "ms", "median"], False, "time <= 0.7x", 0.7),
    ("norm_softmax", "layer_norm fwd+bwd ms", ["results", "layernorm_fwd_bwd", "ms", "median"],
     ["results", "layernorm_fwd_bwd", "ms", "median"], False, "time <= 0.7x", 0.7),
    ("tiny_ops", "tiny fwd+bwd us", ["results", "fwd_bwd", "us_per_iter", "median"],
     ["results", "fwd_bwd", "us_per_iter", "median"], False, "time <= 0.05x", 0.05),
    ("mlp_train", "mlp step ms", ["ms_per_step", "median"],
     ["ms_per_step", "median"], False, "time <= 0.6x", 0.6),
    ("gpt_train", "gpt step ms", ["ms_per_step", "median"],
     ["ms_per_step", "median"], False, "time <= 0.5x", 0.5),
    ("llama_train", "llama step ms", ["ms_per_step", "median"],
     ["ms_per_step", "median"], False, "time <= 0.5x", 0.5),
    ("conv_train", "cnn step ms", ["ms_per_step", "median"],
     ["ms_per_step", "median"], False, "time <= 0.6x", 0.6),
    ("conv_train", "conv3x3 fwd+bwd GFLOP/s", ["conv3x3", "gflops", "median"],
     ["conv3x3", "gflops", "median"], True, ">= 1.0", 1.0),
]

# Which machine and which kernels: compare.sh's host line, and the level
# fucina-bench itself reported (its JSON env), which must agree.
try:
    with open(os.path.join(out_dir, "host.json")) as f:
        host = json.loads(f.read())
except (OSError, ValueError):
    host = {}
levels = sorted({get(load(w, "fucina"), ["env", "isa"]) for w in workloads} - {None})
print(f"CPU: {host.get('cpu', 'unknown')}; fucina ISA level: {', '.join(levels) or 'n/a'}; "
      f"PyTorch tuned: ATEN_CPU_CAPABILITY={host.get('peer_tuned_aten_cpu_capability', 'n/a')}; "
      f"ONEDNN_MAX_CPU_ISA={host.get('ONEDNN_MAX_CPU_ISA') or '-'}; "
      f"OPENBLAS_CORETYPE={host.get('OPENBLAS_CORETYPE') or '-'}")
print()

med = lambda v: statistics.median(v) if v else None
rows, most_rounds = [], 1
for w, label, fp, pp, higher, target, goal in METRICS:
    if w not in workloads:
        continue
    fs_, bests, ratios = [], [], []
    for r in rounds_of(w):
        f = get(load(w, "fucina", r), fp)
        peers = [get(load(w, side, r), pp) for side in ("peer_default", "peer_tuned")]
        peers = [p for p in peers if num(p) and p > 0]
        best = (max(peers) if higher else min(peers)) if peers else None
        if num(f):
            fs_.append(f)
        if best is not None:
            bests.append(best)
        if num(f) and best is not None:
            ratios.append(f / best)
    most_rounds = max(most_rounds, len(ratios))
    fm, bm, rm = med(fs_), med(bests), med(ratios)
    shown = f"{ratio_text(rm)}x" + (" throughput" if higher else " time") if rm is not None else "n/a"
    span = f"{ratio_text(min(ratios))}-{ratio_text(max(ratios))}" if len(ratios) > 1 else "-"
    if goal is None or not ratios:
        met = "-"
    else:
        met = f"{sum((x >= goal) if higher else (x <= goal) for x in ratios)}/{len(ratios)}"
    rows.append((label, f"{fm:.4g}" if fm is not None else "n/a",
                 f"{bm:.4g}" if bm is not None else "n/a", shown, span, met, target))

if most_rounds > 1:
    print("Medians over rounds; ratio = the median of the per-round ratios, each of fucina "
          "against the faster PyTorch configuration of the same round.")
print_table(("metric", "fucina", "PyTorch (best)", "ratio", "per round", "met", "target"), rows)

# Figures with no PyTorch peer (from the last round): fc_matmul against OpenBLAS called directly
# in the same process (the gemm JSON carries both), and qmatvec against
# ggml's CPU figures (2 threads, 4096x4096, GFLOP/s) as published in
# ../shared/BENCHMARKS.md -- ggml is not run here, so these are reference
# numbers from another run, not a same-run ratio (bench/qmatvec_vs_ggml.sh
# gives that one).
GGML = {"q4_0": {"1": 70, "16": 78}, "q8_0": {"1": 85, "16": 89},
        "q4_k": {"1": 108, "16": 108}, "q6_k": {"1": 101, "16": 108}}
extra = []
if "gemm" in workloads:
    g = load("gemm", "fucina")
    for n in ("256", "1024", "2048"):
        f = get(g, ["results", n, "fucina_gflops", "median"])
        d = get(g, ["results", n, "openblas_direct_gflops", "median"])
        if isinstance(f, (int, float)) and isinstance(d, (int, float)) and d:
            extra.append((f"gemm {n} GFLOP/s vs cblas_sgemm", f"{f:.4g}", f"{d:.4g}",
                          f"{f / d:.2f}x throughput", ">= 0.95"))
if "qmatvec" in workloads:
    q = load("qmatvec", "fucina")
    for t, per_n in GGML.items():
        for n, ref in per_n.items():
            f = get(q, ["results", t, n, "gflops", "median"])
            if isinstance(f, (int, float)):
                extra.append((f"qmatvec {t} N={n} GFLOP/s vs ggml", f"{f:.4g}", f"{ref}",
                              f"{f / ref:.2f}x throughput", ">= 1.0"))
    for n in ("1", "16"):
        f = get(q, ["results", "q4_0", n, "gflops", "median"])
        d = get(q, ["results", "dequant_sgemm_q4_0", n, "gflops", "median"])
        if isinstance(f, (int, float)) and isinstance(d, (int, float)) and d:
            extra.append((f"qmatvec q4_0 N={n} vs dequantize+sgemm", f"{f:.4g}", f"{d:.4g}",
                          f"{f / d:.2f}x throughput", "far above"))
if "qlora_step" in workloads:
    # QLoRA over q4_k / q8_0 weights beside LoRA over the f32 weights and
    # the f32 full fine-tune of the same model, same run (each variant's
    # peak RSS from its own process)
    q = load("qlora_step", "fucina")
    full = get(q, ["results", "f32_full"])
    for v in ("lora_f32", "q4_k", "q8_0"):
        r = get(q, ["results", v])
        for label, path, higher in (("tokens/s", ["tokens_per_s", "median"], True),
                                    ("peak RSS KiB", ["peak_rss_kib"], False)):
            f, d = get(r, path), get(full, path)
            if isinstance(f, (int, float)) and isinstance(d, (int, float)) and d:
                extra.append((f"qlora_step {v} {label} vs f32 full fine-tune", f"{f:.4g}",
                              f"{d:.4g}", f"{f / d:.2f}x" + (" throughput" if higher else ""),
                              "-"))
    lf = get(q, ["results", "lora_f32", "peak_rss_kib"])
    for v in ("q4_k", "q8_0"):
        f = get(q, ["results", v, "peak_rss_kib"])
        if isinstance(f, (int, float)) and isinstance(lf, (int, float)) and lf:
            extra.append((f"qlora_step {v} peak RSS KiB vs LoRA over f32", f"{f:.4g}", f"{lf:.4g}",
                          f"{f / lf:.2f}x", "< 1 (base never in f32)"))
if extra:
    print()
    print_table(("metric", "fucina", "reference", "ratio", "target"), extra)
