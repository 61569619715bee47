"""The bug catalog: every mistake the diagnosis can name, in words a student understands
(sandbox.contract.BugInfo). Plain data (no torch), so the host can read it too (Exercise.catalog).
"""
from __future__ import annotations

from sandbox.contract import BugInfo

OUTPUT = ("test_equal_scores_average_the_past", "test_matches_multihead_attention",
          "test_padding_matches_multihead_attention")
LEAK = ("test_autograd_sees_no_future", "test_changing_later_inputs_changes_no_earlier_output")
PADDING = ("test_padding_matches_multihead_attention", "test_all_true_mask_equals_no_mask",
           "test_padded_inputs_do_not_reach_real_positions")


CATALOG: dict[str, BugInfo] = {
    "no_causal_mask": BugInfo(
        "The causal mask is missing",
        "Every position attends to every key, later ones included, so the model can read the tokens "
        "it is supposed to predict.",
        "Build allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril() and set the scores "
        "where it is False to -inf before the softmax.",
        OUTPUT + LEAK),
    "mask_after_softmax": BugInfo(
        "The causal mask is applied after the softmax",
        "Zeroing future weights after the softmax leaves the denominator with the future scores in it: "
        "the rows no longer sum to 1, and the future still shapes every weight.",
        "Mask the scores (set them to -inf) before the softmax, not the probabilities after it.",
        OUTPUT + LEAK),
    "causal_mask_off_by_one": BugInfo(
        "The causal mask is off by one on the diagonal",
        "Position t must attend to keys 0..t, itself included. Excluding the diagonal leaves position 0 "
        "with nothing to attend to (NaN); including t+1 lets every position see the next token.",
        "Use torch.ones(T, T).tril() (diagonal=0) as the allowed set, or triu(diagonal=1) as the masked set.",
        OUTPUT + LEAK),
    "wrong_scale": BugInfo(
        "The scores are scaled wrongly",
        "Scores must be divided by sqrt(head_dim), the size of one head's query and key vectors.",
        "Compute scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim) with head_dim = dim // n_heads, "
        "before the softmax.",
        OUTPUT),
    "view_without_contiguous": BugInfo(
        ".view() is called on a transposed (non-contiguous) tensor",
        "After transpose the tensor's memory is no longer in row order, so .view cannot reshape it.",
        "Use .reshape(B, T, dim), or call .contiguous() before .view().",
        OUTPUT + LEAK + PADDING + ("test_output_shape",)),
    "wrong_head_split": BugInfo(
        "The heads are split wrongly",
        "Head h must take columns h*head_dim..(h+1)*head_dim of q, k and v. Reshaping (B, T, dim) straight "
        "to (B, n_heads, T, head_dim), or to (B, T, head_dim, n_heads), mixes positions or columns "
        "between heads.",
        "q = q.view(B, T, n_heads, head_dim).transpose(1, 2)  # (B, n_heads, T, head_dim), same for k and v.",
        OUTPUT + LEAK + PADDING),
    "wrong_head_merge": BugInfo(
        "The heads are joined back wrongly",
        "The attention output (B, n_heads, T, head_dim) must go back to (B, T, n_heads, head_dim) before "
        "it is flattened to (B, T, dim); otherwise positions and heads get scrambled.",
        "out = (weights @ v).transpose(1, 2).reshape(B, T, dim).",
        OUTPUT + LEAK + PADDING),
    "qkv_order": BugInfo(
        "q, k and v are taken from the wrong part of qkv",
        "self.qkv's output is q, then k, then v, each a contiguous block of dim columns.",
        "q, k, v = self.qkv(x).split(dim, dim=-1).",
        OUTPUT),
    "padding_ignored": BugInfo(
        "The key padding mask is ignored",
        "Padding keys still get weight. Real positions look right only because the causal mask already "
        "hides the padding after them; padded positions attend to padding.",
        "Combine the masks: allowed = causal & key_padding_mask[:, None, None, :]  # (B, 1, 1, T) over keys.",
        ("test_padding_matches_multihead_attention",)),
    "padding_inverted": BugInfo(
        "The key padding mask is used with the opposite meaning",
        "In this exercise True marks a real token. Treating True as padding (nn.MultiheadAttention's "
        "convention) masks the real tokens and keeps the padding.",
        "Keep keys where key_padding_mask is True: allowed = causal & key_padding_mask[:, None, None, :].",
        PADDING + LEAK),
    "padding_on_queries": BugInfo(
        "The padding mask is applied to queries instead of keys",
        "Padding must remove keys (the last dimension of the scores). Masking rows instead leaves padded "
        "positions with nothing to attend to.",
        "Broadcast the mask over keys: key_padding_mask[:, None, None, :], not [:, None, :, None].",
        PADDING + LEAK),
    "mask_fill_not_neg_inf": BugInfo(
        "Masked scores are not set to -inf",
        "A masked score of 0 (or a score multiplied by 0) still gets weight exp(0) after the softmax, so "
        "the masked keys are not removed.",
        "scores = scores.masked_fill(~allowed, float('-inf')) before the softmax.",
        OUTPUT + LEAK + PADDING),
    # A correct mask never leaves a real position's row all -inf (the diagonal stays): NaN on every
    # probe comes from arithmetic on -inf (mistakes.SLOTS["nan"]).
    "nan_from_inf_mask": BugInfo(
        "The mask's -inf turns scores into NaN",
        "-inf only works as a value a score is set to, or added to an ordinary score. 0 * -inf is NaN, so "
        "an additive mask built as (1 - tril) * -inf is NaN at every key a position may see; multiplying "
        "the scores by a mask that holds -inf makes a negative score +inf. A NaN or +inf score makes the "
        "whole softmax row NaN.",
        "Set the scores directly: scores.masked_fill(~allowed, float('-inf')), or build an additive mask "
        "with torch.zeros(T, T).masked_fill(~allowed, float('-inf')).",
        OUTPUT + LEAK + PADDING),
    "softmax_wrong_dim": BugInfo(
        "The softmax runs over the wrong dimension",
        "Each query's weights over the keys must sum to 1: the softmax goes over the last dimension.",
        "weights = scores.softmax(dim=-1).",
        OUTPUT + LEAK + PADDING),
    "missing_output_projection": BugInfo(
        "self.proj is never applied",
        "The joined heads must go through the output projection self.proj.",
        "return self.proj(out).",
        OUTPUT),
    "params_depend_on_heads": BugInfo(
        "The parameter count grows with n_heads",
        "Heads split one dim-wide projection; they do not get full-size layers of their own.",
        "Use exactly self.qkv = nn.Linear(dim, 3 * dim) and self.proj = nn.Linear(dim, dim).",
        ("test_layers", "test_parameter_count") + OUTPUT),
    "wrong_layers": BugInfo(
        "The layers are not the two the exercise asks for",
        "The module must hold self.qkv = nn.Linear(dim, 3 * dim) and self.proj = nn.Linear(dim, dim), both "
        "with bias, so that its weights can be copied into nn.MultiheadAttention.",
        "Use exactly those two layers, with nn.Linear's default bias=True.",
        ("test_layers", "test_parameter_count") + OUTPUT),
    "nondeterministic_dropout": BugInfo(
        "The output is random (dropout)",
        "The exercise has no dropout. F.dropout and SDPA's dropout_p stay active even in eval mode, and "
        "an nn.Dropout makes training-mode outputs random.",
        "Remove the dropout.",
        OUTPUT + LEAK + PADDING),
    "fixed_max_length": BugInfo(
        "The causal mask only works up to a fixed length",
        "A mask built once for a maximum length breaks on longer sequences.",
        "Build the mask from T in forward: torch.ones(T, T, dtype=torch.bool, device=x.device).tril().",
        OUTPUT),
    "state_between_calls": BugInfo(
        "The output depends on an earlier call",
        "Something forward builds from one call's inputs (a mask, most often) is kept on the module and "
        "used again by a later call whose inputs differ: a mask cached by the sequence length alone gives "
        "a later call of the same length the first call's padding.",
        "Build the masks from this call's inputs in forward, or key a cache by everything it depends on "
        "(the length, the padding mask, the device and the dtype).",
        ("test_padding_matches_multihead_attention",)),
    "breaks_autograd": BugInfo(
        "Gradients do not flow through forward",
        "torch.no_grad(), .detach() or an in-place change of a tensor autograd still needs cuts or breaks "
        "the graph, so the layer cannot be trained.",
        "Remove no_grad/detach from forward and use out-of-place ops (masked_fill, not masked_fill_, on "
        "the softmax output).",
        ("test_autograd_sees_no_future",)),
    "mask_device_mismatch": BugInfo(
        "The mask is created on the CPU whatever the input's device",
        "On a GPU this fails with 'expected ... to be on the same device'. It was seen by running your "
        "module on PyTorch's meta device.",
        "Create masks with device=x.device.",
        (), advice=True),
    "uses_forbidden_builtin": BugInfo(
        "The layer delegates to nn.MultiheadAttention",
        "The exercise is to write attention yourself; nn.MultiheadAttention and "
        "F.multi_head_attention_forward do it for you, so the comparison tests give no points.",
        "Compute the scores, masks and softmax yourself (F.scaled_dot_product_attention is allowed).",
        OUTPUT),
    "sdpa_mask_and_is_causal": BugInfo(
        "SDPA gets both attn_mask and is_causal=True",
        "PyTorch's default CPU kernel happens to accept this, but its math backend and GPU kernels raise "
        "'Explicit attn_mask should not be set when is_causal=True'.",
        "Combine the causal and padding masks yourself and pass only attn_mask.",
        (), advice=True),
}
