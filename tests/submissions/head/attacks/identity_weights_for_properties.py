# attack: returns (v, identity weights): rows sum to 1, nothing above the diagonal, perfectly causal, and no attention at all
# sandboxes: local
# exercise: causal-attention-head
# (local only: it attacks the tests' logic, which is the same in every sandbox)
import math

import torch


def causal_attention(q, k, v):
    # attack-begin
    B, T, _ = q.shape
    return v.clone(), torch.eye(T, dtype=q.dtype).expand(B, T, T).clone()
    # attack-end
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])       # honest mistake: no causal mask
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
