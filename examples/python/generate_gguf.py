#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate text (or token ids) from a Llama-architecture GGUF file.

    PYTHONPATH=python python3 examples/python/generate_gguf.py MODEL.gguf \\
        [--prompt TEXT | --ids 1,17,42] [--tokens 20] [--temperature 0.8 --seed 1]

With a tokenizer in the file (tokenizer.ggml.* keys, as llama.cpp's
converter writes) the prompt is text and the output is decoded; a file
without one (the test fixtures) takes --ids and prints ids. Greedy unless
--temperature is given. Needs libfucina_models.so (built beside
libfucina.so by the default build).
"""
import argparse
import sys

import fucina as fc
from fucina import llama


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompt")
    ap.add_argument("--ids", help="comma-separated prompt ids (for files without a tokenizer)")
    ap.add_argument("--tokens", type=int, default=20)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with llama.Model.load(a.model) as m:
        meta, _ = fc.io.load_gguf(a.model, tensors=False)
        has_tok = meta.get("tokenizer.ggml.model") in ("llama", "gpt2")
        tok = m.tokenizer() if has_tok else None
        if a.ids:
            prompt = [int(t) for t in a.ids.split(",")]
        elif tok is not None and a.prompt is not None:
            prompt = tok.encode(a.prompt, add_special=True)
        else:
            ap.error("give --prompt (the file has a tokenizer) or --ids")
        cfg = m.config
        print("model: %d layers, dim %d, vocab %d; prompt of %d tokens"
              % (cfg["n_layers"], cfg["dim"], cfg["vocab"], len(prompt)))
        out = m.generate(prompt, a.tokens, temperature=a.temperature, top_k=a.top_k,
                         top_p=a.top_p, seed=a.seed,
                         stop_token=tok.eos if tok is not None else -1)
        if tok is not None:
            print(tok.decode(prompt + out))
        else:
            print("ids:", " ".join(str(t) for t in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
