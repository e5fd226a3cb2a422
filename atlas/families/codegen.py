"""CodeGen (model_type codegen): Salesforce's code decoder, GPT-J's parallel block with partial rotary.

There is no position embedding: the token embeddings go straight into the blocks, and positions enter
the attention as a rotation of the first rotary_dim dimensions of each query and key head (GPT-J's
interleaved pairs); the remaining dimensions of each head are not rotated. Each block is parallel: one
LayerNorm (ln_1) feeds both the attention and the MLP, and the block adds both outputs to its input.
Query, value and key come out of one fused projection without a bias, laid out in mp_num groups that
the forward reshapes and splits; the output projection has no bias either. The MLP is four times the
width with the tanh-approximated GELU and biases. A final LayerNorm precedes an untied output head
that has a bias.
"""

from atlas.families.gptj import _tiny_rotary  # the same share of each head rotated at the tiny sizes
from atlas.inputs.family import Family

FAMILY = Family(
    title="CodeGen",
    vendor="Salesforce",
    released="2022-03",
    summary=(
        "GPT-J's parallel block for code: one LayerNorm feeding attention and MLP side by side, rotary "
        "positions on part of each head, a fused bias-free query-value-key projection, an untied head."
    ),
    tags=("LayerNorm", "GELU MLP", "Partial rotary"),
    checkpoint="Salesforce/codegen-350M-mono",
    model_class="CodeGenForCausalLM",
    config_class="CodeGenConfig",
    preview=_tiny_rotary,
)
