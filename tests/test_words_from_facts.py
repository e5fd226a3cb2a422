"""Words from facts: what a page says about a model is what its proofs found, and a claim the facts
contradict stops the build (atlas/check/prose.py against atlas/model/architecture.py's profile).

Each false sentence the atlas once printed has a test here that asserts what the page says now, and,
where the same rule speaks truly of another family, that it still does (so the test can fail both ways).
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from atlas.check import prose
from atlas.errors import AtlasError
from atlas.model import architecture
from atlas.model.block_kinds import layer_types
from atlas.render import pages
from tests.conftest import run_build


def support_value(facts, name):
    return next(v for h in facts["support"]["hosts"] for v in h["values"] if v["name"] == name)


def abbreviations(facts):
    return {f["abbreviation"] for f in facts["features"]}


@pytest.fixture(scope="module")
def view(collected):
    held = {}

    def get(name):
        if name not in held:
            held[name] = pages.site(collected(name).facts)
        return held[name]

    return get


# --- the claim vocabulary ----------------------------------------------------------------------------


@pytest.mark.parametrize("text, claims", [
    ("Queries per head, rotary applied", ["rotary"]),
    ("ALiBi instead of position embeddings", ["ALiBi"]),
    ("no rotary embedding: positions come from a learned position table", ["learned positions"]),
    ("the model has neither a rotary embedding nor a learned position table", []),
    ("it keeps the top 6 by score", ["top-k"]),
    ("Attention soft-capping is gone", []),
    ("Blocks 21–23 would attend within a sliding window if use_sliding_window were on", []),
    ("with no shared expert", []),
    ("a sliding window of 4,096 positions; a shared expert", ["window", "shared expert"]),
    ("rope_theta and input_layernorm", []),  # names of keys and modules are not claims
])
def test_claims_in_words(text, claims):
    assert [name for name, _, _ in architecture.claims_in(text)] == claims


def test_a_page_that_claims_rotary_on_gpt2_fails_in_one_line(collected):
    facts = collected("gpt2").facts
    page = "<html><body><p>Queries per head as the attention function receives them, rotary applied.</p></body></html>"
    with pytest.raises(AtlasError) as caught:
        prose.check_pages(facts, {"gpt2/c/value.attention_queries.html": page}, {})
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith("page gpt2/c/value.attention_queries.html")
    assert 'claim "rotary"' in line and "rotary applied" in line
    assert "the model has no rotary embedding: its positions come from a learned position table" in line
    # the same words on a model that rotates are true
    prose.check_pages(collected("llama").facts, {"llama/c/value.attention_queries.html": page}, {})


def test_a_component_is_held_to_its_own_routing(collected):
    """DeepSeek-V4 routes some blocks by score and some by a table: a hash router that 'keeps the top 6' is
    false on its own page, though the model has score routers elsewhere."""
    facts = collected("deepseek_v4").facts
    hashed = next(cid for cid, c in facts["equations"]["components"].items() if c["facts"].get("hash_routing", {}).get("value"))
    scored = next(cid for cid, c in facts["equations"]["components"].items()
                  if c["facts"].get("kind", {}).get("value") == "router" and not c["facts"].get("hash_routing"))
    words = "Router. Scores the 256 experts for each token, keeps the top 6."
    with pytest.raises(AtlasError, match=r'claim "top-k".*router that chooses by score in this component'):
        prose.check_pages(facts, {}, {hashed: words})
    prose.check_pages(facts, {}, {scored: words})


@pytest.mark.parametrize("page, said", [
    ("<p>shared expert</p>", True),
    ('<ul class="eq-facts-list"><li><strong>shared expert</strong>: <code>False</code></li></ul>', False),  # a fact by name
    ('<td class="disclaimed">Rows of a shared expert. <em>Not so in this model</em></td>', False),  # shown with its fact
    ('<pre class="code">shared_expert = SharedExpert(config)  # shared expert</pre>', False),  # source, verbatim
    ('<span title="one shared expert">?</span>', True),  # a tooltip is read
])
def test_what_a_page_check_reads(collected, page, said):
    facts = collected("mixtral").facts  # no shared expert
    if said:
        with pytest.raises(AtlasError, match='claim "shared expert"'):
            prose.check_pages(facts, {"mixtral/x.html": page}, {})
    else:
        prose.check_pages(facts, {"mixtral/x.html": page}, {})


def test_config_words_a_model_contradicts_are_shown_with_the_fact(collected):
    # GPT-J's n_positions names a learned position table; GPT-J rotates instead
    disclaimed = prose.disclaimed_config(collected("gptj").facts)
    assert disclaimed["n_positions"] == "the model has no learned position table: its positions come from a rotary embedding"
    assert "n_positions" not in prose.disclaimed_config(collected("gpt2").facts)


# --- typed prose ---------------------------------------------------------------------------------------


def test_typed_tags_and_summary_are_checked(collected):
    facts = collected("qwen3_0_6b").facts
    family = {**facts["family"], "tags": ["Sliding-window attention"]}
    with pytest.raises(AtlasError, match=r"tag 'Sliding-window attention'.*no attention has a window narrower than the context"):
        prose.check_family_words({**facts, "family": family})
    # a tag the build derives from the model is the derived one's to show
    family = {**facts["family"], "tags": ["Grouped-query attention"]}
    with pytest.raises(AtlasError, match=r"derives it from the model as GQA"):
        prose.check_family_words({**facts, "family": family})
    prose.check_family_words(facts)


def test_false_tags_and_summary_fail_the_build_in_one_line(project_copy):
    module = project_copy / "atlas/families/qwen3_0_6b.py"
    text = module.read_text()
    text = re.sub(r"summary=\(.*?\),\n", 'summary="ALiBi positions and sliding-window attention in every block.",\n', text, count=1, flags=re.S)
    text = re.sub(r"tags=\(.*?\),\n", 'tags=("ALiBi", "Sliding-window attention"),\n', text, count=1, flags=re.S)
    module.write_text(text)
    result = run_build(project_copy, "--family", "qwen3_0_6b")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith('error: atlas/families/qwen3_0_6b.py: summary, claim "ALiBi": ')
    assert '"ALiBi positions and sliding-window attention in every block"' in lines[0]
    assert "the model has no ALiBi: its positions come from a rotary embedding" in lines[0]


# --- the false statements of issue 22, each as the page says it now ----------------------------------------


@pytest.mark.parametrize("family, says", [
    ("gpt2", "; no positions are applied here: the learned position table's rows were added to the stream before block 0"),
    ("opt", "; no positions are applied here: the learned position table's rows were added to the stream before block 0"),
    ("bloom", "; ALiBi adds the positions to the scores, not to these"),
    ("jamba", "; no positions are applied: the model gives none"),
    ("llama", ", rotary applied"),
    ("smollm3", ", rotary applied in the blocks that rotate (the others are given no positions)"),
])
def test_queries_and_keys_say_what_positions_they_carry(collected, family, says):
    facts = collected(family).facts
    assert support_value(facts, "attention_queries")["description"] == "Queries per head as the attention function receives them" + says
    assert support_value(facts, "attention_keys")["description"] == "Keys per key head as the attention function receives them" + says


def test_gpt2_token_embeddings_are_not_the_stream(collected):
    gpt2 = support_value(collected("gpt2").facts, "token_embeddings")["description"]
    assert gpt2 == "The embedding table's rows for the input tokens; the learned position table's rows are added to them before block 0"
    assert support_value(collected("llama").facts, "token_embeddings")["description"] == "The embedding table's rows for the input tokens"


@pytest.mark.parametrize("family, path", [
    ("jamba", "state_space_block.mamba.in_proj"),
    ("nemotron_h", "state_space_block.mixer.in_proj"),
    ("falcon_h1", "attention_and_state_space_block.mamba.in_proj"),
    ("granite_moe_hybrid", "state_space_block.mamba.in_proj"),
    ("lfm2", "short_convolution_block.conv.in_proj"),
])
def test_a_mixers_input_projection_is_no_position_embedding(view, family, path):
    node = view(family)["nodes"][path]
    assert node["title"] == "Input projection"
    assert node["description"].startswith("Projects the stream into ")


def test_gpt2_position_table_keeps_its_title(view):
    assert view("gpt2")["nodes"]["wpe"]["title"] == "Position embedding"


def test_deepseek_v4_hash_router_says_it_looks_up_a_table(collected, view):
    facts, nodes = collected("deepseek_v4").facts, view("deepseek_v4")["nodes"]
    components = facts["equations"]["components"]
    routers = {cid: bool(c["facts"].get("hash_routing", {}).get("value")) for cid, c in components.items()
               if c["facts"].get("kind", {}).get("value") == "router"}
    assert set(routers.values()) == {True, False}
    k, n = facts["config"]["raw"]["num_experts_per_tok"], facts["config"]["raw"]["n_routed_experts"]
    for cid, hashed in routers.items():
        words = nodes[cid]["description"]
        assert nodes[cid]["title"] == ("Hash router" if hashed else "Router")
        if hashed:
            assert words.startswith(f"Looks up each token's {k} experts of {n} in a stored table, one row per token id")
            assert "keeps the top" not in words
        else:
            assert f"keeps the top {k}" in words


def test_kimi_linear_latent_attention_turns_nothing(view):
    words = view("kimi_linear")["nodes"]["global_MoE_block.self_attn"]["description"]
    assert "each query and key carrying a second 64-wide part (one key part shared by all heads), which nothing turns: the attention is given no positions" in words
    assert "rotary" not in words
    assert "carrying a 64-wide rotary part (one rotary key shared by all heads)" in view("kimi_k2")["nodes"]["MoE_block.self_attn"]["description"]


@pytest.mark.parametrize("family, path, groups", [
    ("nemotron_h", "state_space_block.mixer.norm", 8),
    ("granite_moe_hybrid", "state_space_block.mamba.norm", 1),
])
def test_a_grouped_gated_norm_in_its_order(collected, view, family, path, groups):
    facts = collected(family).facts
    assert facts["config"]["raw"].get("n_groups", facts["config"]["raw"].get("mamba_n_groups")) == groups
    proof = facts["equations"]["components"][path]["facts"]
    # the other order was run too, and failed: the choice is measured, not merely consistent with the run
    assert proof["gated_norm_order"] == {"value": "gate_then_grouped_norm", "how": "measured: the only variant that reproduces "
                                         "the module on the preview run (the others diverge from it: norm_then_gate)"}
    # the order that was tried and dropped leaves nothing behind
    assert "gated_norm" not in proof
    assert not [name for name, f in proof.items() if "no variant reproduces" in f["how"]]
    over = f"each of its {groups} groups of channels" if groups > 1 else "each vector"
    assert view(family)["nodes"][path]["description"].startswith(f"Multiplies its input by SiLU of the gate z first, then divides {over} by its root mean square")


@pytest.mark.parametrize("family, pairs", [("phi2", 16), ("gptj", 32), ("pythia", 16), ("llama", 64)])
def test_the_rotary_angles_count_the_pairs_that_turn(collected, view, family, pairs):
    raw = collected(family).facts["config"]["raw"]
    head = raw.get("head_dim") or raw.get("n_embd", raw.get("hidden_size")) // raw.get("n_head", raw.get("num_attention_heads"))
    factor = raw.get("partial_rotary_factor") or raw.get("rotary_pct") or (raw["rotary_dim"] / head if raw.get("rotary_dim") else 1)
    assert int(head * factor) // 2 == pairs  # the config, by hand: Phi-2 turns 32 of its 80 dims
    attention = next(n for nid, n in view(family)["nodes"].items() if nid.endswith(("self_attn", ".attn", ".attention")) and n.get("io"))
    dims = {x["symbol"]: x["dims"] for x in attention["io"]["in"]}
    assert dims[next(s for s in dims if "R" in s)] == f"[T positions, {pairs} pairs]"


def test_falcon_h1_shows_its_measured_block_sum(collected):
    from atlas.render.site import render_family

    page = render_family(collected("falcon_h1").facts)["falcon_h1/index.html"]
    block = page[page.index('id="identity"'):]
    block = block[:block.index("</p>")]
    assert "does not hold here" not in block and "no block has the values" not in block
    assert "ssm_out_multiplier" in block and "attention_out_multiplier" in block and "✓" in block


def test_bloom_is_alibi_not_nope(collected):
    found = abbreviations(collected("bloom").facts)
    assert "ALiBi" in found and "NoPE" not in found and "RoPE" not in found


def test_a_window_as_long_as_the_context_is_no_window(collected):
    phimoe = collected("phimoe").facts
    assert phimoe["config"]["raw"]["sliding_window"] == phimoe["config"]["raw"]["max_position_embeddings"] == 131072
    assert "SWA" not in abbreviations(phimoe)
    assert {k["attention_type"] for k in phimoe["block_kinds"]} == {None}
    assert not architecture.profile(phimoe)["window"]
    assert "SWA" in abbreviations(collected("phi3").facts)  # 2,047 of 4,096: a window
    config = SimpleNamespace(sliding_window=4096, max_position_embeddings=4096, num_hidden_layers=2, layer_types=None)
    assert layer_types(config) is None
    config.max_position_embeddings = 32768
    assert layer_types(config) == ["sliding_attention"] * 2
    config.layer_types, config.max_position_embeddings = ["sliding_attention", "full_attention"], 4096
    assert layer_types(config) == ["full_attention", "full_attention"]


def test_jamba_mamba_mixer_has_a_title_and_words(view):
    node = view("jamba")["nodes"]["state_space_block.mamba"]
    assert node["title"] == "Mamba state-space mixer (selective scan)"
    assert node["description"].startswith("A selective state-space mixer (Mamba): 8,192 channels, each carrying a 16-wide state")
    assert "JambaMambaMixer module" not in node["description"]
