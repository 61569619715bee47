"""The tiny exercise's whole suite: two groups, 100 points."""
import pytest
import torch


@pytest.mark.points(40)
@pytest.mark.parametrize("shape", [(3,), (2, 5)])
def test_shape(student, shape):
    """double(x) returns a tensor shaped like x"""
    out = student.function()(torch.ones(shape, dtype=torch.float64))
    assert tuple(out.shape) == shape, f"got shape {tuple(out.shape)}, expected {shape}"


@pytest.mark.points(60)
def test_values(student):
    """double(x) equals 2 * x"""
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    out = student.function()(x)
    assert torch.equal(out, 2 * x), f"got {out.tolist()}, expected {(2 * x).tolist()}"
