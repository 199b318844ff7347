# SPDX-License-Identifier: MIT
"""Random sequences of calls, good and bad: no crash, every failure a
fucina.Error (or a TypeError/IndexError from the Python side), and the
context's live-tensor count back to zero once the tensors are gone."""
import gc
import random

import numpy as np

import fucina as fc

SHAPES = [(2, 3), (3,), (1, 3), (3, 2), (2, 1), (6,)]


def _step(rnd, ctx, pool):
    kind = rnd.randrange(9)
    if kind == 0 or not pool:
        shp = rnd.choice(SHAPES)
        dt = rnd.choice(["f32", "f64", "f64", "i32"])
        pool.append(fc.tensor(np.asarray(np.random.default_rng(rnd.randrange(99))
                                         .standard_normal(shp)), dtype=dt, ctx=ctx))
        return
    a, b = rnd.choice(pool), rnd.choice(pool)
    if kind == 1:
        op = rnd.choice(["__add__", "__sub__", "__mul__", "__truediv__", "__matmul__"])
        pool.append(getattr(a, op)(b))
    elif kind == 2:
        pool.append(getattr(a, rnd.choice(fc.UNARY))())
    elif kind == 3:
        pool.append(a.sum(axis=rnd.choice([None, 0, 1, -1, 3])))
    elif kind == 4:
        pool.append(a.reshape(rnd.choice([(6,), (3, 2), (-1,), (4,)])))
    elif kind == 5:
        pool.append(a[rnd.choice([0, 1, slice(1, None), slice(None, None, 2), 5])])
    elif kind == 6:
        if rnd.random() < 0.5:
            a.requires_grad = True
        else:
            pool.append(a.T)
    elif kind == 7:
        loss = a.sum()
        if rnd.random() < 0.5:
            loss.backward()
        else:
            fc.grad(loss, [b], allow_unused=rnd.random() < 0.5)
    else:
        pool.pop(rnd.randrange(len(pool))).release()


def test_random_call_sequences_leak_nothing():
    for seed in range(8):
        rnd = random.Random(seed)
        ctx = fc.Context(threads=1, seed=seed)
        pool, failures = [], 0
        for _ in range(300):
            try:
                _step(rnd, ctx, pool)
            except (fc.Error, IndexError) as e:
                failures += 1
                assert str(e)
            if len(pool) > 40:
                del pool[:20]
            # every surviving tensor still answers queries (a generator, so
            # no loop variable keeps the last one alive past pool.clear())
            assert all(t.numel() >= 1 for t in pool if not t.released)
        assert failures > 0  # the sequences do reach the error paths
        assert lib_status_clean(ctx)
        pool.clear()
        gc.collect()
        assert ctx.stats()["tensors_live"] == 0, seed


def lib_status_clean(ctx):
    from fucina._lib import lib
    return lib.fc_ctx_status(ctx._h) == 0
