# attack: error messages hold bidi overrides and isolates, C1 controls (CSI, NEL, OSC in one byte), a lone surrogate and surrogate escapes, which the JSON, the platforms' files and the terminal must neither carry nor choke on
# sandboxes: local docker
# path: cold (it aims at the terminal of grade FILE)
import math

import torch
import torch.nn as nn

# attack-begin
_TEXT = "score \u202e001\u202c \u2066x\u2069 \x9b2J\x85\x9d0;title\x9c lone \ud800 escaped \udcfc end"
# attack-end


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
# attack-begin
        raise ValueError(_TEXT)
        # attack-end
        B, T, C = x.shape
        H, hd = self.n_heads, self.head_dim
        q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in self.qkv(x).split(C, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))
