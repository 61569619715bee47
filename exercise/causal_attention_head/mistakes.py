"""The reference written out by hand, with each known mistake as a switch.

`attention(q, k, v, mistake, value)` returns what a function with exactly that mistake returns,
`(out, weights)` in float64. The diagnosis compares a student's answers with it: the one mistake
that reproduces both, on every probe, names the bug, whatever the code looked like.

A mistake is (bug id, variant). Two have a free parameter (FITTED), passed as `value`: the factor
the raw scores q k^T are multiplied by (wrong_scale, "factor"), and the number masked scores are set
to (mask_fill_not_neg_inf, "value"). The diagnosis reads it off the student's weights.
"""
from __future__ import annotations

import math

import torch

Mistake = tuple[str, str]

SINGLES: list[Mistake] = [
    ("no_causal_mask", "missing"),
    ("mask_after_softmax", "zeroed_after"),
    ("causal_mask_off_by_one", "excludes_self"), ("causal_mask_off_by_one", "excludes_self_empty_row"),
    ("causal_mask_off_by_one", "includes_next"),
    ("wrong_scale", "after_softmax"),
    ("softmax_wrong_dim", "queries"), ("softmax_wrong_dim", "batch"),
    ("mask_fill_not_neg_inf", "zero"),
    ("nan_from_inf_mask", "zero_times_inf"), ("nan_from_inf_mask", "scores_times_inf"),
    ("nan_from_inf_mask", "masked_times_tril"),
]
FITTED: list[Mistake] = [("wrong_scale", "factor"), ("mask_fill_not_neg_inf", "value")]
# The causal mask's diagonal: tril(offset) is what position t may attend to.
# excludes_self_empty_row: the same mask written as a loop over the keys before t (k[:, :t]), whose
# row 0 is an empty softmax: zero weights and a zero output where the masked softmax gives NaN.
OFFSETS: dict[str | None, int] = {"excludes_self": -1, "excludes_self_empty_row": -1, "includes_next": 1}


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mistake: Mistake | None = None,
              value: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(out (B, T, d_k), weights (B, T, T)) in float64 of causal attention with this mistake."""
    bug, variant = mistake or (None, None)
    q, k, v = q.double(), k.double(), v.double()
    T, d_k = q.shape[-2], q.shape[-1]
    raw = q @ k.transpose(-2, -1)                                                   # (B, T, T)
    if (bug, variant) == ("wrong_scale", "factor"):
        assert value is not None, "the factor variant is given its value"
        s = raw * value
    else:
        s = raw / math.sqrt(d_k)
    ones = torch.ones(T, T, dtype=torch.bool)
    allowed = ones if bug == "no_causal_mask" else ones.tril(OFFSETS.get(variant, 0))   # (T, T)
    if bug == "mask_after_softmax":
        w = s.softmax(dim=-1).masked_fill(~allowed, 0.0)
    elif bug == "mask_fill_not_neg_inf":
        w = torch.where(allowed, s, torch.tensor(0.0 if variant == "zero" else value, dtype=s.dtype)).softmax(-1)
    elif variant == "zero_times_inf":   # s + (1 - allowed) * -inf: 0 * -inf is NaN at every allowed key
        w = (s + (~allowed).double() * float("-inf")).softmax(dim=-1)
    elif variant == "scores_times_inf":  # s * where(allowed, 1, -inf): a negative future score becomes +inf
        w = (s * torch.where(allowed, 1.0, float("-inf")).double()).softmax(dim=-1)
    elif variant == "masked_times_tril":  # s.masked_fill(future, -inf) * tril: -inf * 0 is NaN at every future key
        w = (s.masked_fill(~allowed, float("-inf")) * allowed.double()).softmax(dim=-1)
    else:
        dims: dict[str | None, int] = {"queries": -2, "batch": 0}
        dim = dims.get(variant, -1) if bug == "softmax_wrong_dim" else -1
        w = s.masked_fill(~allowed, float("-inf")).softmax(dim=dim)
        if variant == "excludes_self_empty_row":
            w = w.nan_to_num(nan=0.0)   # only row 0 has no key left
    if (bug, variant) == ("wrong_scale", "after_softmax"):  # the weights divided, the scores not
        s = raw
        w = s.masked_fill(~allowed, float("-inf")).softmax(dim=-1) / math.sqrt(d_k)
    return w @ v, w
