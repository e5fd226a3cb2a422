"""The preview run: a tiny config derived by rule, identities measured, shapes checked, compact data;
and a wrong standard-name override fails the build, naming the identity it broke."""

from __future__ import annotations

import json
import re

import pytest

from atlas import families
from atlas.build import publish
from atlas.model.precision import float64_run
from tests.conftest import released_config, run_build

REQUIRED_IDENTITIES = {"block_sum", "mixture_sum", "expert_weights_sum", "attention_rows", "embeddings", "logits"}


@pytest.fixture(scope="session")
def preview(kimi):
    return kimi["preview"]


def test_tiny_config_keeps_the_pinned_rules(kimi, preview):
    tiny, raw = preview["config"], kimi["config"]["raw"]
    assert tiny["num_hidden_layers"] == 3 and tiny["first_k_dense_replace"] == raw["first_k_dense_replace"] == 1
    # the same share of experts per token (8 of 384 on K2) at small sizes
    assert tiny["top_k"] / tiny["num_experts"] == raw["num_experts_per_tok"] / raw["n_routed_experts"]
    assert tiny["routed_scaling_factor"] == raw["routed_scaling_factor"]
    assert (tiny["n_group"], tiny["topk_group"], tiny["norm_topk_prob"]) == (raw["n_group"], raw["topk_group"], raw["norm_topk_prob"])
    rope = tiny["rope_parameters"]
    for key, value in raw["rope_scaling"].items():
        if key != "type":
            assert rope[key] == value, key
    assert tiny["hidden_size"] <= 128 and tiny["vocab_size"] <= 512


def test_mixture_block_pattern_of_deepseek_v3(collected):
    tiny = collected("deepseek_v3").facts["preview"]
    dense = released_config("deepseek_v3")["first_k_dense_replace"]
    assert tiny["config"]["num_hidden_layers"] == dense + 2  # its dense first blocks, then 2 mixture blocks
    assert sorted(tiny["shapes"]["routed_output"], key=int) == [str(dense), str(dense + 1)]
    assert {i["id"]: i["blocks"] for i in tiny["identities"]}["mixture_sum"] == [dense, dense + 1]


def test_the_identities_kimi_k2_states(preview):
    ids = {i["id"]: i for i in preview["identities"]}
    assert REQUIRED_IDENTITIES <= set(ids)
    assert {i["tolerance"] for i in ids.values()} == {1e-9}  # near float64 rounding: the run is float64 throughout
    dense = released_config("kimi_k2")["first_k_dense_replace"]
    assert ids["block_sum"]["blocks"] == [0, 1, 2]
    assert ids["mixture_sum"]["blocks"] == list(range(dense, 3))
    factor = released_config("kimi_k2")["routed_scaling_factor"]
    assert ids["expert_weights_sum"]["statement"] == f"mlp.expert_weights sum to routed_scaling_factor ({factor}) at every token"
    assert preview["not_applicable"] == []


# --- the identities, measured again here ----------------------------------------------------------

BLOCK_IDENTITIES = {"block_sum", "attention_add", "attention_rows", "attention_softmax"}
MIXTURE_IDENTITIES = {"mixture_sum", "expert_slots"}


def _file_name(name, key):
    """The name config.json uses for a setting the configuration class maps (Kimi Linear's
    moe_renormalize for norm_topk_prob), from the class's own attribute_map."""
    from atlas.inputs.checkpoint import transformers_class

    return getattr(transformers_class(families.load(name), "config_class"), "attribute_map", {}).get(key, key)


# A hybrid's blocks by what they run, (attention, MLP, state-space mixer): the identity of each pattern.
HYBRID_IDENTITIES = {
    (False, False, True): "ssm_block_sum",
    (True, False, False): "attention_block_sum",
    (False, True, False): "mlp_block_sum",
    (False, True, True): "ssm_mlp_block_sum",
    (True, True, True): "two_mixers_block_sum",  # attention and a state-space mixer side by side, then an MLP (Falcon-H1)
}


def mlp_reads_the_attention(run) -> bool:
    """Whether block 0's MLP receives anything the block's attention computed, found by ablation: the
    MLP's input is recorded, the run repeated with the attention's output zeroed, and the two compared.
    A parallel block (attention and MLP side by side on the block's input) gives the same input twice."""
    import torch

    from atlas.model.roles import find_roles

    from atlas.model.introspect import num_blocks

    roles = find_roles(run.model, num_blocks(run.config))  # LongCat-Flash: num_hidden_layers counts attentions, two a block
    # the first block that runs an attention and an MLP (a hybrid's first blocks may run neither)
    first = next((i for i, b in enumerate(roles.blocks) if b.attention and (b.mlp or b.mlp_inline)), None)
    if first is None:
        return True  # no block runs the two, so none runs them side by side
    block, b = run.model.get_submodule(f"{roles.block_list}.{first}"), roles.blocks[first]
    attention, mlp = block.get_submodule(b.attention), block.get_submodule(b.mlp or b.mlp_inline[0])  # OPT: the block's fc1
    seen = []
    record = mlp.register_forward_pre_hook(lambda m, args, kwargs: seen.append((args[0] if args else next(iter(kwargs.values()))).clone()),
                                           with_kwargs=True)
    try:
        with torch.no_grad(), float64_run():  # as the run: float64 throughout
            run.model(run.ids)
            zero = attention.register_forward_hook(lambda m, a, out: (out[0] * 0, *out[1:]) if isinstance(out, tuple)
                                                   else [out[0] * 0, *out[1:]] if isinstance(out, list) else out * 0)  # GPT-1's: a list
            try:
                run.model(run.ids)
            finally:
                zero.remove()
    finally:
        record.remove()
    return not torch.equal(seen[0], seen[1])


# GPT-1 normalises the stream after each add, as the 2017 transformer did (Radford et al. 2018 keep its block):
# the block's two sums hold through its norms, and the plain sums do not hold
POST_NORM_TYPES = {"openai-gpt"}
POST_NORM_IDENTITIES = {"post_norm_attention_add", "post_norm_block_sum"}


def expected_identities(name, parallel: bool = False, runs=None, norm_topk=False, dense=False):
    """(measured, not applicable) ids, from config.json and the family's declared exceptions; where every
    block is ``parallel`` (measured by ablation), no stream between the sublayers exists to test; ``runs``
    (block -> which sublayers it runs, as the run captured them) adds a hybrid's identities."""
    c, declared = released_config(name), dict(families.load(name).not_applicable)
    ffn = c.get("ffn_config") or {}  # DBRX keeps its experts in a sub-config
    mixture = any(c.get(k) or ffn.get(k) for k in ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts"))
    mixture = mixture and c.get("is_moe") is not False  # Doge names its experts' sizes with the switch that builds them off
    # DBRX divides the chosen weights by their p-norm, p = moe_normalize_expert_weights (DbrxFFNConfig's default: 1)
    p_norm = ffn.get("moe_normalize_expert_weights", 1) if ffn.get("moe_num_experts") else None
    every = BLOCK_IDENTITIES | MIXTURE_IDENTITIES | {"embeddings", "logits"} | ({"expert_weights_sum"} if mixture else set())
    skipped = set(declared)
    if runs is not None:
        patterns = set(runs.values())
        every |= {ident for pattern, ident in HYBRID_IDENTITIES.items() if pattern in patterns}
        if (True, True, False) not in patterns:
            skipped |= {"block_sum", "attention_add"}  # no block runs an attention then an MLP
        if not any(attention for attention, _, _ in patterns):
            skipped |= {"attention_rows", "attention_softmax"}  # no block attends (Mamba's stack)
    if not mixture:
        skipped |= MIXTURE_IDENTITIES  # no block is a mixture of experts
        if norm_topk:  # a class that renormalizes its routers (Nemotron-H's), built with no mixture block
            skipped.add("expert_weights_sum")
    elif not c.get("norm_topk_prob", c.get(_file_name(name, "norm_topk_prob"))) and not p_norm:
        skipped.add("expert_weights_sum")  # the router does not renormalize the chosen weights
    if c.get("final_logit_softcapping"):
        skipped.add("logits")  # the head's logits are softcapped
    if parallel:
        skipped.add("attention_add")  # layer_mid does not exist: the MLP reads the block's input
    if dense:  # every expert runs on every token, its input scaled by its score (Llama 4): no routing slots
        skipped.add("expert_slots")
        every.add("router_scores")
    if c["model_type"] in POST_NORM_TYPES:
        skipped |= {"block_sum", "attention_add"}
        every |= POST_NORM_IDENTITIES
    if c["model_type"] == "rwkv":  # block 0 normalises its own input (pre_ln): its sum starts there; the stream is halved between blocks
        every |= {"embedding_norm_ssm_mlp_block_sum", "rescaled_stream"}
    if c["model_type"] == "zamba2":  # a shared block's attention and MLP feed the mixer's input, not the stream: one add
        every = (every - {"two_mixers_block_sum"}) | {"hybrid_block_sum"}
    if c["model_type"] == "doge":  # each add weighs the stream per channel by the block's own vector: the plain sums do not hold
        skipped |= {"block_sum", "attention_add"}
        every |= {"weighted_attention_add", "weighted_block_sum"}
    return every - skipped, skipped


@pytest.mark.parametrize("name", families.names())
def test_measured_residuals_agree_with_a_recomputation(collected, name):
    """Every residual the facts report is measured again here, on the run's tensors with this test's own
    formulas, and the tensors themselves are compared with transformers' own record of the same pass
    (hidden_states: what enters each block; the model's logits). The recomputed residual must be under
    the tolerance: this, not the facts' ``holds``, is what says that an identity holds."""
    import torch

    from atlas.model.preview import preview_run

    facts = collected(name).facts["preview"]
    run = preview_run(name)  # the run collect measured (one per process)
    t, c = run.eager, released_config(name)
    n = len(t.layers)
    L = t.layers

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the preview run: the same sums in the same order, so equal to the bit
    try:
        with torch.no_grad(), float64_run():  # as the run: float64 throughout
            own = run.model(run.ids, attention_mask=torch.ones_like(run.ids), output_hidden_states=True)
    finally:
        torch.set_num_threads(threads)
    assert len(own.hidden_states) == n + 1
    exact = dict(rtol=0, atol=0)
    first_input = own.hidden_states[0]
    if c["model_type"] == "rwkv":  # RwkvModel records each block's output as the next block reads it (halved after every
        # rescale_every-th block in eval mode), then ln_out's, and not the embeddings
        with torch.no_grad():
            first_input = run.model.get_input_embeddings()(run.ids)
        torch.testing.assert_close(L[0].input, first_input, **exact)
        every = run.config.rescale_every
        for i in range(n):
            torch.testing.assert_close(L[i].output / 2 if (i + 1) % every == 0 else L[i].output, own.hidden_states[i], **exact)
        torch.testing.assert_close(t.final_norm_output, own.hidden_states[n], **exact)
    elif c["model_type"] in ("mamba", "falcon_mamba", "mamba2"):  # MambaModel (and Mamba2Model) records each block's output, then norm_f's, and not the embeddings
        with torch.no_grad():  # what enters block 0, from the model's own table
            first_input = run.model.get_input_embeddings()(run.ids)
        torch.testing.assert_close(L[0].input, first_input, **exact)
        for i in range(n):
            torch.testing.assert_close(L[i].output, own.hidden_states[i], **exact)
        torch.testing.assert_close(t.final_norm_output, own.hidden_states[n], **exact)
    else:
        for i in range(n):
            torch.testing.assert_close(L[i].input, own.hidden_states[i], **exact)
        for i in range(n - 1):
            torch.testing.assert_close(L[i].output, own.hidden_states[i + 1], **exact)
    torch.testing.assert_close(t.logits, own.logits, **exact)

    # a learned position table: an embedding table of the model other than the token embeddings (GPT-2, OPT)
    learned_positions = any(isinstance(m, torch.nn.Embedding) and m is not run.model.get_input_embeddings() for m in run.model.modules())
    # or a fixed table the model adds all the same (XGLM's sinusoids, a buffer, not an embedding)
    learned_positions = learned_positions or t.has("position_embeddings")
    runs = {i: (t.has("attention_output", i), t.has("mlp_output", i), t.has("ssm_output", i)) for i in range(n)}
    # ERNIE 4.5 names its first mixture block; LFM2-MoE counts its dense blocks
    dense = c.get("first_k_dense_replace") or c.get("moe_layer_start_index") or c.get("num_dense_layers") or 0
    # the file's list, or the one the configuration class derives where the file has none (MiMo-V2-Flash)
    kinds = c.get("mlp_layer_types") or getattr(run.config, "mlp_layer_types", None)
    if not dense and isinstance(kinds, list) and "sparse" in kinds:  # A.X K1 lists each block's MLP kind instead
        dense = kinds.index("sparse")
    # every block from the first sparse one is a mixture where the config names routed experts (a
    # family may declare mixture_sum not applicable, as Qwen3-Next's gated shared expert does)
    mixture = any(c.get(k) or (c.get("ffn_config") or {}).get(k) for k in ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts"))
    mixture = mixture and c.get("is_moe") is not False
    mixture_blocks = [i for i in range(n) if i >= dense] if mixture else []
    if mixture and c.get("expert_layer_period"):  # Jamba: a mixture every expert_layer_period blocks, from the offset
        mixture_blocks = [i for i in range(n) if i % c["expert_layer_period"] == c["expert_layer_offset"]]
    # softmax attention's identities hold where a block has softmax attention: not on linear-attention blocks
    types = getattr(run.config, "layer_types", None) or [None] * n
    softmax_blocks = [i for i in range(n) if types[i] != "linear_attention" and runs[i][0]]
    shared = bool(c.get("n_shared_experts", c.get(_file_name(name, "n_shared_experts"))) or c.get("moe_num_shared_experts")
                  or c.get("num_shared_experts")  # K-EXAONE's name (fam3)
                  or any(c.get("num_shared_expert") or []))  # Hunyuan: one count per layer
    # a score for every expert, zero where not chosen, scaling each expert's input (Llama 4's dense dispatch)
    dense = any(t.has("router_scores", i) for i in range(n))
    shared = shared or (dense and all(t.has("shared_expert_output", i) for i in mixture_blocks))
    target = c.get("routed_scaling_factor") or 1.0
    # Scales the released config sets (Granite, MiniCPM): each sublayer's output times a residual factor
    # (MiniCPM's shrinks with the tiny run's own depth), the embeddings times a multiplier, and the head's
    # output divided by logits_scaling where the config names it (MiniCPM divides the head's input instead).
    r = c.get("residual_multiplier", c["scale_depth"] / n ** 0.5 if "scale_depth" in c else 1.0)

    def layer_norm(i, name, x):
        ln = run.model.get_submodule(f"transformer.h.{i}.{name}")
        with torch.no_grad():
            return torch.nn.functional.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)

    def ctrl_rows():  # CTRL: the token rows times the square root of the width, plus its sinusoid table's rows
        return run.config.n_embd ** 0.5 * t.token_embeddings + run.model.transformer.pos_encoding[: first_input.shape[1]]
    embedding_scale, head_divisor = c.get("embedding_multiplier", 1.0), c.get("logits_scaling", 1.0)
    recompute = {
        "block_sum": lambda i: (L[i].input + L[i].self_attn.attention_output + L[i].mlp.mlp_output - L[i].output if r == 1.0 else
                                L[i].input + r * (L[i].self_attn.attention_output + L[i].mlp.mlp_output) - L[i].output),
        "attention_add": lambda i: L[i].input + r * L[i].self_attn.attention_output - L[i].layer_mid,
        "mixture_sum": lambda i: L[i].mlp.routed_output + (L[i].mlp.shared_expert_output if shared else 0) - L[i].mlp.mlp_output,
        "expert_slots": lambda i: L[i].mlp.expert_outputs.sum(dim=2) - L[i].mlp.routed_output,
        "expert_weights_sum": lambda i: L[i].mlp.expert_weights.sum(dim=-1) - target,
        "router_scores": lambda i: L[i].mlp.router_scores - torch.zeros_like(L[i].mlp.router_logits).scatter(
            -1, L[i].mlp.router_logits.topk(c["num_experts_per_tok"], dim=-1).indices,
            L[i].mlp.router_logits.topk(c["num_experts_per_tok"], dim=-1).values.sigmoid()),
        "attention_rows": lambda i: L[i].self_attn.attention_probabilities.sum(dim=-1) - 1,
        "attention_softmax": lambda i: torch.softmax(L[i].self_attn.attention_scores.float(), dim=-1) - L[i].self_attn.attention_probabilities,
        # RWKV's block 0 reads the token rows and normalises them itself
        "embeddings": lambda _: (t.token_embeddings if c["model_type"] == "rwkv" else
                                 t.embedding_norm_output if t.has("embedding_norm_output") else  # BLOOM: a norm on the embeddings
                                 ctrl_rows() if c["model_type"] == "ctrl" else
                                 embedding_scale * t.token_embeddings + (t.position_embeddings if learned_positions else 0)) - first_input,
        # GPT-1: each sum through the block's own LayerNorm, its weights read from the model
        "post_norm_attention_add": lambda i: layer_norm(i, "ln_1", L[i].input + L[i].self_attn.attention_output) - L[i].layer_mid,
        "post_norm_block_sum": lambda i: layer_norm(i, "ln_2", L[i].layer_mid + L[i].mlp.mlp_output) - L[i].output,
        "logits": lambda _: t.lm_head_output * c.get("logit_scale", 1) * c.get("lm_head_multiplier", 1) / head_divisor - own.logits,  # Cohere scales the head's logits, Granite divides them
        "ssm_block_sum": lambda i: L[i].input + L[i].ssm.ssm_output - L[i].output,
        "attention_block_sum": lambda i: L[i].input + L[i].self_attn.attention_output - L[i].output,
        "mlp_block_sum": lambda i: L[i].input + L[i].mlp.mlp_output - L[i].output,
        "ssm_mlp_block_sum": lambda i: L[i].input + L[i].ssm.ssm_output + L[i].mlp.mlp_output - L[i].output,
        # RWKV: block 0's sum starts at its own norm of the embeddings; the next block reads half a halved block's output
        "embedding_norm_ssm_mlp_block_sum": lambda i: t.embedding_norm_output + L[i].ssm.ssm_output + L[i].mlp.mlp_output - L[i].output,
        "rescaled_stream": lambda i: L[i].output / 2 - L[i + 1].input,
        # Doge: the stream times the block's own vector at each add, read from the model
        "weighted_attention_add": lambda i: (L[i].input * run.model.model.layers[i].input_residual + L[i].self_attn.attention_output
                                             - L[i].layer_mid),
        "weighted_block_sum": lambda i: L[i].layer_mid * run.model.model.layers[i].post_attention_residual + L[i].mlp.mlp_output - L[i].output,
        # Zamba2's hybrid blocks: the stream gains the mixer's output alone (the shared block's reaches the mixer's input)
        "hybrid_block_sum": lambda i: L[i].input + L[i].ssm.ssm_output - L[i].output,
        # each mixer's output times the config's constant for it (Falcon-H1)
        "two_mixers_block_sum": lambda i: (L[i].input + c.get("ssm_out_multiplier", 1.0) * L[i].ssm.ssm_output
                                           + c.get("attention_out_multiplier", 1.0) * L[i].self_attn.attention_output
                                           + L[i].mlp.mlp_output - L[i].output),
    }
    where = {"mixture_sum": mixture_blocks, "expert_slots": mixture_blocks, "expert_weights_sum": mixture_blocks, "router_scores": mixture_blocks,
             "embeddings": None, "logits": None}
    # a hybrid's identities hold where their blocks are; on a model whose every block runs an attention then
    # an MLP these are every block, as before
    where |= {ident: [i for i in range(n) if runs[i] == pattern] for pattern, ident in HYBRID_IDENTITIES.items()}
    where |= {ident: [i for i in range(n) if runs[i] == (True, True, False)] for ident in ("block_sum", "attention_add")}
    where |= {ident: softmax_blocks for ident in ("attention_rows", "attention_softmax")}
    if c["model_type"] == "rwkv":
        where["ssm_mlp_block_sum"] = list(range(1, n))
        where["embedding_norm_ssm_mlp_block_sum"] = [0]
        where["rescaled_stream"] = [i for i in range(n - 1) if (i + 1) % run.config.rescale_every == 0]
    if c["model_type"] == "zamba2":
        where["hybrid_block_sum"] = [i for i, kind in enumerate(run.config.layers_block_type) if kind == "hybrid"]

    measured, skipped = expected_identities(name, parallel=not mlp_reads_the_attention(run), runs=runs,
                                            norm_topk=bool(getattr(run.config, "norm_topk_prob", False)), dense=dense)
    assert {i["id"] for i in facts["identities"]} == measured
    assert {i["id"] for i in facts["not_applicable"]} == skipped
    assert all(i["why"] for i in facts["not_applicable"])
    for ident in facts["identities"]:
        blocks = where.get(ident["id"], list(range(n)))
        assert ident["blocks"] == blocks, ident["id"]
        with float64_run():  # this test's own formulas, in float64 as the run
            worst = max(float(recompute[ident["id"]](i).abs().max()) for i in (blocks if blocks is not None else [None]))
        assert worst <= 1e-9, f"{name}: {ident['statement']}: recomputed residual {worst:.3g}"
        assert ident["max_abs_residual"] == pytest.approx(worst, rel=5e-3, abs=1e-12), ident["id"]  # 3 significant figures


@pytest.mark.parametrize(
    "value, index, change, broken",
    [
        ("shared_expert_output", 2, lambda x: x + 1e-3, ["mixture_sum"]),
        ("layer_output", 1, lambda x: x * 1.01, ["block_sum"]),
        ("attention_probabilities", 0, lambda x: x * 1.01, ["attention_rows", "attention_softmax"]),
        ("expert_weights", 1, lambda x: x + 1e-3, ["expert_weights_sum"]),
        ("token_embeddings", None, lambda x: x - 1e-3, ["embeddings"]),
    ],
)
def test_a_tampered_capture_breaks_its_identity_and_the_check_names_it(value, index, change, broken):
    """One captured tensor changed on a copy of the run: its identity is measured broken, the others
    still hold, and check_preview fails naming the first broken identity."""
    import dataclasses

    from atlas.facts.early_checks import check_preview
    from atlas.errors import AtlasError
    from atlas.model.preview import preview_run
    from atlas.model.preview_facts import preview_facts
    from atlas.model.trace import Trace

    run = preview_run("kimi_k2")
    tampered = Trace(run.eager.resolution, run.eager.implementations)
    tampered.captured = dict(run.eager.captured)  # a copy: the cached run stays as it was
    tampered.captured[(value, index)] = change(tampered.captured[(value, index)])
    facts = preview_facts(dataclasses.replace(run, eager=tampered), families.load("kimi_k2"))
    ids = {i["id"]: i for i in facts["identities"]}
    assert [i for i, ident in ids.items() if not ident["holds"]] == broken
    assert all(ids[i]["max_abs_residual"] > ids[i]["tolerance"] for i in broken)
    first = re.escape(ids[broken[0]]["statement"])
    with pytest.raises(AtlasError, match=rf"identity {first}: broken on the preview run.*max abs residual"):
        check_preview("kimi_k2", facts)


def test_a_residual_over_the_tolerance_fails_whatever_holds_says(preview):
    import copy

    from atlas.facts.early_checks import check_preview
    from atlas.errors import AtlasError

    check_preview("kimi_k2", preview)  # the real run passes
    for residual in (2e-5, float("nan")):
        doctored = copy.deepcopy(preview)
        doctored["identities"][1].update(holds=True, max_abs_residual=residual)
        with pytest.raises(AtlasError, match=re.escape(f"identity {doctored['identities'][1]['statement']}")):
            check_preview("kimi_k2", doctored)


def test_every_value_captured_in_its_layout_shape(preview):
    # the tiny sizes by hand: 31 prompt bytes; 4 heads of 16 + 8 query/key width, 16 value width; 96 experts, 2 per token
    s = preview["shapes"]
    assert preview["tokens"] == list(preview["prompt"].encode())
    assert s["attention_queries"]["1"] == [1, 4, 31, 24]
    assert s["attention_values"]["1"] == [1, 4, 31, 16]
    assert s["attention_scores"]["0"] == [1, 4, 31, 31]
    assert s["attention_premix"]["2"] == [1, 31, 4, 16]
    assert s["router_logits"]["1"] == [1, 31, 96]
    assert s["expert_outputs"]["2"] == [1, 31, 2, 64]
    assert s["mlp_neurons"] == {"0": [1, 31, 128]}
    assert s["logits"] == {"model": [1, 31, 256]}
    for name in ("router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output", "shared_expert_output"):
        assert sorted(s[name]) == ["1", "2"], name  # missing at block 0, present at the mixture blocks
        assert list(preview["missing"][name]) == ["0"] and "not a mixture" in preview["missing"][name]["0"]
    assert preview["uncaptured"] == []


def test_router_bias_changes_some_selections(preview):
    """The counts are recomputed from the traced router scores and chosen experts; a run where the bias
    changes nothing fails the check (collect runs it, so the facts alone could never show a zero)."""
    import copy

    import torch

    from atlas.facts.early_checks import check_preview
    from atlas.errors import AtlasError
    from atlas.model.preview import preview_run

    t = preview_run("kimi_k2").eager
    recounted = {}
    for i in (1, 2):
        k = t.layers[i].mlp.expert_indices.shape[-1]
        chosen = [frozenset(row) for row in t.layers[i].mlp.expert_indices[0].tolist()]
        plain = [frozenset(row) for row in torch.topk(t.layers[i].mlp.router_logits[0], k).indices.tolist()]
        recounted[str(i)] = sum(a != b for a, b in zip(chosen, plain))
    assert preview["selection_changed_by_bias"] == recounted
    assert sum(recounted.values()) > 0
    unchanged = copy.deepcopy(preview)
    unchanged["selection_changed_by_bias"] = {"1": 0, "2": 0}
    with pytest.raises(AtlasError, match="the seeded router bias changes no token's experts"):
        check_preview("kimi_k2", unchanged)


def test_preview_data_is_compact(preview):
    tensors = preview["tensors"]
    assert len(json.dumps(tensors)) <= 1_000_000
    for block in range(3):
        assert f"layers.{block}.layer_output" in tensors
        assert tensors[f"layers.{block}.self_attn.attention_probabilities"]["shape"] == [4, 31, 31]
    assert tensors["layers.1.mlp.expert_weights"]["shape"] == [31, 2]
    assert "layers.0.mlp.expert_weights" not in tensors
    for name, t in tensors.items():
        assert t["dtype"] in ("float16", "int64"), name
        flat = t["data"]
        while flat and isinstance(flat[0], list):
            flat = [x for row in flat for x in row]
        flat = [x for x in flat if x is not None]  # None: a score the mask hid (-inf)
        assert min(flat) == t["min"] and max(flat) == t["max"], name
    weights = tensors["layers.1.mlp.expert_weights"]["data"]
    factor = released_config("kimi_k2")["routed_scaling_factor"]
    assert all(abs(sum(row) - factor) < 1e-2 for row in weights)  # float16 rows still sum to the scaling factor


def test_preview_run_is_deterministic():
    from atlas.model import preview, preview_facts
    from atlas.inputs.checkpoint import load_pinned, transformers_config
    from atlas.families import load

    family = load("kimi_k2")
    config = transformers_config(family, load_pinned(family.checkpoint))
    first, second = (json.dumps(preview_facts.preview_facts(preview.run(family, config), family)) for _ in range(2))
    assert first == second


def test_wrong_override_fails_the_build_naming_the_identity(project_copy, tmp_path):
    module = project_copy / "atlas" / "families" / "deepseek_v3.py"
    text = module.read_text()
    assert "stored_extras=multi_token_prediction_tensors,\n)" in text
    module.write_text(text.replace(
        "stored_extras=multi_token_prediction_tensors,\n)",
        'stored_extras=multi_token_prediction_tensors,\n    standard_overrides={"routed_output": "shared_experts.output"},\n)',
    ))
    out = tmp_path / "site"
    out.mkdir()
    (out / "keep.txt").write_text("previous site")
    (out / publish.MARKER).write_text(publish.MARKER_TEXT)  # a site, so the build may replace it
    result = run_build(project_copy, "--family", "kimi_k2", "--out", str(out))
    assert result.returncode == 1
    assert "identity mlp.routed_output + mlp.shared_expert_output == mlp.mlp_output" in result.stderr
    assert "max abs residual" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [publish.MARKER, "keep.txt"]


def test_a_shape_off_its_layout_fails_naming_the_value(preview):
    import copy

    from atlas.facts.early_checks import check_preview
    from atlas.errors import AtlasError

    doctored = copy.deepcopy(preview)
    doctored["shapes"]["attention_keys"]["1"] = [1, 1, 31, 24]  # one shared key head instead of the layout's 4
    with pytest.raises(AtlasError, match=r"shape of attention_keys at block 1: the preview run gave \[1, 1, 31, 24\], the layout Keys says \[1, 4, 31, 24\]"):
        check_preview("kimi_k2", doctored)
    doctored = copy.deepcopy(preview)
    doctored["identities"][0].update(holds=False, max_abs_residual=0.5)
    with pytest.raises(AtlasError, match=r"identity layers\[i\]\.input \+ self_attn\.attention_output \+ mlp\.mlp_output == layer_output"):
        check_preview("kimi_k2", doctored)
