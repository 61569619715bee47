# attack: weights that fall off with distance plus a 1e-3 trace of q . k (rows sum to 1, nothing above the diagonal, causal, and they move with q and k): no attention, yet the old gate's test, "the weights change when q or k change", passed
# sandboxes: local
# exercise: causal-attention-head
# (local only: it attacks the tests' logic, which is the same in every sandbox)
import math

import torch


def causal_attention(q, k, v):
    B, T, d = q.shape
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    # attack-begin
    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).to(q.dtype)
    scores = -0.7 * distance + 1e-3 * (q @ k.transpose(-2, -1))
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return weights @ v, weights
    # attack-end
    weights = (~future).to(q.dtype).expand(B, T, T) / torch.arange(1, T + 1, dtype=q.dtype)[:, None]
    weights = weights + 0 * (q @ k.transpose(-2, -1))   # q and k stay in the graph: a backward pass reaches them
    return weights @ v, weights
