# bug: mask_after_softmax
import torch


def causal_attention(q, k, v):
    T, d_k = q.shape[1], q.shape[2]
    w = torch.einsum("btd,bsd->bts", q, k).div(d_k ** 0.5).softmax(-1)
    w = w * torch.tril(torch.ones(T, T, dtype=q.dtype))
    return torch.einsum("bts,bsd->btd", w, v), w
