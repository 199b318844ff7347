#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Compares llama.cpp's logits and greedy tokens (tests/llama_cpp/llama_logits)
with PyTorch's (tests/data/llama) and fucina's (examples/generate --logits);
run by scripts/llama_cpp_parity.sh, which states the tolerances.

  llama_cpp_compare.py OUT_DIR            every case
  llama_cpp_compare.py OUT_DIR NAME...    only those models fucina made
"""
import os, struct, sys
import numpy as np
out = sys.argv[1]
sys.path.insert(0, "scripts")
try:  # the emulated activation rounding needs PyTorch (python3-torch)
    import torch
    import gen_llama_fixture as g
except ImportError:
    g = None
CONFIG = {"tiny": "CONFIG_A", "small": "CONFIG_B"}
# name: (llama.cpp's activation rounding, llama.cpp vs fucina: limit, relative?)
CASES = {"tiny_f32": (None, 1e-4, False), "tiny_q8_0": ("q8_0_f16", 3e-2, True),
         "small_q4_k": ("q8_k", 1e-4, False)}
only = sys.argv[2:]
passed = failed = 0
for name, (act, tol_fc, rel_fc) in ({} if only else CASES).items():
    try:
        lines = open(os.path.join(out, name + ".llama_cpp.txt")).read().split("\n")
    except OSError:
        print("%s: no llama.cpp output" % name); failed += 1; continue
    T, V = map(int, lines[0].split()[1:])
    lc = np.array([float(x) for l in lines[1:1 + T] for x in l.split()])
    greedy = [int(x) for x in lines[1 + T].split()[1:]]
    d = "tests/data/llama/"
    pt = np.fromfile(d + name + ".logits", "<f4")[:T * V]
    ref_greedy = [int(x) for x in np.fromfile(d + name + ".greedy", "<i4")]
    margins = np.fromfile(d + name + ".margins", "<f4")
    fc = np.fromfile(os.path.join(out, name + ".fucina.bin"), "<f4")
    fc_greedy = [int(x) for x in open(os.path.join(out, name + ".fucina.txt")).read().split()]
    big = np.abs(pt).max()
    checks = []
    if act is None:
        checks.append(("vs pytorch", np.abs(lc - pt).max(), 1e-4))
    else:
        checks.append(("vs pytorch", np.abs(lc - pt).max(), 3e-2 * big))
        if g:
            c = getattr(g, CONFIG[name.split("_")[0]])
            w = g.weights_of(d + name + ".gguf")
            ids = [[t % c["vocab"] for t in g.PROMPTS[0]]]
            with torch.no_grad():
                em = g.forward(c, w, torch.tensor(ids), g.q8_act(act))[0].reshape(-1).numpy()
            checks.append(("vs pytorch with %s activations" % act, np.abs(lc - em).max(), 1e-4))
    checks.append(("vs fucina", np.abs(lc - fc).max(), tol_fc * (big if rel_fc else 1)))
    lim_greedy = 3e-2 * big if act else 0.0
    n_check = 0
    while n_check < 8 and margins[n_check] > lim_greedy:
        n_check += 1
    ok = all(dv <= lim for _, dv, lim in checks) and greedy[:n_check] == ref_greedy[:n_check]
    print("%s: llama.cpp %s; greedy llama.cpp %s, pytorch %s, fucina %s (first %d must match): %s"
          % (name, ", ".join("%s max %.3g (limit %.3g)" % c for c in checks), greedy,
             ref_greedy, fc_greedy, n_check, "ok" if ok else "FAIL"))
    passed += ok
    failed += not ok
# models fucina made: llama_convert --new (new_*), train_llama's export
# (trained_*), and that q4_k export fine-tuned and merged by finetune_llama
for name in only or ("new_f32", "new_q4_k", "trained_f32", "trained_q4_k", "finetuned_q4_k"):
    try:
        lines = open(os.path.join(out, name + ".llama_cpp.txt")).read().split("\n")
        fc = np.fromfile(os.path.join(out, name + ".fucina.bin"), "<f4")
        fc_greedy = [int(x) for x in open(os.path.join(out, name + ".fucina.txt")).read().split()]
    except OSError:
        print("%s: not run (no llama_convert, train_llama or finetune_llama, or llama.cpp "
              "refused the file)" % name)
        failed += 1
        continue
    T, V = map(int, lines[0].split()[1:])
    lc = np.array([float(x) for l in lines[1:1 + T] for x in l.split()])
    greedy = [int(x) for x in lines[1 + T].split()[1:]]
    dv = np.abs(lc - fc).max()
    ok = dv <= 1e-4 and greedy == fc_greedy
    print("%s (made by fucina): llama.cpp vs fucina max %.3g (limit 1e-4); greedy llama.cpp %s, "
          "fucina %s: %s" % (name, dv, greedy, fc_greedy, "ok" if ok else "FAIL"))
    passed += ok
    failed += not ok
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
