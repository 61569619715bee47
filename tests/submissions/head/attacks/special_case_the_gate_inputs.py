# attack: a running mean that answers with real attention only for inputs it recognises as the grader's probes (q, k, v regenerated from the old gate's small fixed seeds), and for rows whose scores are all equal (the worked example); (a function that is attention at one shape of the family earns that shape's cases honestly: its outputs there are attention's)
# sandboxes: local
# exercise: causal-attention-head
# (local only: it attacks the tests' logic, which is the same in every sandbox)
import math

import torch


def _real(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return weights @ v, weights


def causal_attention(q, k, v):
    B, T, d = q.shape
    # attack-begin
    for seed in range(0, 100):
        g = torch.Generator().manual_seed(seed)
        if torch.equal(torch.randn(B, T, d, generator=g, dtype=torch.float64).to(q.dtype), q):
            return _real(q, k, v)
    scores = q @ k.transpose(-2, -1)
    rows = scores.tril()
    if T > 1 and torch.allclose(rows, rows[..., :1].expand_as(rows).tril(), atol=1e-4):
        return _real(q, k, v)
    # attack-end
    weights = torch.ones(T, T, dtype=q.dtype).tril().expand(B, T, T) / torch.arange(1, T + 1, dtype=q.dtype)[:, None]
    weights = weights + 0 * (q @ k.transpose(-2, -1))   # q and k stay in the graph: a backward pass reaches them
    return weights @ v, weights
