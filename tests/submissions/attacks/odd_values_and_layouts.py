# attack: forward answers with NaN, infinities, 1e308, non-contiguous (transposed, strided, expanded) views, the wrong shape (an extra feature, a missing batch, 0-d, an empty batch, 5-D), in turn
# sandboxes: local docker
# honest: correct
import math

import torch
import torch.nn as nn

# attack-begin
_CALLS = [0]


def _hostile(out, x):
    _CALLS[0] += 1
    B, T, C = out.shape
    kind = _CALLS[0] % 11
    return [lambda: out.clone().fill_(float("nan")),
            lambda: out.clone().fill_(float("inf")) * torch.sign(out),
            lambda: out * 1e308,
            lambda: out.transpose(0, 1).contiguous().transpose(0, 1),
            lambda: torch.as_strided(out.reshape(-1).repeat(2), (B, T, C), (2 * T * C, 2 * C, 2)),
            lambda: out[:1].expand(B, T, C),
            lambda: torch.cat([out, out[..., :1]], dim=-1),
            lambda: out[0],
            lambda: out.sum(),
            lambda: out[:0],
            lambda: out[None, None]][kind]()
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
