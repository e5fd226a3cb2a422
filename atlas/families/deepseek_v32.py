"""DeepSeek-V3.2-Exp (model_type deepseek_v32): DeepSeek-V3 with a lightning indexer that picks, for each query, the past positions attention may read.

The blocks are DeepSeek-V3's: an RMSNorm before multi-head latent attention (MLA), an RMSNorm before
the feed-forward sublayer, dense SwiGLU MLPs on the first first_k_dense_replace blocks and a
sigmoid-routed mixture of experts with a shared expert on every later block. What is new sits inside
each attention: DeepSeek Sparse Attention (DSA). A small lightning indexer, with index_n_heads heads of
index_head_dim dimensions, scores every query against every past position: its queries are projected
from the attention's own query latent, its single key per position from the block's input through a
LayerNorm, and the first qk_rope_head_dim dimensions of both are rotated (in halves, not in pairs as the
attention's are). Each head's score is a ReLU of the scaled dot product; a per-head weight, projected
from the block's input, mixes the heads into one score per position. The index_topk best positions are
kept, and the latent attention is masked to them; when a query has no more past positions than that,
nothing is dropped.

The released checkpoint also stores a multi-token-prediction (MTP) block after the last layer;
transformers never builds it, so the atlas counts it only where it checks the files.
"""

from __future__ import annotations

from atlas.families.deepseek_v3 import multi_token_prediction_tensors
from atlas.inputs.family import Family

FAMILY = Family(
    title="DeepSeek-V3.2-Exp",
    vendor="DeepSeek",
    released="2025-09",
    summary=(
        "DeepSeek-V3 with sparse attention: a lightning indexer scores past positions for each query and "
        "latent attention reads only the best index_topk of them."
    ),
    tags=("Sparse attention", "Latent attention", "Shared expert", "Dense first blocks"),
    checkpoint="deepseek-ai/DeepSeek-V3.2-Exp",
    model_class="DeepseekV32ForCausalLM",
    config_class="DeepseekV32Config",
    config_overrides={"num_nextn_predict_layers": 0},
    override_reasons={"num_nextn_predict_layers": (
        "transformers builds no multi-token-prediction block, so the model is built without one; the block's "
        "tensors, which the released files do hold, are added back to the checkpoint check (stored_extras)."
    )},
    stored_extras=multi_token_prediction_tensors,
    config_defaults={
        "head_dim": "config.json does not give it and DeepseekV32Config does not keep its default: it sets head_dim to "
                    "qk_rope_head_dim (64), the width its rotary angles are computed for",
    },
)
