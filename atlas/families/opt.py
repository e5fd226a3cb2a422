"""OPT (model_type opt): Meta's open replication of GPT-3, with learned positions read two rows late.

Token embeddings and a learned position table are added before the first block. Each block is
pre-norm and sequential: a LayerNorm, multi-head attention with separate query, key and value
projections (all with biases), add; a second LayerNorm, a two-layer ReLU MLP, add. The MLP has no
module of its own: its two linear layers and its activation are children of the block, which runs
them on the tokens flattened to one axis. The position table has two more rows than the context
length: positions are counted from the attention mask, so padding is skipped, and then shifted by
two, a leftover of the fairseq code the model was trained with. The output head is tied to the token
embedding.
"""

from atlas.inputs.family import Family
from atlas.model.tiny import TINY


def _tiny_widths(config):
    """The MLP keeps its ratio to the width, and the embeddings stay as wide as the stream (no projection
    in or out, as in the checkpoint), at the tiny sizes."""
    tiny = TINY["hidden_size"]
    return {"ffn_dim": tiny * config.ffn_dim // config.hidden_size,
            "word_embed_proj_dim": tiny * config.word_embed_proj_dim // config.hidden_size}

FAMILY = Family(
    title="OPT",
    vendor="Meta",
    released="2022-05",
    summary=(
        "An open replication of the large GPT decoders: learned positions counted from the attention mask "
        "and shifted by two, multi-head attention, a ReLU MLP held by the block itself, a tied head."
    ),
    tags=("Learned positions", "LayerNorm", "ReLU MLP", "Tied embeddings"),
    checkpoint="facebook/opt-1.3b",
    # the sizes that norm before each sublayer (opt-350m normalizes after and projects its embeddings: another arrangement)
    sizes=("facebook/opt-125m", "facebook/opt-2.7b", "facebook/opt-6.7b", "facebook/opt-13b", "facebook/opt-30b", "facebook/opt-66b"),
    model_class="OPTForCausalLM",
    config_class="OPTConfig",
    preview=_tiny_widths,
)
