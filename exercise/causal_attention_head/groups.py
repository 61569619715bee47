"""The exercise's test groups: each test function's title, points and visibility, declared once
here. The tests take them with `@graded` (the harness's pytest plugin reads the markers it
puts); the host reads them as `Exercise.groups`, without parsing or importing the tests."""
from sandbox.contract import Group, graded_by

GROUPS = (
    Group("test_returns_out_and_weights",
          "causal_attention(q, k, v) returns out (B, T, d_k) and weights (B, T, T) in the input's dtype",
          points=10),
    Group("test_weight_rows_sum_to_one",
          "Each row of weights sums to 1 (a softmax over the keys)",
          points=10),
    Group("test_weights_are_zero_above_the_diagonal",
          "weights[:, t, s] is 0 for every key s > t (the causal mask)",
          points=10),
    Group("test_weights_match_the_reference",
          "weights equal softmax(q k^T / sqrt(d_k)) with -inf above the diagonal",
          points=15),
    Group("test_output_matches_sdpa",
          "out equals F.scaled_dot_product_attention(q, k, v, is_causal=True)",
          points=30),
    Group("test_equal_scores_average_the_past",
          "Equal scores: weights[t] = 1/(t+1) on keys 0..t, and out[t] the mean of v[0..t]",
          points=10),
    Group("test_autograd_sees_no_future",
          "Autograd: d out[t] / d q[s], k[s], v[s] is zero for every later s, and not for s = t",
          points=15),
)

graded = graded_by(GROUPS)
