"""Causal attention of one head, the first task of the attention lab: a function, not a module."""
from pathlib import Path

from exercise import Exercise
from exercise.builtin_attention import MULTI_HEAD, SCALED_DOT_PRODUCT
from sandbox.contract import Entry
from sandbox.limits import Limits

# Run once in a warm sandbox before it forks workers, so that each worker finds torch's lazy
# set-up done for what a solution calls: matmul, bmm and einsum, masks, softmax and backward, in
# both dtypes.
WARMUP = """
import torch
for dtype in (torch.float32, torch.float64):
    q = torch.randn(2, 5, 4, dtype=dtype, requires_grad=True)
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)
    s = (q @ q.transpose(-2, -1)) / 2.0 + torch.bmm(q, q.transpose(1, 2)) + torch.einsum("btd,bsd->bts", q, q)
    w = torch.where(future, float("-inf"), s).masked_fill(future, float("-inf")).softmax(dim=-1)
    (w @ q).sum().backward()
"""

EXERCISE = Exercise(
    name="causal-attention-head",
    version="1",
    title="Causal attention, one head",
    entry=Entry.a_function(
        "causal_attention", ("q", "k", "v"), returns=2,
        # PyTorch's attention, every route to it: SDPA and everything nn.MultiheadAttention is
        # made of (refused in the worker: sandbox.audit)
        refuse=SCALED_DOT_PRODUCT + MULTI_HEAD,
        warmup=WARMUP),
    directory=Path(__file__).parent,
    package=__name__,
    limits=Limits(wall_s=60.0, tests_s=30.0),
)
