"""Proven equations: what the steps say matches what each model is (read from its config and tensors
here, independently of the proof), and a wrong step fails the build in one line naming it."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from atlas import families
from tests.conftest import ROOT, run_build


def config_of(name: str) -> dict:
    return json.loads((ROOT / "atlas/checkpoints" / families.load(name).checkpoint / "config.json").read_text())


def components(collected, name):
    return collected(name).facts["equations"]["components"]


@pytest.mark.parametrize("name", families.names())
def test_every_component_page_is_proven_or_never_called(collected, name):
    facts = collected(name).facts
    eq = facts["equations"]
    # every module the accounting knows outside the blocks, and every block kind, has a proof
    expected = {row["path"].split(".")[-1] for row in facts["accounting"]["model"]["rows"]}
    expected |= {k["id"] for k in facts["block_kinds"]} | {"model", "blocks"}
    assert expected <= set(eq["components"]) | set(eq["not_called"])
    assert eq["total"]["steps"] == sum(len(c["steps"]) for c in eq["components"].values())
    for pid, c in eq["components"].items():
        assert c["steps"], pid
        assert c["proof"]["compared"] >= 1, pid
        assert c["proof"]["error"] <= c["proof"]["tolerance"], pid


def test_gpt2_has_layernorm_and_learned_positions_not_rope(collected):
    eq = components(collected, "gpt2")
    norms = [c for pid, c in eq.items() if c["facts"].get("kind", {}).get("value") == "norm"]
    assert norms and all(c["facts"]["norm"]["value"] == "layer" for c in norms)
    attention = eq["transformer_block.attn"]
    assert attention["facts"]["positions"]["value"] == "none inside the attention"
    assert not any("RoPE" in s["tex"] or r"\cos" in s["tex"] for c in eq.values() for s in c["steps"])
    assert any("position_embeddings" in s["values"] for s in eq["model"]["steps"])


@pytest.mark.parametrize("name", ["llama", "gpt_oss", "qwen3", "gpt2"])
def test_projection_biases_follow_the_config(collected, name):
    cfg = config_of(name)
    # GPT-2's Conv1D projections always carry a bias; the others follow attention_bias (default off)
    expected = True if name == "gpt2" else bool(cfg.get("attention_bias", False))
    eq = components(collected, name)
    projections = [c for pid, c in eq.items() if re.search(r"\.(q_proj|k_proj|v_proj|c_attn)$", pid)]
    assert projections
    for c in projections:
        assert c["facts"]["bias"]["value"] is expected
        assert ("+b" in c["steps"][0]["tex"]) is expected


@pytest.mark.parametrize("name", ["mixtral", "qwen3_moe", "kimi_k2", "deepseek_v3", "gpt_oss"])
def test_router_rule_follows_the_config(collected, name):
    cfg = config_of(name)
    scoring = cfg.get("scoring_func", "softmax")
    if name in ("gpt_oss", "mixtral"):
        # Mixtral renormalises the kept softmax scores; gpt-oss takes a softmax over the top k logits:
        # the same weights, so the first of the two that the library tries is the one measured
        expected = "softmax_renormalized"
    else:
        expected = scoring + ("_renormalized" if cfg.get("norm_topk_prob") else "")
    routers = [c for c in components(collected, name).values() if c["facts"].get("kind", {}).get("value") == "router"]
    assert routers and all(c["facts"]["routing"]["value"] == expected for c in routers)
    if name == "gpt_oss":  # and declaring the other form of the same rule reproduces the router too
        assert routers[0]["facts"]["routing"]["how"].startswith("measured")
    scale = cfg.get("routed_scaling_factor", 1.0)
    for c in routers:
        assert ("scaling" in c["facts"]) is (scale != 1.0)
        if scale != 1.0:
            assert c["facts"]["scaling"]["value"] == scale


@pytest.mark.parametrize("name", ["gemma2", "gemma3"])
def test_gemma_norms_scale_by_one_plus_gain(collected, name):
    norms = [c for c in components(collected, name).values() if c["facts"].get("kind", {}).get("value") == "norm"]
    assert norms and all(c["facts"]["norm"]["value"] == "rms_offset" for c in norms)
    assert all(any("(1+g)" in s["tex"] for s in c["steps"]) for c in norms)


def test_sliding_blocks_state_their_window(collected):
    cfg = config_of("gpt_oss")
    eq = components(collected, "gpt_oss")
    assert eq["sliding_window_block.self_attn"]["facts"]["window"]["value"] == cfg["sliding_window"]
    assert any(f"t-{cfg['sliding_window']}<s" in s["tex"] for s in eq["sliding_window_block.self_attn"]["steps"])
    assert not any("<s" in s["tex"] for s in eq["global_block.self_attn"]["steps"])


# --- a wrong step fails the build, naming family, component and step ---------------------------------


def add_family(project: Path, name: str, sibling: str, equations: dict) -> None:
    """A family by README's files: a module (the sibling's architecture, declaring ``equations``) and notes."""
    (project / f"atlas/families/{name}.py").write_text(textwrap.dedent(f'''\
        """A scratch copy of {sibling} that declares some of its steps."""

        from atlas.families.{sibling} import FAMILY as SIBLING

        FAMILY = SIBLING.but(title="Scratch {sibling}", equations={equations!r})
        '''))
    (project / f"atlas/families/{name}.md").write_text("Notes of a scratch family.\n")


@pytest.mark.parametrize("sibling, equations, component, step", [
    # the wrong norm: Llama's RMSNorm declared with a (1 + g) gain
    ("llama", {"*layernorm": {"norm": "rms_offset"}}, "transformer_block.input_layernorm", "(1+g)"),
    # a dropped bias: gpt-oss's query projection declared without its bias
    ("gpt_oss", {"*.q_proj": {"bias": False}}, "sliding_window_block.self_attn.q_proj", r"y=xW^{\top}"),
    # a softmax router declared as a sigmoid one
    ("mixtral", {"*.gate": {"routing": "sigmoid_renormalized"}}, "transformer_block.mlp.gate", "routing = sigmoid_renormalized"),
])
def test_a_wrong_step_fails_the_build_naming_it(project_copy, sibling, equations, component, step):
    add_family(project_copy, "scratch", sibling, equations)
    out = project_copy / "site"
    result = run_build(project_copy, "--family", "scratch", "--out", str(out))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    error = lines[0]
    assert error.startswith("error: family scratch: component "), result.stderr
    assert f"component {component}:" in error
    assert "does not reproduce the module on the preview run" in error
    assert step in error
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_a_declared_variant_that_does_not_exist_is_one_line(project_copy):
    add_family(project_copy, "scratch", "llama", {"*layernorm": {"norm": "batchnorm"}})
    result = run_build(project_copy, "--family", "scratch", "--out", str(project_copy / "site"))
    assert result.returncode == 1
    assert "equations['transformer_block.input_layernorm'].norm: 'batchnorm' is not one of rms, rms_offset, layer" in result.stderr
    assert "Traceback" not in result.stderr


# --- a new user's family: README's three files, a config no other test has seen ----------------------

QWEN2_7B = {  # Qwen2.5-7B's released sizes: q, k and v projections with biases, o_proj without
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 3584,
    "intermediate_size": 18944, "max_position_embeddings": 131072, "num_attention_heads": 28, "num_hidden_layers": 28,
    "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 152064,
}

GRANITE_8B = {  # Granite 3.3 8B's released sizes: embedding, residual, attention and logit multipliers
    "architectures": ["GraniteForCausalLM"], "model_type": "granite", "attention_bias": False, "attention_multiplier": 0.0078125,
    "embedding_multiplier": 12.0, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12800, "logits_scaling": 16.0,
    "max_position_embeddings": 131072, "mlp_bias": False, "num_attention_heads": 32, "num_hidden_layers": 40,
    "num_key_value_heads": 8, "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_theta": 10000000.0,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 49159,
}


def add_new_family(project: Path, name: str, repo: str, model_class: str, config: dict, **declared) -> None:
    fields = "".join(f"    {key}={value!r},\n" for key, value in declared.items())
    (project / f"atlas/families/{name}.py").write_text(
        '"""A family a new user adds by README\'s three files."""\n\n'
        "from atlas.inputs.family import Family\n\n"
        "FAMILY = Family(\n"
        f'    title="{name}", vendor="tests", released="2024-09", summary="A family added by a test.", tags=(),\n'
        f'    checkpoint="{repo}", model_class="{model_class}", config_class="{model_class.replace("ForCausalLM", "Config")}",\n'
        f"{fields})\n"
    )
    (project / f"atlas/families/{name}.md").write_text("What a reader should know.\n")
    folder = project / "atlas/checkpoints" / repo
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "checkpoint.json").write_text(json.dumps({"repo": repo, "revision": "unpinned", "safetensors": {}, "provenance": "a test"}))


def built_facts(project: Path, name: str) -> dict:
    out = project / "site"
    result = run_build(project, "--family", name, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return json.loads((out / name / "facts.json").read_text())


def test_a_new_family_with_qkv_biases_shows_them(project_copy):
    add_new_family(project_copy, "qwen2_new", "example/qwen2-new", "Qwen2ForCausalLM", QWEN2_7B)
    facts = built_facts(project_copy, "qwen2_new")
    c = QWEN2_7B
    d, L, V, I, H, KV = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = d // H
    attention = (d * H * hd + H * hd) + 2 * (d * KV * hd + KV * hd) + H * hd * d  # q, k, v with biases; o without
    block = attention + 3 * d * I + 2 * d
    assert facts["accounting"]["model"]["total"] == V * d + L * block + d + V * d  # embeddings, blocks, final norm, head
    eq = facts["equations"]["components"]
    for name, bias in (("q_proj", True), ("k_proj", True), ("v_proj", True), ("o_proj", False)):
        assert eq[f"transformer_block.self_attn.{name}"]["facts"]["bias"]["value"] is bias
    page = (project_copy / "site/qwen2_new/c/transformer_block.self_attn.q_proj.html").read_text()
    assert "Reproduced on the preview run" in page
    attention_steps = [s["tex"] for s in eq["transformer_block.self_attn"]["steps"]]
    assert sum("+b" in t for t in attention_steps[:3]) == 3


def test_a_new_family_with_multipliers_shows_each_as_a_proven_step(project_copy):
    why = "Granite scales each sublayer's contribution by residual_multiplier before the add"
    add_new_family(project_copy, "granite_new", "example/granite-new", "GraniteForCausalLM", GRANITE_8B, not_applicable={
        "block_sum": why, "attention_add": why,
        "embeddings": "Granite multiplies the token embeddings by embedding_multiplier",
        "logits": "Granite divides the head's logits by logits_scaling",
    })
    facts = built_facts(project_copy, "granite_new")
    eq = facts["equations"]["components"]
    c = GRANITE_8B
    assert eq["transformer_block"]["facts"]["residual_scale"]["value"] == "config_residual_multiplier"
    assert any(f"{c['residual_multiplier']:g}" in s["tex"] for s in eq["transformer_block"]["steps"])
    model = eq["model"]
    assert model["facts"]["embedding_scale"]["value"] == "config_embedding_multiplier"
    assert any(f"{c['embedding_multiplier']:g}" in s["tex"] for s in model["steps"])
    assert model["facts"]["logits_scaling"]["value"] == c["logits_scaling"]
    assert eq["transformer_block.self_attn"]["facts"]["scaling"]["value"] == c["attention_multiplier"]


def test_a_new_family_whose_steps_the_library_lacks_names_the_step(project_copy):
    # Granite's blocks declared to add their sublayers unscaled: the build says which step does not reproduce
    add_new_family(project_copy, "granite_new", "example/granite-new", "GraniteForCausalLM", GRANITE_8B,
                   not_applicable={"block_sum": "scaled adds", "attention_add": "scaled adds", "embeddings": "scaled", "logits": "scaled"},
                   equations={"transformer_block": {"residual_scale": "none"}})
    result = run_build(project_copy, "--family", "granite_new", "--out", str(project_copy / "site"))
    assert result.returncode == 1
    assert result.stderr.startswith("error: family granite_new: component transformer_block: step `x'=x+\\Delta_{\\mathrm{attn}}` does not reproduce")
    assert "declared by the family: residual_scale = none" in result.stderr


def test_latent_attention_without_a_query_latent(project_copy):
    # DeepSeek-V3's config with q_lora_rank null (as DeepSeek-V2-Lite has it): queries straight from x
    config = json.loads((ROOT / "atlas/checkpoints/deepseek-ai/DeepSeek-V3/config.json").read_text())
    config.pop("quantization_config", None)
    config.update(q_lora_rank=None, num_hidden_layers=4, first_k_dense_replace=1)
    add_new_family(project_copy, "mla_no_q_latent", "tests/mla-no-q-latent", "DeepseekV3ForCausalLM", config)
    facts = built_facts(project_copy, "mla_no_q_latent")
    attention = next(c for pid, c in facts["equations"]["components"].items() if pid.endswith(".self_attn"))
    assert attention["facts"]["latent"]["value"]["q_lora_rank"] is None
    first = attention["steps"][0]["tex"]
    assert "W_Q^{\\top}" in first and "W_{DQ}" not in first
    heads, nope, rope = config["num_attention_heads"], config["qk_nope_head_dim"], config["qk_rope_head_dim"]
    assert f"{heads}\\times({nope}+{rope})" in first


def test_a_step_whose_tex_holds_a_control_character_fails_the_check(kimi):
    import copy

    from atlas.check.claims import check_equation_text
    from atlas.errors import AtlasError

    check_equation_text("kimi_k2", kimi["equations"])  # the real steps pass
    equations = copy.deepcopy(kimi["equations"])
    component = next(iter(equations["components"]))
    equations["components"][component]["steps"][0]["tex"] = "y=x\text{ per token}"  # not raw: "\t" is a tab
    with pytest.raises(AtlasError) as e:
        check_equation_text("kimi_k2", equations)
    assert str(e.value) == (
        f"kimi_k2: equation step of {component}: its TeX holds the control character '\\t' at 3: "
        "'y=x\\text{ per token}' (an escape such as \\t in a string that is not raw?)"
    )


def test_the_proof_reuses_the_run_that_chose_a_chain_and_reruns_a_chain_changed_since(monkeypatch):
    """A choice runs each variant on the module's call; the proof of the kept chain takes that run (the
    result and the weights it read) instead of running it again, unless the chain changed since."""
    import torch

    from atlas.proof import core
    from atlas.proof.steps import Chain, Input, Step

    linear = torch.nn.Linear(3, 2, dtype=torch.float64)  # as the preview run's modules are (atlas.model.precision)
    x = torch.randn(4, 3, dtype=torch.float64)
    ctx = core.Context(family=None, full_config=None, tiny_config=None, calls={"": core.Call((x,), {}, linear(x))},
                       captured=None, resolution=None)
    part = core.Part("linear", "", linear, linear, ctx)
    runs = []
    reproduce = core.reproduce
    monkeypatch.setattr(core, "reproduce", lambda *a, **k: runs.append(a[1]) or reproduce(*a, **k))

    def affine():
        return Chain([Step("y=xW^{\\top}+b", "y", lambda e: e["x"] @ e.w("weight").T + e.w("bias"))],
                     [Input("x", "x", "input", "the input")], "y")

    def without_bias():
        return Chain([Step("y=xW^{\\top}", "y", lambda e: e["x"] @ e.w("weight").T)], [Input("x", "x", "input", "the input")], "y")

    chain = part.choose("form", {"without_bias": without_bias, "affine": affine})
    assert len(runs) == 2 and part.facts["form"]["value"] == "affine"
    result, reads = core.proven_run(part, chain)
    assert len(runs) == 2 and result["reproduced"] and reads == {"weight", "bias"}  # taken from the choice
    chain.steps.append(Step("z=2y", "z", lambda e: 2 * e["y"]))
    chain.output = "z"
    result, _ = core.proven_run(part, chain)
    assert len(runs) == 3 and not result["reproduced"]  # run again: the doubled output is not the module's
