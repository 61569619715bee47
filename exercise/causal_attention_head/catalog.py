"""The bug catalog of the single-head exercise, in words a student understands.

Plain data (no torch), so the host can read it too. Each entry's `affects` names the test groups
(test function names) whose points the mistake costs. The ids are the project's contract ids where
one fits (DESIGN.md); `nan_from_inf_mask` is this exercise's own: the one way single-head causal
attention makes NaN with a correct-looking mask (below).
"""
from __future__ import annotations

from sandbox.contract import BugInfo

INTERFACE = "test_returns_out_and_weights"
ROWS, ZEROS = "test_weight_rows_sum_to_one", "test_weights_are_zero_above_the_diagonal"
WEIGHTS, OUT, EQUAL = "test_weights_match_the_reference", "test_output_matches_sdpa", "test_equal_scores_average_the_past"
CAUSAL = "test_autograd_sees_no_future"
VALUES = (WEIGHTS, OUT, EQUAL)

CATALOG: dict[str, BugInfo] = {
    "no_causal_mask": BugInfo(
        title="The causal mask is missing",
        explanation="Every position attends to every key, later ones included, so the model can read the "
                    "tokens it is supposed to predict.",
        fix="Before the softmax: scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, "
            "device=q.device).triu(1), float('-inf')), and use the result (masked_fill is not in place).",
        affects=(ZEROS, *VALUES, CAUSAL)),
    "mask_after_softmax": BugInfo(
        title="The causal mask is applied after the softmax",
        explanation="Zeroing the future weights after the softmax leaves the future scores in its denominator: "
                    "the rows no longer sum to 1, and every weight still depends on later keys.",
        fix="Set the future scores to -inf before the softmax, not the weights to 0 after it.",
        affects=(ROWS, *VALUES, CAUSAL)),
    "causal_mask_off_by_one": BugInfo(
        title="The causal mask is off by one on the diagonal",
        explanation="Position t must attend to keys 0..t, itself included. Excluding the diagonal leaves "
                    "position 0 with no key at all (a row of -inf: NaN after the softmax); including t+1 "
                    "lets every position see the next one.",
        fix="Mask exactly the keys above the diagonal: torch.ones(T, T, dtype=torch.bool).triu(diagonal=1) "
            "is the masked set (or tril(diagonal=0) the allowed one).",
        affects=(ROWS, ZEROS, *VALUES, CAUSAL)),
    "wrong_scale": BugInfo(
        title="The scores are scaled wrongly",
        explanation="The scores q @ k^T must be divided by sqrt(d_k), the size of one query or key vector, "
                    "before the softmax.",
        fix="scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]).",
        affects=(ROWS, *VALUES)),
    "softmax_wrong_dim": BugInfo(
        title="The softmax runs over the wrong dimension",
        explanation="Each query's weights over the keys must sum to 1: the softmax goes over the last "
                    "dimension of the (B, T, T) scores, the keys.",
        fix="weights = scores.softmax(dim=-1).",
        affects=(ROWS, ZEROS, *VALUES, CAUSAL)),
    "mask_fill_not_neg_inf": BugInfo(
        title="Masked scores are not set to -inf",
        explanation="A masked score set to 0 or another ordinary number (or kept by torch.tril(scores)) "
                    "still gets a weight exp(score) after the softmax, so the future is not removed.",
        fix="scores = scores.masked_fill(future, float('-inf')) before the softmax.",
        affects=(ZEROS, *VALUES, CAUSAL)),
    # What "-inf rows made NaN" comes to in one causal head: no row of a correct mask is ever all
    # -inf (the diagonal stays), so NaN comes from arithmetic on -inf: an additive mask built as
    # (1 - tril) * -inf puts 0 * -inf = NaN at every allowed key; a multiplicative mask holding
    # -inf turns a negative future score into +inf. (A mask that drops the diagonal, the other way
    # to a NaN row, is causal_mask_off_by_one.)
    "nan_from_inf_mask": BugInfo(
        title="The mask's -inf turns scores into NaN",
        explanation="-inf only works as a value a score is set to (or added to an ordinary score). "
                    "0 * -inf is NaN, so an additive mask built as (1 - tril) * -inf is NaN at every key "
                    "a position may see; multiplying the scores by a mask that holds -inf makes a negative "
                    "score +inf. A NaN or +inf score makes the whole softmax row NaN.",
        fix="Build the additive mask with torch.where: torch.zeros(T, T).masked_fill(future, float('-inf')), "
            "or set the scores directly: scores.masked_fill(future, float('-inf')).",
        affects=(ROWS, ZEROS, *VALUES, CAUSAL)),
    "breaks_autograd": BugInfo(
        title="Gradients do not flow through the function",
        explanation="torch.no_grad(), .detach() or an in-place change of a tensor autograd still needs cuts or "
                    "breaks the graph, so attention built on it cannot be trained.",
        fix="Remove no_grad/detach and use out-of-place ops (masked_fill, not masked_fill_, on a tensor "
            "autograd needs).",
        affects=(CAUSAL,)),
    "uses_forbidden_builtin": BugInfo(
        title="The function delegates to PyTorch's attention",
        explanation="The exercise is to write attention yourself; F.scaled_dot_product_attention and "
                    "nn.MultiheadAttention do it for you, so the comparison tests give no points (and in the "
                    "grader, calls to them fail).",
        fix="Compute the scores, the mask and the softmax yourself.",
        affects=(INTERFACE, ROWS, ZEROS, *VALUES, CAUSAL)),
}
