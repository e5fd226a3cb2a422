"""What a module is, read from its own tensors and its children: the structural predicates.

Each predicate decides by structure alone (the shapes of the tensors a module holds itself, its
children, a setting it keeps), never by a class name: a state-space mixer, a short convolution, an
RG-LRU and the recurrent block around it, linear attention, a lightning indexer, a norm without a
gain, hyper-connections and the final collapse of their streams, a linear map by groups, a window
compressor and a compressed indexer, a block's own scalar. The roles (``atlas.model.roles``), the block
kinds, the preview run and the proofs all ask the same questions here. No torch at import: each
predicate imports it where it needs it.
"""

from __future__ import annotations


def own_parameters(module) -> dict:
    """The parameters a module holds itself, by name (its children's left out)."""
    return dict(module.named_parameters(recurse=False))


def _tensor_names(module) -> set[str]:
    return {n for n, _ in module.named_parameters(recurse=False)}


# --- norms -----------------------------------------------------------------------------------------


def norm_epsilon(module) -> float:
    """A norm's epsilon, under whichever attribute its class keeps it, or measured where the class fixes it
    in its forward (OLMo's weightless LayerNorm); LookupError where it has none."""
    for attr in ("variance_epsilon", "eps", "epsilon"):
        if isinstance(getattr(module, attr, None), float):
            return getattr(module, attr)
    if _is_fixed_epsilon_norm(module):
        return fixed_epsilon(module)
    raise LookupError("no epsilon")


def built_kv_heads(attention, heads) -> int | None:
    """The key/value heads an attention builds for itself, from how it groups its ``heads`` query heads
    (``num_key_value_groups``): MiMo-V2-Flash's windowed blocks build twice the config's count. None where
    the module states no grouping."""
    groups = getattr(attention, "num_key_value_groups", None)
    if isinstance(groups, int) and not isinstance(groups, bool) and groups > 0 and isinstance(heads, int) and heads % groups == 0:
        return heads // groups
    return None


def _is_fixed_epsilon_norm(module) -> bool:
    """No children, no tensors, and torch's LayerNorm's ``normalized_shape``: a norm whose epsilon is a
    literal of its forward, not an attribute."""
    shape = getattr(module, "normalized_shape", None)
    return (isinstance(shape, tuple) and all(isinstance(n, int) and n > 0 for n in shape)
            and not any(True for _ in module.children()) and not any(True for _ in module.parameters(recurse=False))
            and not any(True for _ in module.buffers(recurse=False)))


_FIXED_EPSILONS: dict[type, float] = {}


def fixed_epsilon(module) -> float:
    """The epsilon a norm's forward adds to its mean square (or variance), measured on a probe of a tiny
    variance, where the epsilon dominates: (x − μ)² / y² − σ² for a LayerNorm, x² / y² − ⟨x²⟩ for an RMS
    norm, whichever gives one value on every row; rounded to three significant figures. The class fixes
    it, so it is measured once per class; LookupError where neither form gives one value."""
    if type(module) in _FIXED_EPSILONS:
        return _FIXED_EPSILONS[type(module)]
    import torch

    generator = torch.Generator().manual_seed(0)
    x = torch.randn((8, *module.normalized_shape), generator=generator, dtype=torch.float64) * 1e-3
    with torch.no_grad():
        y = module(x.float()).double()
    axes = tuple(range(1, x.dim()))
    centred = x - x.mean(axes, keepdim=True)
    estimates = {
        "layer": (centred.pow(2) / y.pow(2)).mean(axes) - centred.pow(2).mean(axes),
        "rms": (x.pow(2) / y.pow(2)).mean(axes) - x.pow(2).mean(axes),
    }
    for rows in estimates.values():
        value = rows.mean().item()
        if value > 0 and (rows - value).abs().max().item() <= 1e-3 * value:
            eps = float(f"{value:.3g}")
            _FIXED_EPSILONS[type(module)] = eps
            return eps
    raise LookupError("no epsilon")


def has_epsilon(module) -> bool:
    try:
        norm_epsilon(module)
        return True
    except LookupError:
        return False


def is_weightless_norm(module) -> bool:
    """A module with no children and no tensors that holds an epsilon: a norm without a gain (Llama 4's
    query and key norm, Gemma 4's value and router norms). A buffer the module does not save may stand beside
    the epsilon (Falcon Mamba's mixer norms hold a dummy "weight" of ones for a kernel, never applied)."""
    if any(True for _ in module.children()) or any(True for _ in module.parameters(recurse=False)):
        return False
    unsaved = getattr(module, "_non_persistent_buffers_set", set())
    if any(name not in unsaved for name, _ in module.named_buffers(recurse=False)):
        return False
    return has_epsilon(module)


# --- mixers ----------------------------------------------------------------------------------------


def is_indexer(module) -> bool:
    """A sparse attention's lightning indexer (DeepSeek Sparse Attention), by structure: a key projection
    (wk) through a LayerNorm, and a projection (weights_proj) giving one weight per indexer head; no
    tensor of its own. Its class name is never read."""
    import torch

    children = dict(module.named_children()) if module is not None else {}
    return ({"wk", "weights_proj"} <= set(children) and any(isinstance(c, torch.nn.LayerNorm) for c in children.values())
            and not _tensor_names(module))


def is_linear_attention(module) -> bool:
    """A token mixer is linear attention with a recurrent state when it holds a depthwise causal
    convolution (a Conv1d with one group per channel) over its projections, as gated DeltaNet and
    Kimi delta attention do: softmax attention has none. Its structure decides, never its class name."""
    import torch

    return module is not None and any(
        isinstance(c, torch.nn.Conv1d) and c.groups == c.in_channels == c.out_channels for c in module.children())


def is_lightning_attention(module) -> bool:
    """A token mixer is lightning attention (MiniMax-Text-01) when it holds one decay rate per head as a
    buffer (slope_rate) beside a fused query-key-value projection and an output gate: linear attention
    whose state decays by a fixed factor, with no convolution and no softmax. Structure decides, never
    the class name."""
    if module is None:
        return False
    children, buffers = dict(module.named_children()), dict(module.named_buffers(recurse=False))
    return "slope_rate" in buffers and {"qkv_proj", "output_gate", "out_proj"} <= set(children)


def has_channel_decay(module) -> bool:
    """A linear-attention mixer decays its state channel by channel (Kimi delta attention) when its
    decay offset dt_bias holds more values than its decay rates A_log, one per head; a decay per head
    (gated DeltaNet) holds one of each per head."""
    named = dict(module.named_parameters()) if module is not None else {}
    bias = next((p for n, p in named.items() if n.rpartition(".")[2] == "dt_bias"), None)
    rate = next((p for n, p in named.items() if n.rpartition(".")[2] == "A_log"), None)
    return bias is not None and rate is not None and bias.numel() > rate.numel()


def adds_residual(module) -> bool:
    """A sublayer whose forward takes the residual stream as an argument of its own (BLOOM's attention
    and MLP): it returns its contribution already added to that stream."""
    import inspect

    return module is not None and "residual" in inspect.signature(module.forward).parameters


# An attention's separate query, key and value projections, by the names families give them (CTRL's
# Wq, Wk and Wv beside Llama's q_proj, k_proj and v_proj).
SEPARATE_QKV_NAMES = (("q_proj", "k_proj", "v_proj"), ("Wq", "Wk", "Wv"))


def separate_qkv(module) -> tuple[str, str, str | None] | None:
    """The child names of the module's separate query, key and value projections (the value None where
    the keys serve as values), or None where it has no separate query and key projections."""
    children = dict(module.named_children())
    for q, k, v in SEPARATE_QKV_NAMES:
        if q in children and k in children:
            return q, k, v if v in children else None
    return None


def sequential_mlp(module) -> tuple[str, str, str] | None:
    """(up, activation, down): the child names of a two-layer MLP built as a torch Sequential of a linear
    map, an activation and a linear map back (CTRL's ffn: 0, 1, 2); None for any other module."""
    import torch

    if not isinstance(module, torch.nn.Sequential) or len(module) != 3:
        return None
    up, act, down = module
    if (isinstance(up, torch.nn.Linear) and isinstance(down, torch.nn.Linear) and not any(True for _ in act.parameters())
            and up.out_features == down.in_features and up.in_features == down.out_features):
        return "0", "1", "2"
    return None


def norms_of_sums(block) -> list[str]:
    """The children the block's forward calls on a sum, in the order it calls them (GPT-1's
    ``self.ln_1(x + a)``): norms of the stream after an add rather than before a sublayer. Read from the
    forward's source, as the residual a sublayer is handed is read from its signature."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(type(block).forward)))
    except (OSError, TypeError, SyntaxError):
        return []
    return [node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
            and len(node.args) == 1 and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Add)]


def attention_is_inline(attention) -> bool:
    import sys

    return not hasattr(sys.modules.get(type(attention).__module__), "eager_attention_forward")


def is_ssm(module) -> bool:
    """A selective state-space mixer, by structure: a depthwise causal convolution among its children
    and a learned per-head decay (``A_log``) and skip (``D``) of its own."""
    import torch

    convs = [m for m in module.children() if isinstance(m, torch.nn.Conv1d)]
    return bool(convs) and convs[0].groups == convs[0].in_channels and {"A_log", "D"} <= _tensor_names(module)


def is_short_conv(module) -> bool:
    """A gated short convolution (LFM2's), by structure: a depthwise causal convolution between an input
    and an output projection, and no decay of its own (so no recurrent state beyond the kernel's inputs)."""
    import torch

    children = dict(module.named_children())
    convs = [m for m in children.values() if isinstance(m, torch.nn.Conv1d)]
    return (bool(convs) and convs[0].groups == convs[0].in_channels and {"in_proj", "out_proj"} <= set(children)
            and "A_log" not in _tensor_names(module))


def is_rg_lru(module) -> bool:
    """A real-gated linear recurrent unit (RecurrentGemma's RG-LRU), by structure: no children, and its own
    tensors are one vector of the width (the decay's parameter), two block-diagonal weights of heads ×
    block × block (the input and recurrence gates) and their two biases of heads × block."""
    if list(module.children()):
        return False
    shapes = sorted((tuple(p.shape) for _, p in module.named_parameters(recurse=False)), key=len)
    if [len(s) for s in shapes] != [1, 2, 2, 3, 3]:
        return False
    (width,), bias_a, bias_b, weight_a, weight_b = shapes
    heads, block = weight_a[0], weight_a[1]
    return (weight_a == weight_b == (heads, block, block) and bias_a == bias_b == (heads, block)
            and heads * block == width)


def is_recurrent_block(module) -> bool:
    """A recurrent block (Griffin's, RecurrentGemma's), by structure: a depthwise convolution and an
    RG-LRU among its children."""
    import torch

    children = list(module.children())
    return (any(isinstance(c, torch.nn.Conv1d) and c.groups == c.in_channels for c in children)
            and any(is_rg_lru(c) for c in children))


def is_dense_dispatch(experts) -> bool:
    """Experts held as fused 3-D weights whose forward takes the tokens alone, no chosen experts nor
    weights: every expert runs on every token's row, the mixture having scaled each expert's rows by
    the token's score for it beforehand (Llama 4)."""
    import inspect

    own = dict(experts.named_parameters(recurse=False))
    if "gate_up_proj" not in own or own["gate_up_proj"].dim() != 3:
        return False
    params = [p for p in inspect.signature(experts.forward).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return len(params) == 1


# --- residual streams (hyper-connections) ----------------------------------------------------------


def stream_count(rows: int, cols: int, extra: int) -> int | None:
    """n with rows == (extra + n)·n, or None."""
    n = next((n for n in range(1, 65) if (extra + n) * n == rows), None)
    return n if n and cols % n == 0 else None


def _one_norm_child(module) -> bool:
    children = list(module.children())
    return len(children) == 1 and is_weightless_norm(children[0])


def is_hyper_connection(module) -> bool:
    """Three tensors of its own, a (2 + n)·n × n·width map, a bias of (2 + n)·n and 3 scales, and one norm
    without a gain as its only child."""
    own = own_parameters(module)
    maps = [p for p in own.values() if p.dim() == 2]
    if len(own) != 3 or len(maps) != 1 or not _one_norm_child(module):
        return False
    rows, cols = maps[0].shape
    n = stream_count(rows, cols, 2)
    vectors = sorted(p.numel() for p in own.values() if p.dim() == 1)
    return n is not None and vectors == sorted([3, rows])


def is_stream_collapse(module) -> bool:
    """The final collapse of n streams: an n × n·width map, a bias of n and one scale, one norm without a gain."""
    own = own_parameters(module)
    maps = [p for p in own.values() if p.dim() == 2]
    if len(own) != 3 or len(maps) != 1 or not _one_norm_child(module):
        return False
    rows, cols = maps[0].shape
    vectors = sorted(p.numel() for p in own.values() if p.dim() == 1)
    return cols % rows == 0 and rows > 1 and vectors == sorted([1, rows])


# --- a linear map by groups ------------------------------------------------------------------------


def is_grouped_linear(module) -> bool:
    """A Linear with a forward of its own and a number of groups: each group of the input's last-but-one
    axis goes through its own block of the weight's rows (DeepSeek-V4's o_a_proj)."""
    import torch

    groups = getattr(module, "n_groups", None)
    return (isinstance(module, torch.nn.Linear) and type(module).forward is not torch.nn.Linear.forward
            and isinstance(groups, int) and groups > 1 and module.weight.shape[0] % groups == 0)


# --- compressed attention (DeepSeek-V4) ------------------------------------------------------------

COMPRESSOR_CHILDREN = {"kv_proj", "gate_proj", "kv_norm"}


def is_window_compressor(module) -> bool:
    children = set(dict(module.named_children()))
    own = own_parameters(module)
    return (COMPRESSOR_CHILDREN <= children and "q_b_proj" not in children and set(own) == {"position_bias"}
            and own["position_bias"].dim() == 2)


def is_compressed_indexer(module) -> bool:
    """A compressor of its own beside query heads from the query latent and a scorer (DeepSeek-V4's indexer)."""
    children = set(dict(module.named_children()))
    own = own_parameters(module)
    return (COMPRESSOR_CHILDREN | {"q_b_proj", "scorer"}) <= children and set(own) == {"position_bias"}


# --- a block's own scalar --------------------------------------------------------------------------


def own_scalar(module) -> str | None:
    """The name of a one-number tensor the block holds itself (Gemma 4's layer_scalar, stored in the
    checkpoint), which scales the block's whole output; None where it holds none."""
    own = {**dict(module.named_parameters(recurse=False)), **{n: b for n, b in module.named_buffers(recurse=False)
                                                              if n not in module._non_persistent_buffers_set}}
    found = [n for n, t in own.items() if t.numel() == 1 and t.is_floating_point()]
    return found[0] if len(found) == 1 else None


# --- token shift and RWKV's mixings ----------------------------------------------------------------


def is_token_shift(module) -> bool:
    """A padding that moves every position one step later along the sequence, the first filled with
    zeros and the last dropped (RWKV's time_shift: ZeroPad2d((0, 0, 1, -1)))."""
    import torch

    return isinstance(module, torch.nn.ZeroPad2d) and tuple(module.padding) == (0, 0, 1, -1)


def _mixing_weights(module) -> tuple[list[str], list[str]]:
    """(interpolation weights shaped 1 × 1 × width, vectors) among the module's own tensors."""
    own = own_parameters(module)
    mixes = [n for n, p in own.items() if p.dim() == 3 and tuple(p.shape[:2]) == (1, 1)]
    vectors = [n for n, p in own.items() if p.dim() == 1]
    return mixes, vectors


def is_time_mixing(module) -> bool:
    """RWKV's time mixing, by structure: a token shift and four linear maps among its children, and of its
    own three per-channel interpolation weights (for the key, the value and the receptance) and two
    vectors as wide as the keys (the decay and the first position's bonus)."""
    import torch

    children = list(module.children())
    mixes, vectors = _mixing_weights(module)
    linears = [c for c in children if isinstance(c, torch.nn.Linear)]
    return (any(is_token_shift(c) for c in children) and len(linears) == 4 and len(mixes) == 3 and len(vectors) == 2
            and len(own_parameters(module)) == 5)


def is_channel_mixing(module) -> bool:
    """RWKV's channel mixing, by structure: a token shift and three linear maps among its children, and
    two per-channel interpolation weights of its own (for the key and the receptance), nothing else."""
    import torch

    children = list(module.children())
    mixes, vectors = _mixing_weights(module)
    linears = [c for c in children if isinstance(c, torch.nn.Linear)]
    return (any(is_token_shift(c) for c in children) and len(linears) == 3 and len(mixes) == 2 and not vectors
            and len(own_parameters(module)) == 2)


def shared_hybrid_roles(module) -> dict[str, str] | None:
    """A block that runs a shared block before its own mixer (Zamba2's hybrid blocks), by structure: three
    children, a square linear map, a one-mixer state-space block (a norm and a selective scan) and a block
    holding an attention and an MLP; the child names by role ({"shared", "linear", "mixer_block"}), or None."""
    import torch

    children = dict(module.named_children())
    if len(children) != 3:
        return None
    linear = [n for n, c in children.items() if isinstance(c, torch.nn.Linear) and c.in_features == c.out_features]
    mixer = [n for n, c in children.items() if is_ssm_block(c)]
    shared = [n for n, c in children.items() if any(separate_qkv(m) for m in c.modules())]
    if len(linear) == len(mixer) == len(shared) == 1:
        return {"shared": shared[0], "linear": linear[0], "mixer_block": mixer[0]}
    return None


def is_ssm_block(module) -> bool:
    """A block of one selective state-space mixer and its norm: two children, one of them the mixer, the other a
    gain vector alone."""
    children = list(module.children())
    gains = [c for c in children if not list(c.children()) and set(_tensor_names(c)) == {"weight"} and c.weight.dim() == 1]
    return len(children) == 2 and sum(is_ssm(c) for c in children) == 1 and len(gains) == 1


def is_low_rank_adapter(module) -> bool:
    """Two linear maps without biases applied in turn, the first down to a rank narrower than both ends (a LoRA-style
    adapter: Zamba2's per-use adapters), held as a torch Sequential."""
    import torch

    children = list(module.children())
    return (isinstance(module, torch.nn.Sequential) and len(children) == 2
            and all(isinstance(c, torch.nn.Linear) and c.bias is None for c in children)
            and children[0].out_features == children[1].in_features
            and children[0].out_features < min(children[0].in_features, children[1].out_features))


def is_concatenating_block(module) -> bool:
    """A block over the stream set beside a second tensor as wide (Zamba2's shared block: its input and the token
    embeddings side by side): two gain-vector norms, the first twice as wide as the second, an attention whose
    query projection reads the doubled width, and nothing else with tensors but its MLP."""
    import torch

    children = dict(module.named_children())
    gains = [c.weight.shape[0] for c in children.values()
             if not list(c.children()) and _tensor_names(c) == {"weight"} and c.weight.dim() == 1]
    attention = [c for c in children.values() if separate_qkv(c)]
    if len(gains) != 2 or gains[0] != 2 * gains[1] or len(attention) != 1 or len(children) != 4:
        return False
    query = getattr(attention[0], separate_qkv(attention[0])[0])
    return isinstance(query, torch.nn.Linear) and query.in_features == gains[0]


# --- a mask scored from the values (Doge's dynamic mask attention) ------------------------------------------


def value_scored_mask(module) -> tuple[str, str] | None:
    """(the projection, the per-head vector) of an attention that scores each key from its values, by structure:
    the module holds exactly one parameter of its own, one number per key-value head, and a linear child that maps
    the value projection's width to that many numbers (Doge's dt_proj and A: exp(A softplus(V W_dt^T)) added to
    the scores as a mask). None elsewhere."""
    import torch

    own = own_parameters(module)
    if len(own) != 1:
        return None
    [(vector, p)] = own.items()
    if p.dim() != 1:
        return None
    linears = {n: c for n, c in module.named_children() if isinstance(c, torch.nn.Linear)}
    value = next((c for n, c in linears.items() if n in ("v_proj", "value")), None)
    if value is None:
        return None
    scorer = [n for n, c in linears.items() if c.out_features == p.shape[0] and c.in_features == value.out_features]
    return (scorer[0], vector) if len(scorer) == 1 else None
