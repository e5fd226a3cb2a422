"""RWKV-4 (model_type rwkv): BlinkDL's receptance-weighted key-value model, a recurrent network trained like a
transformer, with no attention.

The embeddings pass through a LayerNorm of their own, held by block 0, before the stream starts. Each block
then runs two sublayers, each after a LayerNorm and each added back to the stream. Both begin with a token
shift: every channel of the normed input is interpolated with the same channel one position earlier, by a
learned weight per channel. The time mixing projects three such mixes to a key, a value and a receptance;
a weighted key-value recurrence (WKV) averages the values seen so far, each weighted by the exponential of
its key, older ones decayed per channel by exp(-exp(time_decay)) a position, the current one boosted by
time_first; the sigmoid of the receptance gates the average and the output projection maps it back. The
channel mixing squares the ReLU of a key projection four times the width, projects it back, and gates it
by the sigmoid of a receptance projection. A final LayerNorm precedes a head of its own. In eval mode,
transformers divides the stream by two after every rescale_every blocks and the output projections of the
blocks behind it by the same power of two, which leaves the logits as they were.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="RWKV-4",
    vendor="BlinkDL (RWKV)",
    released="2022-08",
    summary=(
        "A recurrent language model trained like a transformer: token shift, a weighted key-value recurrence "
        "with a per-channel decay in place of attention, and a squared-ReLU channel mixing, each gated by a "
        "sigmoid receptance."
    ),
    tags=("Attention-free", "Recurrent", "LayerNorm", "Dense"),
    checkpoint="RWKV/rwkv-4-169m-pile",
    sizes=("RWKV/rwkv-4-430m-pile", "RWKV/rwkv-4-1b5-pile", "RWKV/rwkv-4-3b-pile", "RWKV/rwkv-4-7b-pile", "RWKV/rwkv-4-14b-pile"),
    model_class="RwkvForCausalLM",
    config_class="RwkvConfig",
)
