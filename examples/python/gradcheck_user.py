#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Gradient-check a function of your own, in f64, to first and second order.

    PYTHONPATH=python python3 examples/python/gradcheck_user.py

The function is a small research-style loss: a softplus margin of a
bilinear score plus a smooth penalty. fucina computes its gradient by
autograd and fucina.gradcheck compares it with central finite differences;
gradgradcheck does the same for the gradient of the gradient (with a random
grad_output that requires grad, then with a constant one). A deliberately
wrong function shows what a failure looks like: it detaches one use of w
(a common bug: a normaliser computed from a detached copy), so autograd
misses that path and the finite differences do not.
"""
import sys

import numpy as np

import fucina as fc


def loss(w, x):
    score = (x @ w).tanh()                             # [N, 1]
    margin = ((-score).exp() + 1.0).log()              # softplus(-score)
    return margin.mean() + 0.1 * (w * w).sum().sqrt()


def main():
    rng = np.random.default_rng(0)
    w = fc.tensor(rng.standard_normal((4, 1)), dtype="f64", requires_grad=True)
    x = fc.tensor(rng.standard_normal((8, 4)), dtype="f64", requires_grad=True)
    ok1 = fc.gradcheck(loss, [w, x])
    ok2 = fc.gradgradcheck(loss, [w, x])
    ok3 = fc.gradgradcheck(loss, [w, x], constant_grad_output=True)
    print("gradcheck: %s, gradgradcheck: %s, with a constant grad_output: %s" % (ok1, ok2, ok3))

    def wrong(w, x):
        return loss(w, x) + (w.detach() * w).sum()  # d/dw of w.w is 2w, not w

    caught = not fc.gradcheck(wrong, [w, x], raise_exception=False)
    print("a detached path is caught: %s" % caught)
    return 0 if ok1 and ok2 and ok3 and caught else 1


if __name__ == "__main__":
    sys.exit(main())
