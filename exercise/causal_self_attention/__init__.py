"""Causal multi-head self-attention, the layer at the centre of every GPT."""
from pathlib import Path

from exercise import Exercise
from exercise.builtin_attention import MULTI_HEAD
from sandbox.contract import Entry, Method
from sandbox.limits import Limits

# Run once on one thread by a warm sandbox (sandbox.zygote.warm_up), so that every process forked
# from it finds torch's lazy set-up done for the ops a grade starts with: linear layers, masked
# softmax attention, nn.MultiheadAttention with masks, SDPA, einsum, backward, a Jacobian and a
# meta-device op, in float32 and float64.
WARMUP = """
import torch
import torch.nn.functional as F
for dtype in (torch.float32, torch.float64):
    x = torch.randn(2, 5, 8, dtype=dtype, requires_grad=True)
    layer = torch.nn.Linear(8, 24, dtype=dtype)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=dtype)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, 3:] = True
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)
    out, _ = mha(x, x, x, key_padding_mask=padding, attn_mask=future, need_weights=False)
    q, k, v = layer(x).split(8, dim=2)
    q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in (q, k, v))
    weights = (q @ k.transpose(-2, -1) / 2.0).masked_fill(future, float("-inf")).softmax(dim=-1)
    mixed = (weights @ v).transpose(1, 2).contiguous().view(2, 5, 8)
    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    total = out.sum() + mixed.sum() + sdpa.sum() + torch.einsum("bhtd,bhsd->bhts", q, k).sum()
    total.backward()
    torch.autograd.functional.jacobian(lambda z: z.softmax(-1), torch.randn(3, dtype=dtype))
layer.to("meta")(torch.empty(2, 8, device="meta"))
"""

# A context (an expression the worker evaluates) in which Tensor.view copies where the tensor's
# memory layout allows no view, as reshape does: a forward that raises only without it viewed a
# tensor whose layout a transpose or a permute had changed.
VIEWS_OF_ANY_LAYOUT = (
    "(lambda view: type('ViewsOfAnyLayout', (), {"
    "'__enter__': lambda self: setattr(torch.Tensor, 'view', lambda t, *shape, **kw: view(t, *shape, **kw) "
    "if kw or not shape or isinstance(shape[0], torch.dtype) or t.is_contiguous() else t.reshape(*shape)), "
    "'__exit__': lambda self, *exc: setattr(torch.Tensor, 'view', view)})())(torch.Tensor.view)")


EXERCISE = Exercise(
    name="causal-self-attention",
    version="1",
    title="Causal multi-head self-attention",
    entry=Entry.a_class(
        "CausalSelfAttention", ("dim", "n_heads"), Method("forward", ("x", "key_padding_mask"), required=1),
        # nn.MultiheadAttention, every relative of it; SDPA stays allowed
        refuse=MULTI_HEAD,
        warmup=WARMUP,
        # the diagnosis runs some probes with PyTorch's reference attention kernel forced, and tells
        # what made a forward raise by running it again without autograd, or with views of any layout
        contexts=(("math_sdpa", "__import__('torch.nn.attention', fromlist=['sdpa_kernel'])"
                                ".sdpa_kernel(torch.nn.attention.SDPBackend.MATH)"),
                  ("no_grad", "torch.no_grad()"),
                  ("views_of_any_layout", VIEWS_OF_ANY_LAYOUT))),
    directory=Path(__file__).parent,
    package=__name__,
    limits=Limits(),
)
