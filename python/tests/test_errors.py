# SPDX-License-Identifier: MIT
import numpy as np
import pytest

import fucina as fc


def test_shape_mismatch_raises_shape_error_with_the_c_message(ctx):
    a = fc.tensor([1.0, 2.0], ctx=ctx)
    b = fc.tensor([1.0, 2.0, 3.0], ctx=ctx)
    with pytest.raises(fc.ShapeError) as ei:
        a + b
    e = ei.value
    assert e.status == -3 and e.status_name == "FC_ERR_SHAPE_MISMATCH"
    assert e.message == "add: shapes [2] and [3] do not broadcast"
    assert isinstance(e, fc.Error)
    # the error was cleared: the context works again
    assert (a + a).numpy().tolist() == [2.0, 4.0]


def test_dtype_mismatch_raises_dtype_error(ctx):
    a = fc.tensor([1.0], dtype="f32", ctx=ctx)
    b = fc.tensor([1.0], dtype="f64", ctx=ctx)
    with pytest.raises(fc.DTypeError) as ei:
        a * b
    assert ei.value.status_name == "FC_ERR_DTYPE"
    assert "mul" in ei.value.message


def test_axis_out_of_range_raises_shape_error(ctx):
    a = fc.ones((2, 3), ctx=ctx)
    with pytest.raises(fc.ShapeError) as ei:
        a.sum(axis=5)
    assert ei.value.status_name == "FC_ERR_AXIS"


def test_empty_shape_raises_shape_error(ctx):
    with pytest.raises(fc.ShapeError) as ei:
        fc.zeros((2, 0), ctx=ctx)
    assert ei.value.status_name == "FC_ERR_INVALID_SHAPE"


def test_rank_over_the_limit_raises_shape_error(ctx):
    with pytest.raises(fc.ShapeError) as ei:
        fc.ones((1,) * 9, ctx=ctx)
    assert ei.value.status_name == "FC_ERR_RANK"


def test_backward_without_grad_raises_state_error(ctx):
    a = fc.ones((1,), ctx=ctx)
    with pytest.raises(fc.StateError) as ei:
        a.backward()
    assert ei.value.status_name == "FC_ERR_NO_GRAD"


def test_requires_grad_on_int_raises_dtype_error(ctx):
    a = fc.tensor([1, 2], ctx=ctx)
    assert a.dtype == "i64"
    with pytest.raises(fc.DTypeError):
        a.requires_grad = True


def test_item_of_many_elements_raises_shape_error(ctx):
    with pytest.raises(fc.ShapeError) as ei:
        fc.ones((2,), ctx=ctx).item()
    assert ei.value.status_name == "FC_ERR_INVALID_SHAPE"


def test_unknown_dtype_name(ctx):
    with pytest.raises(fc.DTypeError) as ei:
        fc.zeros((2,), dtype="f13", ctx=ctx)
    assert "f13" in ei.value.message


def test_wrong_python_types_raise_type_error_before_c(ctx):
    a = fc.ones((2, 3), ctx=ctx)
    live = ctx.stats()["tensors_live"]
    with pytest.raises(TypeError):
        a.reshape(2.0, 3)
    with pytest.raises(TypeError):
        a.sum(axis="0")
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(TypeError):
        a["0"]
    with pytest.raises(TypeError):
        fc.zeros((2,), dtype=5, ctx=ctx)
    with pytest.raises(TypeError):
        fc.tensor(object(), ctx=ctx)
    with pytest.raises(TypeError):
        a.requires_grad = 1
    with pytest.raises(TypeError):
        fc.full((2,), "1", ctx=ctx)
    with pytest.raises(TypeError):
        fc.tensor(np.zeros(3, dtype=np.complex128), ctx=ctx)
    with pytest.raises(TypeError):
        fc.zeros((2,), ctx="ctx")
    assert ctx.stats()["tensors_live"] == live


def test_use_after_release_raises(ctx):
    a = fc.ones((2,), ctx=ctx)
    a.release()
    assert a.released
    with pytest.raises(fc.StateError):
        a.numpy()
    with pytest.raises(fc.StateError):
        a + 1.0
    a.release()  # a second release is a no-op, never a double fc_release
    assert repr(a) == "Tensor(<released>)"
