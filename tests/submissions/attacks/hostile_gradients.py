# attack: patches the worker's backward answer (Worker.op_vjp) to return gradients of dtype bool, int64, float16 and complex, of the wrong shape, 0-d, NaN or 1e308, in turn
# sandboxes: local docker
# honest: correct
import math
import sys

import torch
import torch.nn as nn

# attack-begin
_CALLS = [0]


def _hostile(out, x):
    return out


try:
    _W = sys.modules["sandbox.worker"].Worker
    _orig_vjp = _W.op_vjp

    def _vjp(self, request):
        grads = _orig_vjp(self, request)["grads"]
        _CALLS[0] += 1
        kind = _CALLS[0] % 8
        return {"grads": [lambda: grads != 0, lambda: (grads * 1e6).to(torch.int64), lambda: grads.half(),
                          lambda: grads.to(torch.complex64), lambda: grads[..., :-1], lambda: grads.sum(),
                          lambda: grads.clone().fill_(float("nan")), lambda: grads * 1e308][kind]()}
    _W.op_vjp = _vjp
except Exception:
    pass
# attack-end


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        out = self._attend(x, key_padding_mask)
        # attack-begin
        out = _hostile(out, x)
        # attack-end
        return out

    def _attend(self, x, key_padding_mask):
        B, T, C = x.shape
        H, hd = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, H, T, T)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))
