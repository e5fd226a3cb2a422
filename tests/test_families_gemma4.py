"""Gemma 4 (31B dense, 26B-A4B mixture), each against a hand derivation from its config.json.

As in tests/test_families.py, every expected total is derived here from the sizes in the family's
config.json (read from the file by the test, its text_config section) through a formula written out
by hand; none is copied from the facts under test. The formula relies on settings the test asserts in
the file first: no biases, a tied head, values taken from the key projection on the global blocks, no
per-layer input embeddings and no shared key/value layers.
"""

from __future__ import annotations

from tests.conftest import released_config


def _shape(c):
    """The block pattern and the two attention sizes: (sliding blocks, global blocks, sliding attention,
    global attention), each attention's parameters written out."""
    d, H = c["hidden_size"], c["num_attention_heads"]
    kinds = c["layer_types"]
    assert len(kinds) == c["num_hidden_layers"]
    n_global = kinds.count("full_attention")
    n_sliding = kinds.count("sliding_attention")
    assert n_global + n_sliding == c["num_hidden_layers"]
    # Settings the formula relies on.
    assert c["attention_bias"] is False and c["tie_word_embeddings"] is True
    assert c["attention_k_eq_v"] is True  # the global blocks have no v_proj
    assert c["hidden_size_per_layer_input"] == 0 and c["num_kv_shared_layers"] == 0
    assert c["use_double_wide_mlp"] is False
    hd, kv = c["head_dim"], c["num_key_value_heads"]
    ghd, gkv = c["global_head_dim"], c["num_global_key_value_heads"]
    # sliding: q, k, v, o projections, q_norm and k_norm gains of one head's width (v_norm has no gain)
    sliding = d * H * hd + d * kv * hd + d * kv * hd + H * hd * d + 2 * hd
    # global: q, k (serving as values too), o; q_norm and k_norm gains of the wider head
    global_ = d * H * ghd + d * gkv * ghd + H * ghd * d + 2 * ghd
    return n_sliding, n_global, sliding, global_


def test_gemma4_31b(collected):
    f, c = collected("gemma4").facts, released_config("gemma4")
    V, d, L, F = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
    assert c["enable_moe_block"] is False
    n_sliding, n_global, sliding_attn, global_attn = _shape(c)
    mlp = 3 * d * F  # gate, up, down (GeGLU)
    norms = 4 * d  # the sandwich: before and after attention, before and after the MLP
    sliding_block = sliding_attn + mlp + norms
    global_block = global_attn + mlp + norms
    parameters = V * d + n_sliding * sliding_block + n_global * global_block + d  # tied head; final norm
    assert f["accounting"]["model"]["parameters"] == parameters
    # Every block stores its layer_scalar (one number): a buffer the files hold, counted apart.
    assert f["accounting"]["model"]["stored_buffers"] == L
    assert f["accounting"]["model"]["total"] == parameters + L
    # The published size, 30.7 B, is the text model's.
    assert round(parameters / 1e9, 1) == 30.7
    assert {k["label"]: k["count"] for k in f["block_kinds"]} == {"sliding-window block": n_sliding, "global block": n_global}
    # The wider global heads and fewer key/value heads are recorded per block.
    block_sizes = f["config"]["block_sizes"]
    globals_ = [str(i) for i, k in enumerate(c["layer_types"]) if k == "full_attention"]
    assert sorted(block_sizes, key=int) == globals_
    assert all(block_sizes[b]["num_kv_heads"] == c["num_global_key_value_heads"] and block_sizes[b]["head_dim"] == c["global_head_dim"]
               for b in globals_)
    assert f["config"]["standardized"]["num_kv_heads"] == c["num_key_value_heads"]
    assert f["config"]["standardized"]["head_dim"] == c["head_dim"]


def test_gemma4_global_attention_steps(collected):
    """The global block's attention takes its values from the key projection, normalizes them without a
    gain, and scales the scores by 1: each stated as a step and reproduced on the preview run."""
    f = collected("gemma4").facts
    components = f["equations"]["components"]
    attn = components["global_block.self_attn"]
    assert attn["facts"]["values"]["value"] == "the key projection's output"
    assert attn["facts"]["heads"]["value"] == {"query": 32, "key_value": 4, "head_dim": 512}
    assert attn["facts"]["scaling"]["value"] == 1.0
    # proportional RoPE: only partial_rotary_factor of the global head's angle pairs turn, counted on the run
    c = released_config("gemma4")
    turning = int(c["rope_parameters"]["full_attention"]["partial_rotary_factor"] * c["global_head_dim"] // 2)
    assert attn["facts"]["rotated_pairs"]["value"]["turning"] == turning == 64
    assert "rotated_pairs" not in components["sliding_window_block.self_attn"]["facts"]
    assert "global_block.self_attn.v_proj" not in components
    assert components["global_block.self_attn.v_norm"]["facts"]["gain"]["value"] == "none"
    sliding = components["sliding_window_block.self_attn"]
    assert "values" not in sliding["facts"] and sliding["facts"]["heads"]["value"]["head_dim"] == 256
    block = components["global_block"]
    assert block["facts"]["output_scale"]["value"] == "layer_scalar"
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]


def test_gemma4_preview_keeps_the_per_layer_sizes(collected):
    """The tiny run keeps one whole period of the pattern, the global block's wider heads in the pinned
    ratio (512 against 256 becomes 32 against 16), its fewer key/value heads, and a layer_scalar moved
    off 1 so that the block's scaling step is what reproduces it."""
    from atlas.model.preview import preview_run

    p = collected("gemma4").facts["preview"]
    assert p["block_sizes"]["5"] == {"num_kv_heads": 1, "head_dim": 32, "qk_head_dim": 32}
    assert all(p["block_sizes"][str(i)] == {"num_kv_heads": 2, "head_dim": 16, "qk_head_dim": 16} for i in range(5))
    assert p["shapes"]["attention_keys"]["5"][1:] != p["shapes"]["attention_keys"]["0"][1:]
    run = preview_run("gemma4")
    scalars = [float(layer.layer_scalar) for layer in run.model.model.layers]
    assert all(s != 1.0 for s in scalars)
    assert run.model.model.layers[5].self_attn.v_proj is None


def test_a_wrong_value_norm_fails_the_build(project_copy):
    """The value norm holds no tensor: its formula is measured; declared as a mean-centred norm, the build
    fails naming the component and the step."""
    import textwrap

    from tests.conftest import run_build

    (project_copy / "atlas/families/scratch.py").write_text(textwrap.dedent('''\
        """A scratch copy of Gemma 4 that declares its value norm mean-centred."""

        from atlas.families.gemma4 import FAMILY as SIBLING

        FAMILY = SIBLING.but(title="Scratch Gemma 4", equations={"*.v_norm": {"norm": "layer"}})
        '''))
    (project_copy / "atlas/families/scratch.md").write_text("Notes of a scratch family.\n")
    result = run_build(project_copy, "--family", "scratch", "--out", str(project_copy / "site"))
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[0]
    assert error.startswith("error: family scratch: component "), error
    assert "self_attn.v_norm:" in error and "does not reproduce the module on the preview run" in error


def test_gemma4_26b_a4b(collected):
    f, c = collected("gemma4_moe").facts, released_config("gemma4_moe")
    V, d, L, F = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
    E, K, Fe = c["num_experts"], c["top_k_experts"], c["moe_intermediate_size"]
    assert c["enable_moe_block"] is True
    n_sliding, n_global, sliding_attn, global_attn = _shape(c)
    mlp = 3 * d * F  # the block's small dense GeGLU MLP
    router = E * d + d + E  # projection, a gain over the width, one scale per expert
    experts = E * (2 * Fe * d + d * Fe)  # fused gate/up and down per expert, no biases
    norms = 4 * d + 3 * d  # the sandwich, plus the experts' input norm and the two post-norms before the sum
    ffn = mlp + router + experts + norms
    parameters = V * d + n_sliding * (sliding_attn + ffn) + n_global * (global_attn + ffn) + d
    assert f["accounting"]["model"]["parameters"] == parameters
    assert f["accounting"]["model"]["stored_buffers"] == L  # layer_scalar
    total = parameters + L
    assert f["accounting"]["model"]["total"] == total
    # A token runs through K of the E experts in every block.
    active = total - L * experts * (E - K) // E
    assert f["accounting"]["model"]["active"] == active
    # The published sizes: 25.2 B in all, 3.8 B active.
    assert round(parameters / 1e9, 1) == 25.2 and round(active / 1e9, 1) == 3.8
    components = f["equations"]["components"]
    block = components["sliding_window_block"]
    assert block["facts"]["side_mixture"]["value"]["router"] == "router"
    assert block["facts"]["output_scale"]["value"] == "layer_scalar"
    router_facts = components["sliding_window_block.router"]["facts"]
    assert router_facts["router_gain"]["value"] == "gain_over_sqrt_width"
    assert router_facts["per_expert_scale"]["value"] == "per_expert_scale"
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]


def test_gemma4_26b_a4b_values_and_drawing(collected):
    """The block's own router and experts host the mixture's standard values, captured on the run and
    compared by the block's steps; the drawing shows them under the MLP."""
    f = collected("gemma4_moe").facts
    mlp = next(h for h in f["support"]["hosts"] if h["host"] == "layers[i].mlp")
    placed = {v["name"]: v for v in mlp["values"]}
    for name in ("router_logits", "expert_weights", "expert_indices", "routed_output"):
        assert placed[name]["blocks"] == list(range(30)), name
    assert "expert_outputs" not in f["preview"]["shapes"]
    skipped = {s["id"] for s in f["preview"]["not_applicable"]}
    assert {"mixture_sum", "expert_slots", "expert_weights_sum", "block_sum"} <= skipped
