# SPDX-License-Identifier: MIT
"""The Llama model and the GGUF tokenizers from Python (libfucina_models),
against the C suite's fixtures: PyTorch's logits and greedy tokens
(tests/data/llama) and the tokenizers' expected ids (tests/data/tokenizer)."""
import os

import numpy as np
import pytest

import fucina as fc

llama = pytest.importorskip("fucina.llama")
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data"))
PROMPTS = [[1, 17, 42, 5, 63, 17, 8, 90, 33, 2, 71, 17], [3, 3, 60, 11, 94, 0, 45, 45, 12, 80, 7, 29]]


@pytest.fixture
def model(ctx):
    try:
        m = llama.Model.load(os.path.join(DATA, "llama", "tiny_f32.gguf"), ctx=ctx)
    except ImportError as e:
        pytest.skip(str(e))
    yield m
    m.close()


def test_logits_and_greedy_tokens_match_pytorch(model):
    cfg = model.config
    v = cfg["vocab"]
    assert (cfg["n_layers"], cfg["dim"], v) == (2, 64, 96)
    ids = [[t % v for t in p] for p in PROMPTS]
    logits = model.forward(ids).numpy()
    ref = np.fromfile(os.path.join(DATA, "llama", "tiny_f32.logits"), dtype="<f4").reshape(2, 12, v)
    assert np.max(np.abs(logits - ref)) <= 1e-4
    greedy = np.fromfile(os.path.join(DATA, "llama", "tiny_f32.greedy"), dtype="<i4")
    assert model.generate(ids[0], 8) == list(greedy)
    stop = int(greedy[2])
    first = list(greedy).index(stop)
    assert model.generate(ids[0], 8, stop_token=stop) == list(greedy[:first + 1])
    a = model.generate(ids[0], 6, temperature=0.8, top_k=20, seed=5)
    assert a == model.generate(ids[0], 6, temperature=0.8, top_k=20, seed=5)


@pytest.mark.parametrize("name", ["llama_tied", "llama3_sharded", "qwen2", "mistral"])
def test_hf_checkpoints_match_pytorch_float64(ctx, name):
    d = os.path.join(DATA, "hf", name)
    try:
        m = llama.Model.load_hf(d, ctx=ctx)
    except ImportError as e:
        pytest.skip(str(e))
    lines = dict(l.split(" ", 1) for l in open(os.path.join(d, "reference.txt")).read().splitlines())
    prompt = [int(t) for t in lines["prompt"].split()]
    ref = np.fromfile(os.path.join(d, "reference.f64"), dtype="<f8").reshape(len(prompt), -1)
    logits = m.forward([prompt]).numpy()[0]
    assert np.max(np.abs(logits - ref)) <= 1e-5 * np.max(np.abs(ref))
    n = int(lines["greedy_prompt"])
    greedy = [int(t) for t in lines["greedy"].split()]
    assert m.generate(prompt[:n], len(greedy)) == greedy
    m.close()


def test_model_errors(ctx, model):
    with pytest.raises(fc.IndexRangeError):
        model.forward([[0, 1, 500]])
    with pytest.raises(TypeError):
        model.generate([1.5], 3)
    with pytest.raises(ValueError):
        model.generate([], 3)
    with pytest.raises(fc.FileFormatError):
        llama.Model.load(os.path.join(DATA, "tokenizer", "spm.gguf"), ctx=ctx)
    with pytest.raises(KeyError):
        model.tensor("no.such.tensor")
    assert "token_embd.weight" in model.tensor_names()


def test_tokenizers_match_their_expected_ids(ctx):
    cases = 0
    toks = {}
    with open(os.path.join(DATA, "tokenizer", "expected.txt")) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2 or parts[0] not in ("spm", "bpe"):
                continue
            kind, hexs = parts[0], parts[1]
            ids = [int(t) for t in parts[2].split()] if len(parts) > 2 and parts[2] else []
            if kind not in toks:
                toks[kind] = llama.Tokenizer.from_gguf(os.path.join(DATA, "tokenizer", kind + ".gguf"),
                                                       ctx=ctx)
            text = bytes.fromhex(hexs)
            assert toks[kind].encode(text) == ids, (kind, text)
            assert toks[kind].decode(ids) == text.decode("utf-8")
            cases += 1
    assert cases >= 20
    for t in toks.values():
        t.close()
