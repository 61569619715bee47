"""The tiny exercise's whole suite: two groups, 100 points."""
import pytest
import torch
from tiny_exercise.groups import graded


@graded
@pytest.mark.parametrize("shape", [(3,), (2, 5)])
def test_shape(student, shape):
    out = student.function()(torch.ones(shape, dtype=torch.float64))
    assert tuple(out.shape) == shape, f"got shape {tuple(out.shape)}, expected {shape}"


@graded
def test_values(student):
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    out = student.function()(x)
    assert torch.equal(out, 2 * x), f"got {out.tolist()}, expected {(2 * x).tolist()}"
