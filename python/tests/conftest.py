# SPDX-License-Identifier: MIT
import gc

import pytest

import fucina as fc


@pytest.fixture
def ctx():
    """A fresh context; the test fails if a tensor of it outlives the test."""
    c = fc.Context(threads=1, seed=7)
    yield c
    gc.collect()
    assert c.stats()["tensors_live"] == 0
