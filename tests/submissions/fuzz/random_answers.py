# fuzz: every answer this submission's worker sends is drawn at random from SEED (tests/test_fuzz.py
# grades copies with other seeds): forward outputs and gradients of random dtype (floating, bool,
# integer, complex), shape (right, off by one, 0-d, empty, up to 6-D), layout (non-contiguous
# views), values (NaN, infinities, huge, tiny, exact) and size (up to 48 MiB); now and then an
# exception with a huge message, or a parameter count and shapes that are nonsense. Whatever comes
# back, the grade must be a graded result, never an error.
import math
import random
import sys

import torch
import torch.nn as nn

SEED = 0
_rng = random.Random(SEED)


def _values(shape, dtype):
    pick = _rng.random()
    if pick < 0.15:
        return torch.full(shape, _rng.choice([float("nan"), float("inf"), -float("inf"), 1e308, -1e-320]))
    if pick < 0.3:
        return torch.zeros(shape)
    return torch.randn(shape, generator=torch.Generator().manual_seed(_rng.randrange(1 << 30))) \
        * 10 ** _rng.uniform(-30, 30)


def _random_like(right: torch.Tensor):
    """A random answer near the right one, or nowhere near it."""
    shape = list(right.shape)
    roll = _rng.random()
    if roll < 0.25:
        out = right
    elif roll < 0.35:
        shape[_rng.randrange(len(shape))] += _rng.choice([-1, 1])
        out = _values([max(s, 0) for s in shape], right.dtype)
    elif roll < 0.42:
        out = _values(_rng.choice([[], [0], [0, 3], [1] * _rng.randint(4, 6)]), right.dtype)
    elif roll < 0.45:
        out = torch.zeros(_rng.choice([6 << 20, (1 << 20) + 3]), dtype=torch.float64)  # 48 MiB, 8 MiB
    elif roll < 0.6:
        out = right.transpose(0, -1).contiguous().transpose(0, -1) if right.dim() else right
    else:
        out = _values(shape, right.dtype)
    dtypes = [right.dtype] * 4 + [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool,
                                  torch.uint8, torch.int32, torch.int64, torch.complex64]
    dtype = _rng.choice(dtypes)
    if dtype == torch.bool:
        return out > 0
    try:
        return out.to(dtype)
    except RuntimeError:
        return out


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        if _rng.random() < 0.05:
            raise _rng.choice([ValueError, RuntimeError, KeyError])("z" * _rng.choice([10, 100_000]))
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        scores = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).masked_fill(~allowed, float("-inf"))
        return _random_like(self.proj((scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)))


try:  # the worker's other answers, at random too
    _W = sys.modules["sandbox.worker"].Worker
    _orig_vjp, _orig_new = _W.op_vjp, _W.op_new

    def _vjp(self, request):
        return {"grads": _random_like(_orig_vjp(self, request)["grads"])}

    def _new(self, request):
        answer = _orig_new(self, request)
        if _rng.random() < 0.2:
            answer["n_params"] = _rng.choice([-1, 0, 10 ** 18, answer["n_params"] + 1])
            answer["params"] = {f"p{i}": [_rng.randrange(0, 1 << 20)] for i in range(_rng.randint(0, 3))}
        return answer
    _W.op_vjp, _W.op_new = _vjp, _new
except (KeyError, AttributeError):
    pass
