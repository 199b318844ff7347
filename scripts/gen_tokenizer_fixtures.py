#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tokenizer fixtures for tests/models/test_tokenizer.c, with the expected
ids computed by independent implementations.

  gen_tokenizer_fixtures.py OUT_DIR

writes
  OUT_DIR/spm.gguf  a SentencePiece BPE vocabulary (byte fallback) trained
                    here with Debian's python3-sentencepiece on the GPL-3
                    text, as the tokenizer.ggml.* keys of a "llama" GGUF;
  OUT_DIR/bpe.gguf  a byte-level BPE vocabulary ("gpt2") trained here with
                    GPT-2's pre-tokenizer pattern (python3-regex) and the
                    textbook BPE loop;
  OUT_DIR/expected.txt  one case per line: "spm|bpe <TAB> text as hex <TAB>
                    ids": sentencepiece's own encoding for spm (without BOS),
                    and GPT-2's reference bpe() (merge every occurrence of
                    the lowest-ranked pair, repeat) for bpe.
The fixtures are committed under tests/data/tokenizer/. Files are written
with scripts/gen_gguf.py's writer (GGUF from the specification, struct
only), so no fucina code is involved on the expected side.
"""
import os
import sys
import tempfile

import regex
import sentencepiece as spm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_gguf as gg  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

CASES = [
    "Hello world",
    "The GNU General Public License is a free, copyleft license.",
    "  two leading spaces and  double  inner   spaces ",
    "tabs\tand\nnewlines\n\nhere",
    "It's we're they've I'm you'll he'd don't",
    "numbers 12345 and 3.14159, 1,000,000!",
    "punctuation: (a) [b] {c} <d> \"e\" 'f' -- g... h?!",
    "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m",
    "\u0416\u0438\u0432\u0438 \u043c\u0438\u0440 \u03b1\u03b2\u03b3 \u65e5\u672c\u8a9e\u306e\u6587",
    "emoji \U0001F600\U0001F680 and symbols \u2202\u222b\u2211 \u20ac100",
    "combining e\u0301 and \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "trailing space ",
    " ",
    "a",
    "\u00a0non-breaking\u2003em-space\u3000ideographic",
    "copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>",
    "licenselicenselicense freefreefree",
]


def train_spm(text, out_prefix):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
        path = f.name
    spm.SentencePieceTrainer.train(
        input=path, model_prefix=out_prefix, model_type="bpe", vocab_size=600,
        byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, character_coverage=1.0,
        split_digits=False, bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)
    os.unlink(path)
    return spm.SentencePieceProcessor(model_file=out_prefix + ".model")


def spm_gguf(sp, path):
    n = sp.get_piece_size()
    tokens, scores, types = [], [], []
    for i in range(n):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else
                     6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1)
    kvs = [
        ("general.architecture", gg.STRING, "llama"),
        ("tokenizer.ggml.model", gg.STRING, "llama"),
        ("tokenizer.ggml.tokens", gg.ARRAY, (gg.STRING, tokens)),
        ("tokenizer.ggml.scores", gg.ARRAY, (gg.F32, scores)),
        ("tokenizer.ggml.token_type", gg.ARRAY, (gg.I32, types)),
        ("tokenizer.ggml.bos_token_id", gg.U32, 1),
        ("tokenizer.ggml.eos_token_id", gg.U32, 2),
        ("tokenizer.ggml.unknown_token_id", gg.U32, 0),
        ("tokenizer.ggml.add_bos_token", gg.BOOL, True),
        ("tokenizer.ggml.add_eos_token", gg.BOOL, False),
    ]
    gg.write(path, 3, kvs, [], 32)


def bytes_to_unicode():
    """GPT-2's table: printable bytes as themselves, the rest from U+0100."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    k = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + k)
            k += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def words(text):
    return ["".join(B2U[b] for b in w.encode("utf-8")) for w in regex.findall(GPT2_PATTERN, text)]


def train_bpe(text, n_merges):
    """Most frequent adjacent pair, merged everywhere, n_merges times."""
    counts = {}
    for w in words(text):
        counts[w] = counts.get(w, 0) + 1
    seqs = {w: list(w) for w in counts}
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for w, c in counts.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        for w in seqs:
            seqs[w] = merge_all(seqs[w], best)
    return merges


def merge_all(s, pair):
    out, i = [], 0
    while i < len(s):
        if i + 1 < len(s) and (s[i], s[i + 1]) == pair:
            out.append(s[i] + s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return out


def bpe_reference(text, ranks, vocab):
    ids = []
    for w in words(text):
        s = list(w)
        while len(s) > 1:
            cands = [(ranks[p], p) for p in zip(s, s[1:]) if p in ranks]
            if not cands:
                break
            s = merge_all(s, min(cands)[1])
        ids += [vocab[p] for p in s]
    return ids


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        sp = train_spm(text, os.path.join(tmp, "spm"))
        spm_gguf(sp, os.path.join(out, "spm.gguf"))
        for c in CASES:
            lines.append("spm\t%s\t%s" % (c.encode("utf-8").hex(), " ".join(map(str, sp.encode(c)))))

    merges = train_bpe(text, 300)
    tokens = [B2U[b] for b in range(256)]
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    tokens.append("<|endoftext|>")
    vocab = {t: i for i, t in enumerate(tokens)}
    ranks = {p: i for i, p in enumerate(merges)}
    types = [1] * (len(tokens) - 1) + [3]
    kvs = [
        ("general.architecture", gg.STRING, "llama"),
        ("tokenizer.ggml.model", gg.STRING, "gpt2"),
        ("tokenizer.ggml.pre", gg.STRING, "gpt-2"),
        ("tokenizer.ggml.tokens", gg.ARRAY, (gg.STRING, tokens)),
        ("tokenizer.ggml.token_type", gg.ARRAY, (gg.I32, types)),
        ("tokenizer.ggml.merges", gg.ARRAY, (gg.STRING, ["%s %s" % m for m in merges])),
        ("tokenizer.ggml.bos_token_id", gg.U32, len(tokens) - 1),
        ("tokenizer.ggml.eos_token_id", gg.U32, len(tokens) - 1),
    ]
    gg.write(os.path.join(out, "bpe.gguf"), 3, kvs, [], 32)
    for c in CASES:
        lines.append("bpe\t%s\t%s" % (c.encode("utf-8").hex(),
                                      " ".join(map(str, bpe_reference(c, ranks, vocab)))))
    with open(os.path.join(out, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
