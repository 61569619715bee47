"""The exercise's test groups: each test function's title, points and visibility, declared once
here. The tests take them with `@graded` (the harness's pytest plugin reads the markers it
puts); the host reads them as `Exercise.groups`, without parsing or importing the tests."""
from sandbox.contract import Group, graded_by

GROUPS = (
    Group("test_layers",
          "__init__(dim, n_heads) builds self.qkv and self.proj as nn.Linear",
          points=5),
    Group("test_output_shape",
          "forward(x) and forward(x, key_padding_mask) return a tensor shaped like x",
          points=5),
    Group("test_equal_scores_average_the_past",
          "With every score equal, position t outputs proj(mean of v over keys 0..t)",
          points=10),
    Group("test_matches_multihead_attention",
          "Same output as nn.MultiheadAttention with your weights copied in",
          points=30),
    Group("test_padding_matches_multihead_attention",
          "With right padding, every position matches nn.MultiheadAttention",
          points=12),
    Group("test_all_true_mask_equals_no_mask",
          "A mask with no padding gives the same output as no mask",
          points=4),
    Group("test_padded_inputs_do_not_reach_real_positions",
          "Changing the inputs at padded positions changes no real position's output",
          points=4),
    Group("test_autograd_sees_no_future",
          "Autograd: d out[t] / d x[s] is zero for every later s, and non-zero for s = t",
          points=12),
    Group("test_changing_later_inputs_changes_no_earlier_output",
          "Replacing the inputs from position s on leaves every output before s unchanged",
          points=8),
    Group("test_parameter_count",
          "4 * dim * dim + 4 * dim parameters, the same for every n_heads",
          points=10),
    Group("test_runs_on_any_device",
          "Advice: the layer creates its tensors on the input's device",
          points=0),
)

graded = graded_by(GROUPS)
