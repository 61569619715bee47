"""The reference again, written out by hand with each known mistake as a switch.

`attention(weights, n_heads, x, mask, mistakes)` computes what a module with exactly those mistakes
outputs (float64). The diagnosis compares a student's output with it, for single mistakes and pairs:
the one that matches to float tolerance names the bug, whatever the code looked like.

A mistake is (bug id, variant). Rows with no key left to attend to come out as NaN (masked_fill and
softmax) or, with `empty_rows_zero`, as zero attention (what F.scaled_dot_product_attention gives).

Mistakes with a free parameter (FITTED) take its value as `value`: the factor the scores are scaled
by, the number masked scores are set to, or the number a mask adds to the scores (ADDITIVE). The
diagnosis fits it to the student's output. A mask made for a fixed length (BUFFERS) takes that length
as `value`, which the diagnosis measures on the student's module. Realisations are covered by a parameter, not listed one
by one: every order of the merged axes (MERGES), any additive constant of either sign.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch

Mistake = tuple[str, str]

# The heads' output (B, H, T, hd) permuted and read as (B, T, dim): every order of the four axes but
# the right one (B, T, H, hd), by the axes it puts first. Four have names of their own.
AXES = "BHTd"
NAMED_MERGES: dict[tuple[int, ...], str] = {(0, 1, 2, 3): "no_transpose", (0, 2, 3, 1): "hd_major", (2, 0, 1, 3): "time_major",
                (0, 1, 3, 2): "positions_last"}
MERGES: dict[tuple[int, ...], str] = {
    perm: NAMED_MERGES.get(perm, "read_as_" + "".join(AXES[i] for i in perm))
    for perm in itertools.permutations(range(4)) if perm != (0, 2, 1, 3)}
MERGE_ORDER: dict[str | None, tuple[int, ...]] = {name: perm for perm, name in MERGES.items()}

STATISTIC_FILLS = ("row_min", "row_mean", "row_max", "tensor_min", "allowed_mean", "allowed_min")

# Each slot holds mutually exclusive variants; a pair of mistakes takes two different slots.
SLOTS: dict[str, list[Mistake]] = {
    "causal": [("no_causal_mask", "missing"), ("causal_mask_off_by_one", "excludes_self"),
               ("causal_mask_off_by_one", "includes_next"), ("causal_mask_off_by_one", "offset_+2"),
               ("causal_mask_off_by_one", "offset_-2"), ("mask_after_softmax", "zeroed_after"),
               ("mask_after_softmax", "causal_zeroed_after")],
    "fill": [("mask_fill_not_neg_inf", "zero"), ("mask_fill_not_neg_inf", "causal_zero"),
             ("mask_fill_not_neg_inf", "row_min"), ("mask_fill_not_neg_inf", "row_mean"),
             ("mask_fill_not_neg_inf", "row_max"), ("mask_fill_not_neg_inf", "tensor_min"),
             ("mask_fill_not_neg_inf", "allowed_mean"), ("mask_fill_not_neg_inf", "allowed_min")],
    "scale": [("wrong_scale", "sqrt_dim"), ("wrong_scale", "none"), ("wrong_scale", "multiplied"),
              ("wrong_scale", "head_dim_not_sqrt"), ("wrong_scale", "after_softmax"),
              # a scale that follows the sequence's length, not the head's width: 1/sqrt(T), 1/T
              ("wrong_scale", "sqrt_length"), ("wrong_scale", "length")],
    "qkv": [("qkv_order", "k_q_v"), ("qkv_order", "q_v_k"), ("qkv_order", "v_k_q"),
            ("qkv_order", "k_v_q"), ("qkv_order", "v_q_k"), ("qkv_order", "interleaved_per_head")],
    "split": [("wrong_head_split", "no_transpose"), ("wrong_head_split", "strided"),
              ("wrong_head_split", "strided_merged_contiguous"), ("wrong_head_split", "feature_major")],
    "merge": [("wrong_head_merge", name) for name in MERGES.values()],
    "softmax": [("softmax_wrong_dim", "queries"), ("softmax_wrong_dim", "heads")],
    "padding": [("padding_ignored", "ignored"), ("padding_inverted", "inverted"),
                ("padding_on_queries", "queries")],
    "proj": [("missing_output_projection", "missing")],
    # Arithmetic on -inf: (1 - tril) * -inf is 0 * -inf = NaN at every key a position may see; a
    # multiplicative mask holding -inf makes a negative future score +inf; a mask with -inf in it
    # multiplied by tril is -inf * 0 = NaN at every future key. The padding mask built the first way
    # comes first: NaN with a mask only is that one, and NaN everywhere is not.
    "nan": [("nan_from_inf_mask", "padding_zero_times_inf"), ("nan_from_inf_mask", "zero_times_inf"),
            ("nan_from_inf_mask", "scores_times_inf"), ("nan_from_inf_mask", "masked_times_tril")],
}
SINGLES: list[Mistake] = [m for variants in SLOTS.values() for m in variants]
# Pairs take the merges with a name only, and the constant fills: a second mistake beside a rare
# order of axes or a fill from the data is not worth the models every unexplained output would cost;
# a NaN output hides any second mistake.
PAIRED = {**{slot: v for slot, v in SLOTS.items() if slot != "nan"}, "merge": [("wrong_head_merge", name) for name in NAMED_MERGES.values()],
          "scale": SLOTS["scale"][:5],
          "fill": SLOTS["fill"][:2],
          "causal": SLOTS["causal"] + [("fixed_max_length", "open_past_16"), ("fixed_max_length", "open_past_32")]}
PAIRS: list[tuple[Mistake, Mistake]] = [
    (a, b) for (slot_a, va), (slot_b, vb) in itertools.combinations(PAIRED.items(), 2)
    for a in va for b in vb]
# Fitted singles: (mistake, grid of starting values for the fit).
FITTED: list[tuple[Mistake, tuple[float, ...]]] = [
    (("wrong_scale", "factor"), tuple(10 ** (k / 4) for k in range(-12, 13))),
    (("mask_fill_not_neg_inf", "value"), (-1e4, -1e3, -300, -100, -30, -10, -3, -1, -0.3, 0, 0.3, 1, 3, 10, 100)),
    (("mask_fill_not_neg_inf", "causal_value"), (-1e4, -1e3, -300, -100, -30, -10, -3, -1, -0.3, 0, 0.3, 1, 3, 10)),
    (("mask_fill_not_neg_inf", "padding_value"), (-1e4, -1e3, -100, -30, -10, -3, -1, -0.3, 0, 0.3, 1, 3, 10)),
    # Masks added to the scores (see ADDITIVE): a constant of any size, the dtype's most negative
    # number included (Hugging Face's mask * finfo.min). Between -5 and -50 a blocked key keeps a
    # weight of e^c, 1e-2 to 1e-22, and the output moves with c by little: starts every few units
    # there (log(mask + 1e-6) adds -13.8, log(mask.clamp(1e-9)) -20.7), or the fit stalls.
    (("mask_fill_not_neg_inf", "additive"), (-1e4, -1e3, -100, -50, -40, -30, -25, -20, -17, -14, -12, -10, -8, -6,
                                             -5, -3, -1, -0.3)),
    (("mask_fill_not_neg_inf", "padding_additive"), (-1e3, -100, -50, -40, -30, -25, -20, -17, -14, -12, -10, -8, -6,
                                                     -5, -3, -1, -0.3)),
    # Added to the kept keys, a large constant rounds their scores to its own precision, which any
    # constant of the same binary order of magnitude does alike: one start inside each order where
    # that shows in float32 or float64 (float16's most negative number, -65504, is in the one from
    # -2**15 to -2**16), and one at its edge (-2**15 itself rounds the scores either side apart).
    (("padding_inverted", "additive"), (-1.79e308, -3.4e38, -1e30, -1e9, -1e4, -1e3, -100, -30, -10, -3, -1)
     + tuple(-m * 2.0 ** k for k in range(10, 57) for m in (1.0, 1.5))),
]
# Fitted masks whose parameter is a number added to the scores: which keys get it, by mask part,
# and whether the keys a mask blocks get it or the ones it keeps. The number is negative: a softmax
# does not see a number added to a whole row, so +c on the blocked keys is -c on the kept ones (the
# inverted mask), and 0 is no mask at all.
ADDITIVE: dict[str | tuple[str, str] | None, tuple[str, str]] = {"additive": ("both", "blocked"), "padding_additive": ("padding", "blocked"),
            ("padding_inverted", "additive"): ("padding", "kept")}
NEGATIVE = {("mask_fill_not_neg_inf", "additive"), ("mask_fill_not_neg_inf", "padding_additive"),
            ("padding_inverted", "additive")}
# A causal mask made for a fixed number N of positions, and what it does past N: its free
# parameter is N, measured on the student's module (the longest sequence its output is right for),
# not fitted. open_past: the mask padded with "allowed" (F.pad of an additive mask with zeros), so
# every key from N on is seen; empty_past: padded with "blocked" (rows past N have no key left);
# blocked_past: past N only the diagonal; clamped: positions clamped at N - 1, so the queries from
# N - 1 on see every key; periodic: positions taken modulo N; chunked: attention within blocks of N.
BUFFERS: list[Mistake] = [("fixed_max_length", v) for v in
                          ("open_past", "empty_past", "blocked_past", "clamped", "periodic", "chunked")]


def _buffer(variant: str, N: int, allowed: torch.Tensor) -> torch.Tensor:
    """The (T, T) keys a mask made for N positions allows, where `allowed` is the right mask."""
    T = allowed.shape[-1]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    inside = allowed & (i < N) & (j < N)
    return {"open_past": lambda: allowed | (j >= N), "empty_past": lambda: inside,
            "blocked_past": lambda: inside | (i == j),
            "clamped": lambda: j.clamp(max=N - 1) <= i.clamp(max=N - 1),
            "periodic": lambda: j % N <= i % N, "chunked": lambda: allowed & (i // N == j // N)}[variant]()


# The causal mask's diagonal: tril(offset) is what position t may attend to.
OFFSETS: dict[str | None, int] = {"excludes_self": -1, "includes_next": 1, "offset_+2": 2, "offset_-2": -2}


def attention(weights: dict, n_heads: int, x: torch.Tensor, mask: torch.Tensor | None,
              mistakes=(), *, empty_rows_zero: bool = False, value=None, dtype: str = "float64") -> torch.Tensor:
    """Output (B, T, dim) in float64 of attention with these mistakes; `value`: a fitted mistake's
    parameter (a float or a 0-d float64 tensor); `dtype`: the one a mask added to the scores is
    added in (a large constant wipes out the scores in float32 sooner than in float64)."""
    on = dict(mistakes)
    x = x.double()
    B, T, C = x.shape
    H, hd = n_heads, C // n_heads
    qkv = x @ weights["qkv.weight"].T + weights["qkv.bias"]                      # (B, T, 3C)
    order = on.get("qkv_order")
    if order == "interleaved_per_head":
        grouped = qkv.reshape(B, T, H, 3, hd)
        q, k, v = (grouped[..., i, :].reshape(B, T, C) for i in range(3))
    else:
        blocks = dict(zip("qkv", qkv.split(C, dim=-1)))
        names = order.split("_") if order else ["q", "k", "v"]
        q, k, v = (blocks[n] for n in names)

    split = on.get("wrong_head_split")

    def heads(t):                                                                 # -> (B, H, T, hd)
        if split == "feature_major":  # (B, dim, T) read as (B, H, T, hd)
            return t.transpose(1, 2).reshape(B, H, T, hd)
        if split == "no_transpose":
            return t.reshape(B, H, T, hd)
        if split in ("strided", "strided_merged_contiguous"):
            return t.reshape(B, T, hd, H).permute(0, 3, 1, 2)
        return t.reshape(B, T, H, hd).transpose(1, 2)

    q, k, v = heads(q), heads(k), heads(v)
    s = q @ k.transpose(-2, -1)                                                   # (B, H, T, T)
    scale = on.get("wrong_scale")
    if scale == "factor":
        s = s * value
    else:
        scaled: dict[str | None, Callable[[], torch.Tensor]] = {
            "sqrt_dim": lambda: s / math.sqrt(C), "none": lambda: s, "after_softmax": lambda: s,
            "multiplied": lambda: s * math.sqrt(hd), "head_dim_not_sqrt": lambda: s / hd,
            "sqrt_length": lambda: s / math.sqrt(T), "length": lambda: s / T}
        s = scaled.get(scale, lambda: s / math.sqrt(hd))()   # only the one the mistake names is computed

    ones = torch.ones(T, T, dtype=torch.bool)
    offset = OFFSETS.get(on.get("causal_mask_off_by_one"), 0)
    allowed = ones if "no_causal_mask" in on else ones.tril(offset)
    buffer = on.get("fixed_max_length")
    if buffer is not None:  # open_past_16: open_past at N = 16 (the variants a pair takes)
        variant, _, length = buffer.partition("_past_")
        allowed = _buffer(variant + "_past" if length else buffer, int(length or value), allowed)
    allowed = allowed[None, None]                                                 # (1, 1, T, T)
    inf = on.get("nan_from_inf_mask")
    if inf in ("zero_times_inf", "scores_times_inf", "masked_times_tril"):  # the causal part, so
        s = {"zero_times_inf": lambda: s + (~allowed).double() * -math.inf,  # nothing is left to mask
             "scores_times_inf": lambda: s * torch.where(allowed, 1.0, -math.inf).double(),
             "masked_times_tril": lambda: s.masked_fill(~allowed, -math.inf) * allowed.double()}[inf]()
        allowed = torch.ones_like(allowed)
    elif inf == "padding_zero_times_inf" and mask is not None:
        s, mask = s.masked_fill(~allowed, -math.inf) + (~mask[:, None, None, :]).double() * -math.inf, None
    fill = on.get("mask_fill_not_neg_inf")
    added = ADDITIVE.get(fill) or (ADDITIVE[("padding_inverted", "additive")]
                                   if on.get("padding_inverted") == "additive" else None)
    if added is not None:
        part, which = added
        keys = allowed if part == "both" else torch.ones_like(allowed)
        if mask is not None:
            keys = keys & mask[:, None, None, :]
        if which == "blocked":
            keys = ~keys
        real = getattr(torch, dtype)
        number = torch.as_tensor(value, dtype=torch.float64).clamp(min=torch.finfo(real).min).to(real)
        s = (s.to(real) + torch.where(keys, number, torch.zeros((), dtype=real))).double()
        allowed = allowed if part == "padding" else torch.ones_like(allowed)
        mask = None
    elif fill in STATISTIC_FILLS:  # masked scores set to a statistic of the scores (of the allowed ones: allowed_*)
        if mask is not None:
            allowed = allowed & mask[:, None, None, :]
        kept = allowed.expand_as(s)
        stat = {"row_min": lambda: s.amin(-1, keepdim=True), "row_mean": lambda: s.mean(-1, keepdim=True),
                "row_max": lambda: s.amax(-1, keepdim=True), "tensor_min": lambda: s.amin(),
                "allowed_mean": lambda: (s * kept).sum(-1, keepdim=True) / kept.sum(-1, keepdim=True),
                "allowed_min": lambda: s.masked_fill(~kept, math.inf).amin(-1, keepdim=True)}[fill]()
        s, allowed, mask = torch.where(allowed, s, stat), torch.ones_like(allowed), None
    elif fill == "padding_value" and mask is not None:  # padding scores set to a number, causal done right
        s = torch.where(mask[:, None, None, :], s, torch.as_tensor(value, dtype=s.dtype))
        mask = None
    if fill in ("causal_zero", "causal_value"):  # future scores set to a number, padding done right
        s = torch.where(allowed, s, torch.as_tensor(0.0 if fill == "causal_zero" else value, dtype=s.dtype))
        allowed = torch.ones_like(allowed)
    after = on.get("mask_after_softmax")
    causal_after: torch.Tensor | None = None
    if after == "causal_zeroed_after":  # padding masked before the softmax, the causal part after it
        causal_after, allowed = allowed, torch.ones_like(allowed)
    if mask is not None:
        if on.get("padding_inverted") == "inverted":
            allowed = allowed & ~mask[:, None, None, :]
        elif "padding_on_queries" in on:
            allowed = allowed & mask[:, None, :, None]
        elif "padding_ignored" not in on:
            allowed = allowed & mask[:, None, None, :]
    dims: dict[str | None, int] = {"queries": -2, "heads": 1}
    dim = dims.get(on.get("softmax_wrong_dim"), -1)
    if after == "zeroed_after":
        w = s.softmax(dim).masked_fill(~allowed, 0.0)
    elif after == "causal_zeroed_after":
        assert causal_after is not None  # set just above for this variant
        w = s.masked_fill(~allowed, float("-inf")).softmax(dim).masked_fill(~causal_after, 0.0)
    elif fill in ("zero", "value"):
        w = torch.where(allowed, s, torch.as_tensor(0.0 if fill == "zero" else value, dtype=s.dtype)).softmax(dim)
    else:
        w = s.masked_fill(~allowed, float("-inf")).softmax(dim)
        if empty_rows_zero:
            w = torch.where(allowed.any(-1, keepdim=True), w, torch.zeros(()))
    if scale == "after_softmax":
        w = w / math.sqrt(hd)
    o = w @ v                                                                     # (B, H, T, hd)
    merge = on.get("wrong_head_merge") or ("hd_major" if split == "strided" else None)
    o = o.permute(*MERGE_ORDER.get(merge, (0, 2, 1, 3))).reshape(B, T, C)
    if "missing_output_projection" in on:
        return o
    return o @ weights["proj.weight"].T + weights["proj.bias"]
