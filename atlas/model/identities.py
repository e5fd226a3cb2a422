"""What the preview run measures: the identities a page states, and the experts a selection bias changes.

Each identity (the block's sum, the mixture's sum, the attention's rows ...) is measured on the eager
run at the blocks that have its values, its largest residual against a tolerance near float64's error
(the run is float64 throughout, ``atlas.model.precision``); one that does not apply says why.
"""

from __future__ import annotations

import math

from atlas.errors import AtlasError
from atlas.model.introspect import find_block_list, num_blocks
from atlas.model.precision import float64_run
from atlas.model.preview import PreviewRun
from atlas.model.trace import MissingValue
from atlas.numbers import ordinal

TOLERANCE = 1e-9  # the largest absolute residual an identity may show: the largest measured is about 4e-15


def _max_abs(tensor) -> float:
    return float(tensor.detach().abs().max()) if tensor.numel() else 0.0


def identities(preview: PreviewRun, not_applicable: dict[str, str] | None = None) -> tuple[list[dict], list[dict]]:
    """Every identity a page states, measured on the eager run: (identities, not applicable). What an
    identity computes again (a softmax, the head) runs in float64 as the run did."""
    with float64_run():
        return _identities(preview, not_applicable)


def _identities(preview: PreviewRun, not_applicable: dict[str, str] | None) -> tuple[list[dict], list[dict]]:
    import torch

    t = preview.eager
    config = preview.config
    blocks = range(len(t.layers))
    moe = [i for i in blocks if t.has("routed_output", i)]
    declared = dict(not_applicable or {})
    measured: list[dict] = []
    skipped: list[dict] = []

    def identity(ident: str, statement: str, where: list[int] | None, residual_of, why_not: str | None = None):
        why_not = declared.get(ident, why_not)
        if why_not or (where is not None and not where):
            skipped.append({"id": ident, "statement": statement, "why": why_not or "no block has the values"})
            return
        try:
            residuals = [residual_of(i) for i in where] if where is not None else [residual_of(None)]
        except MissingValue as e:  # the resolution placed a value this class's run did not give: say which, in one line
            raise AtlasError(f"the preview run of transformers' {type(preview.model).__name__}", None,
                             f"the identity {ident} reads a value the run did not give ({e}); the atlas does not "
                             "know where this class keeps it") from None
        except (AttributeError, TypeError, RuntimeError) as e:  # a value of another kind there (RWKV's state list)
            raise AtlasError(f"the preview run of transformers' {type(preview.model).__name__}", None,
                             f"the identity {ident} cannot be measured on the values the run captured "
                             f"({type(e).__name__}: {' '.join(str(e).split())}); the atlas does not know this class's "
                             "values there") from None
        worst = max(residuals)
        measured.append({
            "id": ident,
            "statement": statement,
            "blocks": where,
            "max_abs_residual": float(f"{worst:.3g}"),
            "tolerance": TOLERANCE,
            "holds": worst <= TOLERANCE,
        })

    L = t.layers
    # which sublayers each block runs: (attention, MLP, state-space mixer); the attention-then-MLP identities
    # hold on the blocks that run those two (every block, but in a hybrid)
    runs = {i: (t.has("attention_output", i), t.has("mlp_output", i), t.has("ssm_output", i)) for i in blocks}
    both = [i for i in blocks if runs[i] == (True, True, False)]
    roles = t.resolution.roles
    # blocks that normalise the stream after each add (GPT-1): the stream is a norm of each sum, so the sums
    # below hold with the block's own norms applied
    post_normed = [i for i in both if roles.blocks[i].attention_add_norm]
    post_words = ("every block normalises the stream after each add: its output is a norm of the sum, not the sum"
                  if post_normed and len(post_normed) == len(both) else None)
    both = [i for i in both if i not in post_normed]
    if post_normed:
        def normed(i, role, x):
            with torch.no_grad():
                return preview.model.get_submodule(f"{roles.block_list}.{i}.{getattr(roles.blocks[i], role)}")(x)
        first, second = roles.blocks[post_normed[0]].attention_add_norm, roles.blocks[post_normed[0]].mlp_add_norm
        identity("post_norm_attention_add", f"{first}(layers[i].input + self_attn.attention_output) == layer_mid", post_normed,
                 lambda i: _max_abs(normed(i, "attention_add_norm", L[i].input + L[i].self_attn.attention_output) - L[i].layer_mid))
        identity("post_norm_block_sum", f"{second}(layer_mid + mlp.mlp_output) == layer_output", post_normed,
                 lambda i: _max_abs(normed(i, "mlp_add_norm", L[i].layer_mid + L[i].mlp.mlp_output) - L[i].output))
    weighted = [i for i in both if roles.blocks[i].residual_weights]
    both = [i for i in both if i not in weighted]
    if weighted:  # the block weighs the stream per channel at each add (Doge's input_residual, post_attention_residual)
        def w(i, k):
            block = preview.model.get_submodule(f"{roles.block_list}.{i}")
            return getattr(block, roles.blocks[i].residual_weights[k]).detach()
        a, b = roles.blocks[weighted[0]].residual_weights
        identity("weighted_attention_add", f"layers[i].input * {a} + self_attn.attention_output == layer_mid", weighted,
                 lambda i: _max_abs(L[i].input * w(i, 0) + L[i].self_attn.attention_output - L[i].layer_mid))
        identity("weighted_block_sum", f"layer_mid * {b} + mlp.mlp_output == layer_output", weighted,
                 lambda i: _max_abs(L[i].layer_mid * w(i, 1) + L[i].mlp.mlp_output - L[i].output))
    if weighted and not both:  # no block adds the plain stream: the plain sums have no block to hold on
        post_words = post_words or ("every block weighs its stream per channel by a vector of its own before each add: "
                                    "the weighted sums hold in the plain sums' place")
    scaled = residual_scale(config)
    if scaled is None:
        identity("block_sum", "layers[i].input + self_attn.attention_output + mlp.mlp_output == layer_output", both,
                 lambda i: _max_abs(L[i].input + L[i].self_attn.attention_output + L[i].mlp.mlp_output - L[i].output), post_words)
    else:  # each sublayer's output is scaled before it is added (Granite's residual_multiplier)
        s, words = scaled
        identity("block_sum", f"layers[i].input + {words} * (self_attn.attention_output + mlp.mlp_output) == layer_output", both,
                 lambda i: _max_abs(L[i].input + s * (L[i].self_attn.attention_output + L[i].mlp.mlp_output) - L[i].output))
    sequential = [i for i in both if i not in t.parallel]
    parallel_words = post_words or (None if sequential or not both else (
        "every block is parallel: the attention and the MLP both read the block's input, so no stream exists between them to measure"))
    if scaled is None:
        identity("attention_add", "layers[i].input + self_attn.attention_output == layer_mid", sequential,
                 lambda i: _max_abs(L[i].input + L[i].self_attn.attention_output - L[i].layer_mid), parallel_words)
    else:
        identity("attention_add", f"layers[i].input + {words} * self_attn.attention_output == layer_mid", sequential,
                 lambda i: _max_abs(L[i].input + s * L[i].self_attn.attention_output - L[i].layer_mid), parallel_words)
    # blocks of one sublayer (a hybrid's Mamba, attention or MLP blocks): the input plus that sublayer's output;
    # a state-space mixer in the attention's place, then an MLP: the input plus both outputs
    for ident, statement, pattern, value in (
        ("ssm_mlp_block_sum", "layers[i].input + ssm.ssm_output + mlp.mlp_output == layer_output", (False, True, True),
         lambda i, x: x + L[i].ssm.ssm_output + L[i].mlp.mlp_output),
        ("ssm_block_sum", "layers[i].input + ssm.ssm_output == layer_output", (False, False, True), lambda i, x: x + L[i].ssm.ssm_output),
        ("attention_block_sum", "layers[i].input + self_attn.attention_output == layer_output", (True, False, False),
         lambda i, x: x + L[i].self_attn.attention_output),
        ("mlp_block_sum", "layers[i].input + mlp.mlp_output == layer_output", (False, True, False), lambda i, x: x + L[i].mlp.mlp_output),
    ):
        where = [i for i in blocks if runs[i] == pattern and not roles.blocks[i].embedding_norm]
        if where:
            identity(ident, statement, where, lambda i, value=value: _max_abs(value(i, L[i].input) - L[i].output))
        held = [i for i in blocks if runs[i] == pattern and roles.blocks[i].embedding_norm]
        if held:  # the block normalises its input first (RWKV's block 0 and its pre_ln): the sum starts at that norm's output
            identity(f"embedding_norm_{ident}", statement.replace("layers[i].input", "embedding_norm_output"), held,
                     lambda i, value=value: _max_abs(value(i, t.embedding_norm_output) - L[i].output))
    every = getattr(config, "rescale_every", None)
    if isinstance(every, int) and every > 0 and any(getattr(m, "layers_are_rescaled", False) for m in preview.model.modules()):
        # the model halves the stream between blocks in eval mode (RWKV's rescale_every): the next block reads half the output
        halved = [i for i in blocks if i + 1 < len(L) and (i + 1) % every == 0]
        identity("rescaled_stream", f"layers[i].output / 2 == layers[i + 1].input after every {ordinal(every)} block (rescale_every, eval mode)",
                 halved, lambda i: _max_abs(L[i].output / 2 - L[i + 1].input))
    # attention and a state-space mixer side by side (Falcon-H1): each output times the config's constant, both added at once
    hybrid = [i for i in blocks if roles.blocks[i].shared_block]  # a shared block before the mixer (Zamba2)
    if hybrid:
        identity("hybrid_block_sum", "layers[i].input + ssm.ssm_output == layer_output (the shared block's output reaches the mixer's "
                 "input alone)", hybrid, lambda i: _max_abs(L[i].input + L[i].ssm.ssm_output - L[i].output))
    two = [i for i in blocks if runs[i] == (True, True, True) and i not in hybrid]
    if two:
        s_out, a_out = _scale(config, "ssm_out_multiplier") or 1.0, _scale(config, "attention_out_multiplier") or 1.0
        words = (f"layers[i].input + ssm_out_multiplier ({s_out:g}) × ssm.ssm_output + attention_out_multiplier ({a_out:g}) × "
                 "self_attn.attention_output + mlp.mlp_output == layer_output")
        identity("two_mixers_block_sum", words, two, lambda i: _max_abs(
            L[i].input + s_out * L[i].ssm.ssm_output + a_out * L[i].self_attn.attention_output + L[i].mlp.mlp_output - L[i].output))
    shared = [i for i in moe if t.has("shared_expert_output", i)]
    if shared or not moe:
        identity("mixture_sum", "mlp.routed_output + mlp.shared_expert_output == mlp.mlp_output", shared,
                 lambda i: _max_abs(L[i].mlp.routed_output + L[i].mlp.shared_expert_output - L[i].mlp.mlp_output),
                 None if moe else "no block is a mixture of experts")
    else:  # a mixture without a shared expert: the routed experts are the whole MLP output
        identity("mixture_sum", "mlp.routed_output == mlp.mlp_output (no shared expert)", moe,
                 lambda i: _max_abs(L[i].mlp.routed_output - L[i].mlp.mlp_output))
    slotted = [i for i in moe if t.resolution.at("expert_outputs", i).read is not None]
    dense = [i for i in moe if t.has("router_scores", i)]  # every expert runs on every token, its input scaled (Llama 4)
    identity("expert_slots", "mlp.expert_outputs summed over the routing slots == mlp.routed_output", slotted,
             lambda i: _max_abs(L[i].mlp.expert_outputs.sum(dim=2) - L[i].mlp.routed_output),
             None if slotted else "no block is a mixture of experts" if not moe else
             "the mixture has no routing slots: every expert runs on every token, its input scaled by the token's score for it")
    if dense:
        k = config.num_experts_per_tok

        def dense_scores(i):
            z = L[i].mlp.router_logits
            top = z.topk(k, dim=-1)
            expected = torch.zeros_like(z).scatter(-1, top.indices, top.values.sigmoid())
            return _max_abs(L[i].mlp.router_scores - expected)

        identity("router_scores", f"mlp.router_scores == sigmoid(mlp.router_logits) at each token's top {k}, 0 elsewhere", dense, dense_scores)
    factor = getattr(config, "routed_scaling_factor", None)
    ffn_sub = getattr(config, "ffn_config", None)
    p_norm = getattr(ffn_sub, "moe_normalize_expert_weights", None) if ffn_sub is not None else None
    if p_norm:  # the chosen weights divided by their p-norm (DBRX): a unit p-norm, which for p = 1 is a sum of one
        identity("expert_weights_sum", f"mlp.expert_weights have a {p_norm:g}-norm of 1 at every token "
                 f"(ffn_config.moe_normalize_expert_weights is {p_norm:g})", moe,
                 lambda i: _max_abs(L[i].mlp.expert_weights.abs().pow(p_norm).sum(dim=-1).pow(1 / p_norm) - 1),
                 None if moe else "no block is a mixture of experts")
    elif getattr(config, "norm_topk_prob", False):
        target = factor if factor is not None else 1.0
        words = f"routed_scaling_factor ({factor})" if factor is not None else "1"
        identity("expert_weights_sum", f"mlp.expert_weights sum to {words} at every token", moe,
                 lambda i: _max_abs(L[i].mlp.expert_weights.sum(dim=-1) - target),
                 None if moe else "no block is a mixture of experts")
    elif moe:
        skipped.append({"id": "expert_weights_sum", "statement": "mlp.expert_weights sum to a fixed total at every token",
                        "why": "the router does not renormalize the chosen weights (norm_topk_prob is off)"})
    # softmax attention's identities, at the blocks that have it (a linear-attention or state-space block has no scores)
    softmax_blocks = [i for i in blocks if runs[i][0] and t.resolution.at("attention_probabilities", i).read is not None]
    identity("attention_rows", "self_attn.attention_probabilities sum to 1 over the keys, at every head and query", softmax_blocks,
             lambda i: _max_abs(L[i].self_attn.attention_probabilities.sum(dim=-1) - 1))
    identity("attention_softmax", "softmax(self_attn.attention_scores) == self_attn.attention_probabilities", softmax_blocks,
             lambda i: _max_abs(torch.softmax(L[i].self_attn.attention_scores.float(), dim=-1) - L[i].self_attn.attention_probabilities))
    if t.has("embedding_norm_output") and roles.blocks[0].embedding_norm:  # block 0 normalises its input itself (RWKV)
        identity("embeddings", "token_embeddings == layers[0].input (block 0 applies embedding_norm itself)", None,
                 lambda _: _max_abs(t.token_embeddings - L[0].input))
    elif t.has("embedding_norm_output"):  # a norm on the token embeddings (BLOOM): the first block reads its output
        identity("embeddings", "embedding_norm_output == layers[0].input", None,
                 lambda _: _max_abs(t.embedding_norm_output - L[0].input))
    elif t.has("position_embeddings"):  # learned positions (GPT-2): the first block reads the sum
        identity("embeddings", "token_embeddings + position_embeddings == layers[0].input", None,
                 lambda _: _max_abs(t.token_embeddings + t.position_embeddings - L[0].input))
    elif _scale(config, "embedding_multiplier") is not None:  # the model scales the table's rows (Granite)
        m = _scale(config, "embedding_multiplier")
        identity("embeddings", f"embedding_multiplier ({m:g}) * token_embeddings == layers[0].input", None,
                 lambda _: _max_abs(m * t.token_embeddings - L[0].input))
    elif t.resolution.roles.position_table:  # a table the model holds and reads itself (CTRL's pos_encoding)
        path = t.resolution.roles.position_table
        rows = preview.model.get_buffer(path)[: L[0].input.shape[1]]
        root = math.sqrt(config.hidden_size)
        name = path.rpartition(".")[2]
        # whether the token rows are scaled by the square root of the width first: the form that holds is stated
        forms = {f"sqrt(hidden_size) * token_embeddings + {name}[positions] == layers[0].input": lambda: root * t.token_embeddings + rows,
                 f"token_embeddings + {name}[positions] == layers[0].input": lambda: t.token_embeddings + rows}
        statement = min(forms, key=lambda k: _max_abs(forms[k]() - L[0].input))
        identity("embeddings", statement, None, lambda _: _max_abs(forms[statement]() - L[0].input))
    else:
        identity("embeddings", "token_embeddings == layers[0].input", None,
                 lambda _: _max_abs(t.token_embeddings - L[0].input))
    softcap = getattr(config, "final_logit_softcapping", None)
    divisor = _scale(config, "logits_scaling")
    scale = getattr(config, "logit_scale", None)
    if divisor is not None and not softcap and _head_reads_final_norm(preview):
        # the head reads the final norm's output as it is, so the model divides what the head returns
        identity("logits", f"lm_head_output / logits_scaling ({divisor:g}) == logits", None,
                 lambda _: _max_abs(t.lm_head_output / divisor - t.logits))
    elif _scale(config, "lm_head_multiplier") is not None and not softcap:  # the head's logits times a constant (Falcon-H1)
        head_multiplier = _scale(config, "lm_head_multiplier")
        identity("logits", f"logits == lm_head_multiplier ({head_multiplier:g}) × lm_head_output", None,
                 lambda _: _max_abs(t.logits - head_multiplier * t.lm_head_output))
    elif scale not in (None, 1, 1.0) and not softcap:  # the head's logits times a constant (Cohere)
        identity("logits", f"logits == logit_scale ({scale:g}) × lm_head_output", None,
                 lambda _: _max_abs(t.logits - scale * t.lm_head_output))
    else:
        identity("logits", "logits == lm_head_output", None, lambda _: _max_abs(t.logits - t.lm_head_output),
                 "the model softcaps the head's logits" if softcap else None)
    return measured, skipped


def _scale(config, key: str) -> float | None:
    """A scale the config sets under ``key``, where it is set and is not 1."""
    value = getattr(config, key, None)
    return None if value in (None, 1, 1.0) or isinstance(value, bool) else float(value)


def residual_scale(config) -> tuple[float, str] | None:
    """The factor a block multiplies each sublayer's output by before adding it to the stream, and how
    the config names it; None where the outputs are added as they are."""
    multiplier = _scale(config, "residual_multiplier")
    if multiplier is not None:
        return multiplier, f"residual_multiplier ({multiplier:g})"
    depth = getattr(config, "scale_depth", None)
    if depth is not None and not isinstance(depth, bool):  # MiniCPM: the factor shrinks with the number of blocks
        factor = depth / math.sqrt(config.num_hidden_layers)
        return factor, f"scale_depth / sqrt(num_hidden_layers) ({depth:g} / sqrt({config.num_hidden_layers}) = {factor:.6g})"
    return None


def _head_reads_final_norm(preview: PreviewRun) -> bool:
    """Whether the output head's output is the head applied to the final norm's output as it is (a
    model that divides by logits_scaling then divides what the head returns, not what it reads)."""
    import torch

    t = preview.eager
    if not t.has("final_norm_output"):
        return False
    with torch.no_grad():
        again = preview.model.get_output_embeddings()(t.final_norm_output)
    return _max_abs(again - t.lm_head_output) <= TOLERANCE


def selection_changes(preview: PreviewRun) -> dict[str, int]:
    """Per mixture block whose router adds a selection bias: tokens whose chosen experts differ from a
    plain top-k of the router's scores."""
    import torch

    _, blocks = find_block_list(preview.model, num_blocks(preview.config))
    changed = {}
    for i, layer in enumerate(preview.eager.layers):
        biased = any(getattr(m, "e_score_correction_bias", None) is not None for m in blocks[i].modules())
        if not biased or not preview.eager.has("router_logits", i):
            continue
        k = layer.mlp.expert_indices.shape[-1]
        plain = torch.topk(layer.mlp.router_logits, k, dim=-1).indices.sort(dim=-1).values  # monotone scores: same order
        chosen = layer.mlp.expert_indices.sort(dim=-1).values
        changed[str(i)] = int((plain != chosen).any(dim=-1).sum())
    return changed
