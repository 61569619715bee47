import torch


def causal_attention(q, k, v):
    d_k = q.size(-1)
    scores = torch.einsum("btd,bsd->bts", q, k) * d_k ** -0.5
    t = torch.arange(q.size(1), device=q.device)
    allowed = t[None, :] <= t[:, None]                                 # key s <= query t
    scores = torch.where(allowed, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("bts,bsd->btd", weights, v)
    return out, weights
