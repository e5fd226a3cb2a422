"""Falcon 7B (model_type falcon): TII's decoder, with parallel blocks and one key/value head.

Each block normalises its input once and feeds that tensor both to the attention and to the MLP; the
two outputs are added to the stream together with the input (parallel_attn), so one LayerNorm serves
the whole block. The attention is multi-query: every query head reads the same single key head and
the same single value head, so the cache holds one key and one value vector per layer and position
instead of one per head. Query, key and value come out of one fused projection (all the queries,
then the one key, then the one value), with no biases anywhere in the block. Positions are rotary on
the full head width. The MLP is two layers, four times the width, with the exact GELU, and the output
head shares the token embedding's matrix.
"""

from atlas.inputs.family import Family
from atlas.model.tiny import TINY


def _tiny_mlp(config):
    """The MLP keeps its ratio to the width at the tiny sizes (FalconConfig fixes ffn_hidden_size once)."""
    return {"ffn_hidden_size": TINY["hidden_size"] * config.ffn_hidden_size // config.hidden_size}

FAMILY = Family(
    title="Falcon 7B",
    vendor="Technology Innovation Institute",
    released="2023-05",
    summary=(
        "Parallel blocks under one LayerNorm, multi-query attention with a single key and value head "
        "from one fused projection, rotary positions, no biases, a tied head."
    ),
    tags=("Parallel attention and MLP", "LayerNorm", "GELU MLP", "Tied embeddings"),
    checkpoint="tiiuae/falcon-7b",
    model_class="FalconForCausalLM",
    config_class="FalconConfig",
    preview=_tiny_mlp,
    config_defaults={
        "max_position_embeddings": (
            "the released config.json names no context length; the model was trained on sequences of "
            "2,048 tokens, which is FalconConfig's default, and rotary positions hold no table of that size, "
            "so the value changes no parameter"
        ),
    },
)
