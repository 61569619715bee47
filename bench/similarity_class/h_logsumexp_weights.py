import math
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        b, t, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))

        logits = torch.einsum("bhid,bhjd->bhij", q, k) * (d // h) ** -0.5
        future = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        logits = logits.masked_fill(future, -math.inf)
        if key_padding_mask is not None:
            logits = logits.masked_fill(~key_padding_mask[:, None, None, :], -math.inf)
        # softmax as exp(logit - log sum exp): log-space normalisation
        log_norm = torch.logsumexp(logits, dim=-1, keepdim=True)
        weights = torch.exp(logits - log_norm)

        out = torch.einsum("bhij,bhjd->bhid", weights, v)
        return self.proj(out.transpose(1, 2).reshape(b, t, d))
