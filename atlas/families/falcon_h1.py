"""Falcon-H1 (model_type falcon_h1): every block runs attention and a Mamba-2 mixer side by side.

Each block normalises the residual stream once with an RMSNorm and hands that one normed stream to
two mixers at the same time: grouped-query attention with rotary positions and a Mamba-2 state-space
mixer. Their outputs, each multiplied by its own constant (attention_out_multiplier and
ssm_out_multiplier), are summed and added to the stream in one step. A second RMSNorm and a SwiGLU MLP
follow, added as usual. So every block keeps both kinds of memory: a key/value cache that grows with
the context, and a fixed-size recurrent state per Mamba head.

Falcon-H1 was trained with maximal-update style scaling, and the constants live in the config rather
than in the weights. The token embeddings are multiplied by embedding_multiplier, the logits by
lm_head_multiplier. Inside the attention the keys are multiplied by key_multiplier before the rotary
angles are applied, and its input by attention_in_multiplier. The Mamba mixer multiplies its input by
ssm_in_multiplier, then multiplies its input projection by a fixed vector (transformers calls it the
mup vector) that gives each of the projection's five parts, the gate z, the scan input x, B, C and the
time step, its own constant from ssm_multipliers. In the MLP the gate projection's output is multiplied
by the first of mlp_multipliers before the SiLU and the down projection's output by the second. The
Mamba heads' outputs are gated by SiLU(z) without a norm (mamba_rms_norm is false), and no projection
has a bias except the convolution's. The output head is its own matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Falcon-H1",
    vendor="Technology Innovation Institute",
    released="2025-05",
    summary=(
        "Attention and a Mamba state-space mixer side by side in every block, summed on the same normed input, "
        "with maximal-update multipliers at every stage."
    ),
    tags=("Mamba-2", "Hybrid", "Parallel mixers", "SwiGLU", "Dense"),
    checkpoint="tiiuae/Falcon-H1-0.5B-Base",
    model_class="FalconH1ForCausalLM",
    config_class="FalconH1Config",
)
