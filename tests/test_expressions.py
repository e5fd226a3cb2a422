"""Steps printed from the expression that runs (atlas.proof.expr), and summaries that are the chain folded,
never cut (atlas.proof.summaries)."""

from __future__ import annotations

import pytest
import torch

from atlas.proof import expr as E
from atlas.proof import summaries
from atlas.proof.steps import Chain, Env, Input, Step, run_chain
from tests.conftest import released_config


def env_of(**values) -> Env:
    weights = {k: v for k, v in values.items() if k.startswith("w_")}
    return Env(lambda name: weights[name], {k: v for k, v in values.items() if not k.startswith("w_")})


# --- one source per step --------------------------------------------------------------------------


def test_a_step_built_from_an_expression_takes_no_tex_or_function_beside_it():
    decay = E.Let(E.Sym("A", "A"), -E.exp(E.Weight("w_log", r"A_{\log}")))
    with pytest.raises(ValueError):
        Step(r"A=+e^{A_{\log}}", expr=decay)
    with pytest.raises(ValueError):
        Step(expr=decay, fn=lambda e: torch.exp(e.w("w_log")))
    step = Step(expr=decay)
    assert step.tex == r"A=-e^{A_{\log}}" and step.out == "A" and step.expression_built


def test_flipping_an_operator_changes_the_tex_and_the_arithmetic_together():
    a_log = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    right = Step(expr=E.Let(E.Sym("A", "A"), -E.exp(E.Weight("w_log", r"A_{\log}"))))
    flipped = Step(expr=E.Let(E.Sym("A", "A"), E.exp(E.Weight("w_log", r"A_{\log}"))))
    assert right.tex != flipped.tex and right.tex.replace("-", "") == flipped.tex
    expected = -torch.exp(a_log)  # Mamba-2's decay, written out here by hand
    assert torch.equal(right.fn(env_of(w_log=a_log)), expected)
    assert not torch.allclose(flipped.fn(env_of(w_log=a_log)), expected)


def test_an_operator_flipped_at_its_one_definition_fails_the_proof(monkeypatch):
    """Neg is defined once, TeX and arithmetic: dropping its sign changes every step that uses it, in print
    and in the run, so the preview run no longer reproduces the module (Mamba-2's A = -e^{A_log})."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect

    monkeypatch.setattr(E.Neg, "tex", lambda self, index=None: self.a.tex(index))
    monkeypatch.setattr(E.Neg, "run", lambda self, env: self.a.run(env))
    with pytest.raises(AtlasError, match="does not reproduce"):
        collect("nemotron_h")


def test_named_functions_compute_what_torch_computes():
    g = torch.linspace(-6, 6, 49, dtype=torch.float64)
    x = E.Sym("g", "g")
    references = {
        E.silu: torch.nn.functional.silu(g),
        E.gelu: torch.nn.functional.gelu(g),
        E.gelu_tanh: torch.nn.functional.gelu(g, approximate="tanh"),
        E.relu: torch.relu(g),
        E.relu2: torch.relu(g) ** 2,
        E.sqrtsoftplus: torch.nn.functional.softplus(g).sqrt(),
    }
    for function, reference in references.items():
        assert torch.allclose(function(x).run(env_of(g=g)), reference, rtol=1e-12, atol=1e-12), function.name


def test_sizes_print_the_checkpoint_and_compute_the_tiny_run():
    x = torch.ones(2, 4, dtype=torch.float64)
    mean = E.Let(E.Sym("rho", r"\rho", False), E.Mean(E.Sym("x", "x") ** 2, 4096) + E.Size(1e-6, 0.5))
    assert mean.tex() == r"\rho=\tfrac{1}{4{,}096}\textstyle\sum_{j}x_{j}^{2}+10^{-6}"
    assert torch.equal(mean.run(env_of(x=x)), torch.full((2, 1), 1.5, dtype=torch.float64))


# --- the chains converted -------------------------------------------------------------------------

# the kinds of component whose every step is printed from its expression (measurable progress: widen it)
CONVERTED_KINDS = {"norm", "weightless_norm", "linear", "activation", "dense_mlp", "embedding", "dropout"}


@pytest.mark.parametrize("name", ["llama", "gpt2", "gemma2", "deepseek_v4", "nemotron_h", "qwen3_next"])
def test_every_step_of_the_converted_kinds_is_expression_built(collected, name):
    eq = collected(name).facts["equations"]
    converted = [pid for pid, c in eq["components"].items() if all(s["expression"] for s in c["steps"])]
    for pid, c in eq["components"].items():
        if eq["kinds"].get(pid) in CONVERTED_KINDS:
            assert pid in converted, (pid, [s["tex"] for s in c["steps"] if not s["expression"]])
    steps = [s for c in eq["components"].values() for s in c["steps"]]
    # the count the report names: steps printed from what ran, of all steps
    print(f"{name}: {sum(s['expression'] for s in steps)} of {len(steps)} steps, {len(converted)} of {len(eq['components'])} chains")
    assert converted


# the families whose every block step is printed from its expression (DeepSeek-V4's blocks mix several
# residual streams and Gemma 4's run a router beside their MLP: those steps are still written beside their code)
WHOLE_BLOCKS = ["llama", "gpt2", "gemma2", "bloom", "opt", "falcon_h1", "minimax", "longcat_flash", "granite", "nemotron_h", "qwen3_next"]


@pytest.mark.parametrize("name", WHOLE_BLOCKS)
def test_blocks_and_the_whole_model_are_printed_from_what_ran(collected, name):
    eq = collected(name).facts["equations"]
    blocks = [pid for pid, kind in eq["kinds"].items() if kind == "block" and pid in eq["components"]]
    assert blocks
    for pid in blocks + ["blocks", "model"]:
        raw = [s["tex"] for s in eq["components"][pid]["steps"] if not s["expression"]]
        assert raw == [], (pid, raw)


def test_the_stream_entering_block_0_is_named_by_what_computed_it(collected):
    """Llama's blocks read the token embeddings themselves; GPT-2's read them plus the position table's rows."""
    llama = [s["tex"] for s in collected("llama").facts["equations"]["components"]["model"]["steps"]]
    assert r"x_L=\operatorname{Block}_{L-1}\circ\dots\circ\operatorname{Block}_0(e),\quad L=32" in llama
    gpt2 = [s["tex"] for s in collected("gpt2").facts["equations"]["components"]["model"]["steps"]]
    assert "x_0=e+p" in gpt2 and r"x_L=\operatorname{Block}_{L-1}\circ\dots\circ\operatorname{Block}_0(x_0),\quad L=12" in gpt2
    # the head is printed as the linear map its own chain proved (GPT-2's head has no bias)
    assert r"z=\hat x\,W_{\mathrm{out}}^{\top}" in gpt2
    # CodeGen's head has a bias, which the page once left out of the typed step
    codegen = [s["tex"] for s in collected("codegen").facts["equations"]["components"]["model"]["steps"]]
    assert r"z=\hat x\,W_{\mathrm{out}}^{\top}+b_{\mathrm{out}}" in codegen


def test_a_factor_printed_in_a_block_is_a_factor_run(monkeypatch):
    """The residual add is one expression: a factor put into it is printed and multiplied, so a factor the
    module does not apply fails the proof at that add, named as printed."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import stack

    monkeypatch.setattr(stack, "_scaled", lambda delta, *args, **kwargs: E.Size(2.0, 2.0) * delta)
    with pytest.raises(AtlasError, match=r"step `x'=x\+2\\,\\Delta_\{\\mathrm\{attn\}\}` does not reproduce"):
        collect("llama")


@pytest.mark.parametrize("name", ["kimi_k2", "qwen3_moe", "mixtral", "gemma4_moe", "gpt_oss", "ernie4_5_moe", "qwen2_moe"])
def test_routers_and_mixtures_are_printed_from_what_ran(collected, name):
    """Every router rule but the frozen table (DeepSeek-V4), SparseMixer (Phi-3.5-MoE) and dense scores
    (Llama 4) is expressions; a mixture's only typed step is the router call that returns three values."""
    eq = collected(name).facts["equations"]
    routers = [pid for pid, kind in eq["kinds"].items() if kind == "router" and pid in eq["components"]]
    mixtures = [pid for pid, kind in eq["kinds"].items() if kind == "mixture" and pid in eq["components"]]
    assert routers
    for pid in routers:
        assert [s["tex"] for s in eq["components"][pid]["steps"] if not s["expression"]] == [], pid
    for pid in mixtures:
        raw = [s["tex"] for s in eq["components"][pid]["steps"] if not s["expression"]]
        assert all(t.startswith(("(z,", "b\\ ")) for t in raw), (pid, raw)


@pytest.mark.parametrize("name", ["kimi_k2", "gpt_oss", "olmoe", "deepseek_v4", "gemma4_moe"])
def test_routed_experts_are_printed_from_what_ran(collected, name):
    eq = collected(name).facts["equations"]
    experts = [pid for pid, kind in eq["kinds"].items() if kind == "experts" and pid in eq["components"]]
    assert experts
    for pid in experts:
        assert [s["tex"] for s in eq["components"][pid]["steps"] if not s["expression"]] == [], pid


def test_gpt_oss_experts_bracket_the_gated_product_before_the_down_map(collected):
    """gpt-oss's expert: (u + 1) ⊙ a is formed first and then mapped down, so the page brackets it."""
    steps = [s["tex"] for s in collected("gpt_oss").facts["equations"]["components"]["sliding_window_block.mlp.experts"]["steps"]]
    assert r"E_i(x)=((u+1)\odot a)\,W_{d,i}+b_{d,i}\quad 2{,}880\to2{,}880" in steps
    assert r"g=[g;\,u]_{:,\,\text{even}}" in steps and r"u=[g;\,u]_{:,\,\text{odd}}" in steps


@pytest.mark.parametrize("name", ["llama", "bitnet", "qwen3_next", "gpt2"])
def test_attention_outputs_are_printed_from_what_ran(collected, name):
    """From the scores on, an attention's steps are expressions: the mask, the softmax, each head's mix
    of values, the heads joined, a sub-norm or output gate, and the output map."""
    eq = collected(name).facts["equations"]
    attentions = [pid for pid, kind in eq["kinds"].items() if kind == "attention" and pid in eq["components"]]
    assert attentions
    for pid in attentions:
        steps = eq["components"][pid]["steps"]
        tail = steps[next(i for i, s in enumerate(steps) if s["tex"].startswith("P") or r"\operatorname{softmax}" in s["tex"]):]
        assert all(s["expression"] for s in tail), (pid, [s["tex"] for s in tail if not s["expression"]])
        assert any(s["tex"].startswith(r"\Delta=o\,W_O") for s in tail)  # GPT-2's dropout follows it


def test_the_rotation_of_queries_and_keys_is_one_expression_with_its_variant(collected):
    """Llama's queries and keys turned by one function (the variant that reproduced), printed once and
    "likewise" for the keys; Phi-2's output map keeps the bias its module holds, which the typed step left out."""
    steps = collected("llama").facts["equations"]["components"]["transformer_block.self_attn"]["steps"]
    turned = [s for s in steps if r"\operatorname{rot}" in s["tex"]]
    assert len(turned) == 1 and turned[0]["expression"] and r"\text{likewise }" in turned[0]["tex"]
    assert turned[0]["tex"].endswith(r"\operatorname{rot}([a;b])=[-b;a]")
    phi2 = [s["tex"] for s in collected("phi2").facts["equations"]["components"]["transformer_block.self_attn"]["steps"]]
    assert r"\Delta=o\,W_O^{\top}+b_O\quad 2{,}560\to2{,}560" in phi2


def test_shared_key_value_heads_and_head_norms_are_expressions(collected):
    """Llama's 4 query heads per key-value head are the heads repeated in place (head ⌈h/4⌉), printed from
    the same function that repeats them; Qwen3's per-head q/k norms run each norm child and link the first;
    gpt-oss's output map keeps its bias."""
    llama = collected("llama").facts["equations"]["components"]["transformer_block.self_attn"]["steps"]
    split = next(s for s in llama if s["tex"].endswith(r":\ h=1..32,\ g=1..8"))
    # head h of the queries is columns (h-1)·128+1 .. h·128 of Q: the columns the split runs on
    assert split["expression"] and r"\htmlClass{st-q}{Q}_{:,\,(h-1)\cdot 128+1\,..\,h\cdot 128}" in split["tex"]
    repeat = next(s for s in llama if "share each key" in s["tex"])
    assert repeat["expression"] and r"K_{\lceil h/4\rceil}" in repeat["tex"] and r"V_{\lceil h/4\rceil}" in repeat["tex"]
    qwen3 = collected("qwen3").facts["equations"]["components"]["transformer_block.self_attn"]
    norms = next(s for s in qwen3["steps"] if r"\operatorname{Norm}_q" in s["tex"])
    assert norms["expression"] and r"\operatorname{Norm}_k" in norms["tex"] and norms["sub"] == "transformer_block.self_attn.q_norm"
    assert "q_norm" in qwen3["runs"]
    gpt_oss = [s["tex"] for s in collected("gpt_oss").facts["equations"]["components"]["global_block.self_attn"]["steps"]]
    assert r"\Delta=o\,W_O^{\top}+b_O\quad 4{,}096\to2{,}880" in gpt_oss


@pytest.mark.parametrize("name", ["gpt2", "opt", "pythia", "starcoder2", "bloom", "xglm"])
def test_an_output_map_with_a_bias_shows_it(collected, name):
    """Each of these attentions' output projections is built with a bias (GPT-2's c_proj, OPT's and XGLM's
    out_proj, Pythia's and BLOOM's dense, StarCoder2's o_proj with use_bias): the typed step left it out."""
    eq = collected(name).facts["equations"]
    attention = next(pid for pid, kind in eq["kinds"].items() if kind == "attention" and pid in eq["components"])
    output_map = next(s["tex"] for s in eq["components"][attention]["steps"] if s["tex"].startswith(r"\Delta=o\,W_O"))
    assert r"+b_O\quad" in output_map, output_map


def test_kimi_k2_latent_projections_and_rotary_parts_are_expressions(collected):
    """K2's query up-projection, joint key-value down-projection, key-value up-projection and the turn of
    the rotary parts are printed from what ran; the summary folds the query latent's norm into its use."""
    steps = collected("kimi_k2").facts["equations"]["components"]["MoE_block.self_attn"]["steps"]
    by_map = {w: next(s for s in steps if w in s["tex"]) for w in ("W_{UQ}", "W_{DKV}", "W_{UKV}")}
    assert all(s["expression"] for s in by_map.values())
    assert by_map["W_{UQ}"]["summary_tex"].startswith(r"[\htmlClass{st-q}{q^{C}_h};\,\htmlClass{st-q}{q^{R}_h}]=\operatorname{RMSNorm}(x\,W_{DQ}^{\top})")
    turned = next(s for s in steps if r"\operatorname{RoPE}" in s["tex"])
    assert turned["expression"] and turned["tex"].count(r"\operatorname{RoPE}") == 2


def test_a_fused_projection_and_its_split_are_expressions(collected):
    """DBRX's fused projection, its clip of every entry and its three column blocks are printed from what
    ran: the queries are columns 1..6,144 and the keys and values the next 1,024 each."""
    steps = collected("dbrx").facts["equations"]["components"]["transformer_block.norm_attn_norm.attn"]["steps"]
    split = next(s for s in steps if "1..6{,}144" in s["tex"])
    assert split["expression"] and "6{,}145..7{,}168" in split["tex"] and "7{,}169..8{,}192" in split["tex"]
    clip = next(s for s in steps if r"\operatorname{clamp}" in s["tex"])
    assert clip["expression"] and ",-8,8)" in clip["tex"]


def test_each_rotation_prints_its_own_definition_of_rot(collected):
    """The definition of rot a page prints is held by the function that turned: nanochat's halves turned
    by minus the angles print [b; -a], Llama's [-b; a]."""
    from atlas.proof import positions

    turns = [positions.rotate_half, positions.rotate_half_angles, positions.rotate_half_reversed, positions.rotate_interleaved,
             positions.rotate_interleaved_sin_first, positions.rotate_pairs_in_place, positions.rotate_pairs_complex]
    assert all(t.rot_tex.startswith(r"\operatorname{rot}") for t in turns)
    nanochat = collected("nanochat").facts["equations"]["components"]["transformer_block.self_attn"]["steps"]
    assert any(s["expression"] and r"=[b;-a]" in s["tex"] for s in nanochat)
    llama = collected("llama").facts["equations"]["components"]["transformer_block.self_attn"]["steps"]
    assert any(s["expression"] and s["tex"].endswith(positions.rotate_half.rot_tex) for s in llama)


def test_kimi_k2_router_reads_as_its_rule(collected):
    """Sigmoid scores, chosen by score plus the selection bias, weighted by the scores alone, renormalised
    and scaled by routed_scaling_factor 2.827 (DeepSeek-V3's rule, which K2 keeps)."""
    steps = [s["tex"] for s in collected("kimi_k2").facts["equations"]["components"]["MoE_block.mlp.gate"]["steps"]]
    assert steps == [r"z=xW_r^{\top},\quad W_r\in\mathbb{R}^{384\times7{,}168}", r"s=\sigma(z)",
                     r"c=s+b,\quad b\in\mathbb{R}^{384}\quad\text{(to choose by)}", r"\mathcal{E}=\operatorname{top}_{8}(c)",
                     r"G=s_{\mathcal{E}}", r"G\leftarrow G/\textstyle\sum_{j}G_{j}", r"G\leftarrow2.827\,G"]


def test_a_folded_product_is_bracketed_where_a_linear_map_follows_it(collected):
    """Gemma 4's router scales its normed tokens before its projection: folded into the projection, the
    product is bracketed, never read as g / √d W."""
    steps = collected("gemma4_moe").facts["equations"]["components"]["sliding_window_block.router"]["steps"]
    x = E.Sym("xh", r"\hat x")
    product = E.Let(E.Sym("z", "z"), E.Child(lambda env: None, (x,), lambda a: rf"{a}\,W^{{\top}}", bracket=E.POWER))
    assert product.tex({"xh": (x * E.Sym("g", "g"), {})}) == r"z=(\hat x\odot g)\,W^{\top}"
    assert all(s["expression"] for s in steps) and r"z=\hat x\,W_r^{\top}\quad 2{,}816\to128" in [s["tex"] for s in steps]


def test_rotary_cos_and_sin_swapped_fail_at_the_step_that_prints_them(monkeypatch):
    """The model's cos and sin are one expression over the angles, compared with what the model's own
    rotary module returned: computing them the wrong way round stops the build at that step."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import rope

    right = rope.cos_sin
    monkeypatch.setattr(rope, "cos_sin", lambda angles, amplitude, layout: tuple(reversed(right(angles, amplitude, layout))))
    with pytest.raises(AtlasError, match=r"component model: step `R_t=\(\\,\\cos \[\\theta_t;"):
        collect("llama")


def test_deepseek_v4_names_each_norm_and_rotation_once(collected):
    eq = collected("deepseek_v4").facts["equations"]
    attentions = [pid for pid, kind in eq["kinds"].items() if kind == "shared_kv_attention"]
    assert attentions
    for pid in attentions + [p for p, kind in eq["kinds"].items() if kind in ("window_compressor", "compressed_indexer")]:
        steps = eq["components"][pid]["steps"]
        for step in steps:
            # a step names a norm exactly where it runs a norm child (the double norm had the projection's step name one)
            names_norm = "Norm" in step["tex"]
            runs_norm = eq["kinds"].get(step["sub"]) in ("norm", "weightless_norm")
            assert names_norm == runs_norm, (pid, step["tex"])
        # the indexer's query turned once: its projection's step names no rotation
        turned = [s["tex"] for s in steps if "rot" in s["tex"] and s["tex"].startswith("q^{I}")]
        assert len(turned) <= 1, (pid, turned)
    summary = "".join(s["summary_tex"] or s["tex"] for s in eq["components"][attentions[0]]["steps"] if s["summary"])
    assert summary.count(r"\operatorname{RMSNorm}(x") == 2  # the query latent's and the key's, each once


# --- summaries folded, not cut --------------------------------------------------------------------


def gated_shared_chain(marked_gate: bool) -> Chain:
    """A hand-made mixture's tail: the shared expert's output gated, then added; the gate step is left
    out of the summary unless ``marked_gate``."""
    X = Input("x", "x", "hidden_states", "the input")
    return Chain([
        Step(r"y^{\mathrm{shared}}=2x", "ys", lambda e: 2 * e["x"], summary=True),
        Step(r"y^{\mathrm{shared}}\leftarrow s\,y^{\mathrm{shared}}", "ys", lambda e: 0.5 * e["ys"], summary=marked_gate),
        Step(r"\Delta=x+y^{\mathrm{shared}}", "y", lambda e: e["x"] + e["ys"], summary=True),
    ], [X], "y")


def test_a_summary_that_drops_a_step_it_reads_is_refused():
    chain = gated_shared_chain(marked_gate=False)
    run_chain(chain, env_of(x=torch.ones(2)))  # the run records what each step reads
    cut = summaries.dropped(chain)
    assert len(cut) == 1 and "ys" in cut[0] and r"s\,y^{\mathrm{shared}}" in cut[0]
    chain = gated_shared_chain(marked_gate=True)
    run_chain(chain, env_of(x=torch.ones(2)))
    assert summaries.dropped(chain) == []


def test_closing_a_summary_brings_in_what_it_reads_and_folds_expression_steps():
    chain = gated_shared_chain(marked_gate=False)
    run_chain(chain, env_of(x=torch.ones(2)))
    assert summaries.close(chain) == 1 and chain.steps[1].summary and summaries.dropped(chain) == []
    x, ys, s = E.Sym("x", "x"), E.Sym("ys", r"y^{\mathrm{shared}}"), E.Sym("s", "s")
    folded = Chain([
        Step(expr=E.Let(s, E.sigmoid(x)), summary=True),
        Step(expr=E.Let(ys, E.Size(2, 2) * x), summary=True),
        Step(expr=E.Let(ys, s * ys)),
        Step(expr=E.Let(E.Sym("y", r"\Delta"), x + ys), summary=True),
    ], [Input("x", "x", "hidden_states", "the input")], "y")
    run_chain(folded, env_of(x=torch.ones(2)))
    assert summaries.dropped(folded) == [] and summaries.close(folded) == 0
    assert summaries.summary_tex(folded) == {3: r"\Delta=x+s\odot y^{\mathrm{shared}}"}


def test_qwen3_next_moe_summary_applies_the_shared_gate(collected):
    eq = collected("qwen3_next").facts["equations"]
    mixtures = [pid for pid, kind in eq["kinds"].items() if kind == "mixture"]
    assert mixtures
    for pid in mixtures:
        summary = [s["summary_tex"] or s["tex"] for s in eq["components"][pid]["steps"] if s["summary"]]
        assert any(t.startswith(r"s=\sigma") for t in summary), summary  # the gate is defined in the summary
        assert r"\Delta=y^{\mathrm{routed}}+s\odot y^{\mathrm{shared}}" in summary, summary  # and applied where it is read


def test_the_p_norm_prints_its_definition_and_runs_it():
    from atlas.proof.mixture import _p_norm

    g = torch.tensor([[0.6, -0.3, 0.1], [0.2, 0.2, 0.5]], dtype=torch.float64)
    weights = E.Sym("G", "G")
    for p in (1.0, 2.0, 3.0):
        step = Step(expr=E.Let(weights, weights / _p_norm(weights, E.Size(p, p, "p", stated=True))))
        # the p-norm written out here: (Σ_j |G_j|^p)^{1/p}, each row by itself
        by_hand = g / (g.abs() ** p).sum(-1, keepdim=True) ** (1 / p)
        assert torch.allclose(step.fn(env_of(G=g)), by_hand)
        assert step.tex == (r"G\leftarrow G/\|G\|_{p},\quad \|G\|_{p}=(\textstyle\sum_{j}|G_{j}|^{p})^{1/p},\ "
                            f"p={p:g}")


def test_a_sum_is_bracketed_under_a_power_and_not_after_a_division():
    g = E.Sym("G", "G")
    assert E.Let(g, g / E.Mean(g, total=True)).tex() == r"G\leftarrow G/\textstyle\sum_{j}G_{j}"
    assert E.Let(E.Sym("n", "n"), E.Mean(g, total=True) ** 2).tex() == r"n=(\textstyle\sum_{j}G_{j})^{2}"


def test_a_step_that_defines_several_names_prints_them_as_a_tuple():
    z, s = E.Sym("z", "z"), E.Sym("s", "s")
    split = E.Function("split", lambda a: (a, 2 * a), lambda a: rf"\operatorname{{split}}({a})")
    step = Step(expr=E.Let((z, s), split(E.Sym("x", "x"))))
    assert step.tex == r"(z,\,s)=\operatorname{split}(x)" and step.out == ("z", "s")
    x = torch.tensor([1.0, -2.0])
    first, second = step.fn(env_of(x=x))
    assert torch.equal(first, x) and torch.equal(second, 2 * x)


def test_dbrx_routes_by_its_printed_steps(collected):
    mixture = collected("dbrx").facts["equations"]["components"]["transformer_block.ffn"]
    steps = mixture["steps"]
    assert all(step["expression"] for step in steps), [s["tex"] for s in steps if not s["expression"]]
    texs = [step["tex"] for step in steps]
    ffn = released_config("dbrx")["ffn_config"]
    # the released file leaves p to the config class's default
    from transformers.models.dbrx.configuration_dbrx import DbrxFFNConfig
    p = float(ffn.get("moe_normalize_expert_weights", DbrxFFNConfig().moe_normalize_expert_weights))
    assert rf"\mathcal{{E}}=\operatorname{{top}}_{{{ffn['moe_top_k']}}}(s)" in texs
    assert any(t.startswith(r"G\leftarrow G/\|G\|_{p}") and t.endswith(f"p={p:g}") for t in texs), texs
    assert mixture["facts"]["routing"]["value"].startswith("softmax, top-k")


def test_a_sinusoid_table_is_printed_from_the_arithmetic_that_builds_it():
    """The frequencies and the rows of a fixed sinusoid table (XGLM's module, CTRL's own buffer) run from the
    expressions their TeX is printed from: at width 8, sines of t·10000^(-j/4) then cosines, j = 0..3."""
    import math

    from atlas.proof.positions import sinusoid_steps

    steps = sinusoid_steps(8, 8, "half", 0, ids="t", out="p")
    assert all(s.expr is not None for s in steps)
    env = env_of(t=torch.tensor([[0, 1, 5]]))
    for s in steps:
        env.values[s.out] = s.fn(env)
    by_hand = torch.tensor([[[f(t * 10000 ** (-j / 4)) for f in (math.sin, math.cos) for j in range(4)] for t in (0, 1, 5)]],
                           dtype=torch.float64)
    assert torch.allclose(env["p"], by_hand)
    assert steps[0].tex == r"\omega_j=10000^{-j/4},\quad j=0..3"
    assert steps[1].tex == r"p_t=\big[\sin(t\,\omega_j);\ \cos(t\,\omega_j)\big]\in\mathbb{R}^{8}"
    # fairseq's rule (10000^(-j/(h-1))), read two rows late: the shifted position is bracketed where it multiplies
    shifted = sinusoid_steps(8, 8, "half_minus_one", 2, ids="t", out="p")
    assert shifted[0].tex.startswith(r"\omega_j=10000^{-j/3}") and r"\sin((t+2)\,\omega_j)" in shifted[1].tex


def test_the_default_rope_frequencies_are_printed_from_what_runs(collected):
    """b^(-2j/d) at the checkpoint's base and width, run at the preview's: Qwen3's 1,000,000 over 128 dims,
    and by hand at a tiny size (base 10,000 over 8 dims: 1, 0.1, 0.01, 0.001)."""
    from atlas.proof.rope import Rope, default_frequencies

    tiny = default_frequencies(Rope("default", 10000.0, 4, 8), Rope("default", 10000.0, 4, 8))
    assert torch.allclose(tiny.run(None), torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))
    steps = collected("qwen3").facts["equations"]["components"]["model"]["steps"]
    rule = next(s for s in steps if s["tex"].startswith("f_j="))
    assert rule["expression"] and rule["tex"] == r"f_j=1{,}000{,}000^{-2\,j/128},\quad j=0..63"


def test_a_state_space_mixers_projections_are_printed_from_its_linear_maps(collected):
    """Mamba's in_proj and out_proj steps are its linear maps' own calls: from the width to the gate and
    input halves (2 × expand × width) and back, with a bias only where the map holds one (none here)."""
    c = released_config("mamba")
    width, inner = c["hidden_size"], c["expand"] * c["hidden_size"]

    def n(x):  # a size as the page prints it
        return f"{x:,}".replace(",", "{,}")

    steps = collected("mamba").facts["equations"]["components"]["state_space_block.mixer"]["steps"]
    tex = {s["tex"]: s["expression"] for s in steps}
    assert tex[rf"p=x\,W_{{\mathrm{{in}}}}^{{\top}}\quad {n(width)}\to{n(2 * inner)}"] is True
    assert tex[rf"\Delta_{{\mathrm{{ssm}}}}=\hat y\,W_{{\mathrm{{out}}}}^{{\top}}\quad {n(inner)}\to{n(width)}"] is True


# --- the scaled rotary rules ------------------------------------------------------------------------


def _rule_values(rope, length: int = 4):
    """A rope's frequencies and amplitude run from the expressions its steps print, for a prompt of ``length``."""
    from atlas.proof.rope import amplitude_rule, frequency_rule

    rule, _ = frequency_rule(rope, rope, "p")
    amplitude, _ = amplitude_rule(rope, rope)
    env = env_of(p=torch.arange(length)[None])
    return rule.run(env), (None if amplitude is None else float(amplitude.run(env)))


def _model_rope_steps(collected, name):
    steps = collected(name).facts["equations"]["components"]["model"]["steps"]
    return [s for s in steps if s["tex"].startswith(("f_j=", "f^", "a="))]


@pytest.mark.parametrize("name", ["llama", "gpt_oss", "phi4_mini", "internlm3", "hunyuan", "gemma4", "olmo3"])
def test_every_scaled_rope_rule_is_printed_from_what_runs(collected, name):
    """llama3, YaRN (computed and given amplitudes), LongRoPE, dynamic NTK, Hunyuan's fixed alpha and Gemma 4's
    proportional rope: the frequencies and the amplitude are each one expression, its TeX printed from it."""
    steps = _model_rope_steps(collected, name)
    assert steps and all(s["expression"] for s in steps), [s["tex"] for s in steps if not s["expression"]]


def test_the_llama3_rule_keeps_short_wavelengths_and_divides_long_ones(collected):
    """Llama 3.1's rule by hand from its config: wavelengths 2π/g_j under 8,192/4 = 2,048 kept, over 8,192/1
    = 8,192 divided by 8, a blend between whose weight is (8,192/λ - 1)/(4 - 1)."""
    import math

    from atlas.proof.rope import Rope

    rope_config = released_config("llama")["rope_scaling"]
    s, low, high = rope_config["factor"], rope_config["low_freq_factor"], rope_config["high_freq_factor"]
    original = rope_config["original_max_position_embeddings"]
    assert (original / high, original / low) == (2048, 8192)
    f, a = _rule_values(Rope("llama3", 500000.0, 64, 128, rope_config))
    assert a is None
    for j in range(64):
        g = 500000.0 ** (-2 * j / 128)
        wavelength = 2 * math.pi / g
        if wavelength < 2048:
            expected = g
        elif wavelength > 8192:
            expected = g / 8
        else:
            mu = (8192 / wavelength - 1) / 3
            expected = (1 - mu) * g / 8 + mu * g
        assert float(f[j]) == pytest.approx(expected, rel=1e-12), j
    # all three cases occur at Llama's base: j = 0 kept, j = 63 divided, and some blended
    assert float(f[0]) == 1.0 and float(f[63]) == pytest.approx(500000.0 ** (-126 / 128) / 8, rel=1e-12)
    tex = next(s["tex"] for s in _model_rope_steps(collected, "llama") if s["tex"].startswith("f_j="))
    assert r"g_j & \lambda_j<8{,}192/4" in tex and r"g_j/8 & \lambda_j>8{,}192/1" in tex
    assert r"\lambda_j=2\pi/g_j" in tex and r"\mu_j=(8{,}192/\lambda_j-1)/(4-1)" in tex


def test_yarn_ramps_between_its_beta_bounds_and_carries_its_amplitude(collected):
    """gpt-oss: factor 32, original length 4,096, betas 32 and 1, not truncated. The pairs turning more than 32
    times over 4,096 positions keep their frequency, those turning less than once are divided by 32; the
    amplitude is 0.1 ln 32 + 1 = 1.3466."""
    import math

    from atlas.proof.rope import Rope

    config = released_config("gpt_oss")
    rope_config = config["rope_scaling"]
    base, d = float(config["rope_theta"]), config["head_dim"]
    f, a = _rule_values(Rope("yarn", base, d // 2, d, rope_config, config["max_position_embeddings"]))
    assert a == pytest.approx(1.3466, abs=5e-5) and a == pytest.approx(0.1 * math.log(32) + 1, rel=1e-12)

    def pair_turning(times):  # the pair whose wavelength fits ``times`` times into the original length
        return d * math.log(4096 / (times * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_turning(32), pair_turning(1)  # about 8.09 and 17.40: not truncated, so not whole
    for j in range(d // 2):
        g = base ** (-2 * j / d)
        ramp = min(max((j - low) / (high - low), 0.0), 1.0)
        assert float(f[j]) == pytest.approx((1 - ramp) * g + ramp * g / 32, rel=1e-12), j
    shown = [s["tex"] for s in _model_rope_steps(collected, "gpt_oss")]
    assert r"a=0.1\,\log(32)+1=1.3466\quad\text{(YaRN's attention factor)}" in shown
    assert any(t.startswith(r"f_j=(1-\rho_j)\,g_j+\rho_j\,g_j/32,") and "(j-8.093)/(17.4-8.093)" in t for t in shown), shown


def test_the_other_scaled_rules_by_hand():
    """Each rule at a small size, against its definition written out here."""
    import math

    from atlas.proof.rope import Rope

    plain = [10.0 ** (-2 * j / 8) for j in range(4)]  # base 10 over 8 dims
    f, _ = _rule_values(Rope("linear", 10.0, 4, 8, {"factor": 4.0}))
    assert f.tolist() == pytest.approx([x / 4 for x in plain], rel=1e-12)
    # Hunyuan: the base times alpha^(d/(d-2)), whatever the length
    f, _ = _rule_values(Rope("ntk_alpha", 10.0, 4, 8, {"alpha": 1000.0}))
    assert f.tolist() == pytest.approx([(10.0 * 1000.0 ** (8 / 6)) ** (-2 * j / 8) for j in range(4)], rel=1e-12)
    # dynamic NTK: the base unchanged up to the original 16 positions; at 32, times (6·32/16 - 5)^(8/6) = 7^(4/3)
    dynamic = Rope("dynamic", 10.0, 4, 8, {"factor": 6.0}, max_positions=16)
    assert _rule_values(dynamic, 16)[0].tolist() == pytest.approx(plain, rel=1e-12)
    assert _rule_values(dynamic, 32)[0].tolist() == pytest.approx([(10.0 * 7 ** (4 / 3)) ** (-2 * j / 8) for j in range(4)], rel=1e-12)
    # LongRoPE: the short factors while the prompt fits the original 8 positions, the long ones past it;
    # the amplitude sqrt(1 + ln 4 / ln 8), the factor being 32 / 8
    factors = {"short_factor": [1.0, 2.0, 3.0, 4.0], "long_factor": [5.0, 6.0, 7.0, 8.0], "original_max_position_embeddings": 8}
    longrope = Rope("longrope", 10.0, 4, 8, factors, max_positions=32)
    f, a = _rule_values(longrope, 8)
    assert f.tolist() == pytest.approx([x / e for x, e in zip(plain, [1, 2, 3, 4])], rel=1e-12)
    assert a == pytest.approx(math.sqrt(1 + math.log(4) / math.log(8)), rel=1e-12)
    assert _rule_values(longrope, 9)[0].tolist() == pytest.approx([x / e for x, e in zip(plain, [5, 6, 7, 8])], rel=1e-12)
    # proportional (Gemma 4): a quarter of a 16-wide head rotated, 2 pairs over the whole head's 16, the rest still
    f, _ = _rule_values(Rope("proportional", 10.0, 8, 16, {"partial_rotary_factor": 0.25}))
    assert f.tolist() == pytest.approx([1.0, 10.0 ** (-2 / 16), 0, 0, 0, 0, 0, 0], rel=1e-12)
    # a YaRN amplitude given in the config is printed and run as given; DeepSeek's two mscales cancel
    assert _rule_values(Rope("yarn", 10.0, 4, 8, {**factors, "factor": 4.0, "attention_factor": 1.25}))[1] == 1.25
    deepseek = {"factor": 40.0, "mscale": 0.707, "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096}
    assert _rule_values(Rope("yarn", 10.0, 4, 8, deepseek))[1] == pytest.approx(1.0, rel=1e-12)


def test_a_changed_rope_rule_fails_the_proof_where_it_is_printed(monkeypatch):
    """The llama3 rule's comparisons swapped in the one definition of "<" (printed as before, run otherwise):
    the angles no longer match Llama's rotary module, and the failure names the rule's step."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import clauses

    monkeypatch.setitem(clauses._COMPARE, "<", lambda a, b: a > b)
    with pytest.raises(AtlasError) as error:
        collect("llama")
    assert "R_t=" in str(error.value) and r"f_j=\begin{cases}g_j & \lambda_j<8{,}192/4" in str(error.value)


def test_an_amplitude_printed_is_the_amplitude_run(monkeypatch):
    """log in base 10 instead of e, in its one definition: the amplitude step prints the value the changed
    rule gives (0.1 log10 32 + 1 = 1.1505, not 1.3466) and the proof fails there."""
    import math

    from atlas.errors import AtlasError
    from atlas.facts.collect import collect

    monkeypatch.setattr(E, "log", E.Function("log", lambda a: math.log10(a), lambda a: rf"\log({a})"))
    with pytest.raises(AtlasError) as error:
        collect("gpt_oss")
    assert f"a=0.1\\,\\log(32)+1={0.1 * math.log10(32) + 1:.4f}" in str(error.value)


def test_a_blocks_own_rotary_table_is_printed_from_what_runs(collected):
    """RecurrentGemma's attention computes its angles itself: half of each 256-wide head turns, so 64 pairs
    at base 10,000 (written out, not 1e+04), each angle twice side by side, then their cos and sin."""
    c = released_config("recurrent_gemma")
    rotated = int(c["head_dim"] * c["partial_rotary_factor"])
    assert (rotated, c["rope_theta"]) == (128, 10000.0)
    steps = collected("recurrent_gemma").facts["equations"]["components"]["attention_block.temporal_block.rotary_emb"]["steps"]
    assert all(s["expression"] for s in steps)
    base = f"{int(c['rope_theta']):,}".replace(",", "{,}")
    assert [s["tex"] for s in steps] == [
        rf"f_j={base}^{{-2\,j/{rotated}}},\quad j=0..{rotated // 2 - 1}",
        rf"\theta_{{t}}=[p_t\,f;\,p_t\,f]\in\mathbb{{R}}^{{{rotated}}}\quad\text{{(each angle twice, side by side)}}",
        r"c_t=\cos(\theta_{t}),\ s_t=\sin(\theta_{t})",
    ]


def test_deepseek_v4s_compressor_angles_use_the_yarn_rule_the_model_uses(collected):
    """DeepSeek-V4's compressors turn their 64 rotary dims at compress_rope_theta 160,000 by YaRN (factor 16 over
    65,536 positions): the ramp runs from pair ⌊64 ln(65,536/(32·2π)) / (2 ln 160,000)⌋ to
    ⌈64 ln(65,536/(2π)) / (2 ln 160,000)⌉, by hand; both steps printed from what runs."""
    import math

    c = released_config("deepseek_v4")
    rope, d, base = c["rope_scaling"], c["qk_rope_head_dim"], c["compress_rope_theta"]
    original = rope["original_max_position_embeddings"]
    low = math.floor(d * math.log(original / (rope["beta_fast"] * 2 * math.pi)) / (2 * math.log(base)))
    high = math.ceil(d * math.log(original / (rope["beta_slow"] * 2 * math.pi)) / (2 * math.log(base)))
    components = collected("deepseek_v4").facts["equations"]["components"]
    tables = [pid for pid in components if pid.endswith("compressor.rotary_emb")]
    assert tables
    for pid in tables:
        steps = components[pid]["steps"]
        assert all(s["expression"] for s in steps), pid
        rule = steps[0]["tex"]
        assert rule.startswith(rf"f_j=(1-\rho_j)\,g_j+\rho_j\,g_j/{rope['factor']},")
        written = f"{base:,}".replace(",", "{,}")
        assert f"(j-{low})/({high}-{low})" in rule and rf"g_j={written}^{{-2\,j/{d}}}" in rule


# --- splits into parts and heads, and a fused projection's layouts ---------------------------------


def _tex_num(n: int) -> str:
    return f"{n:,}".replace(",", "{,}")


def _range(index: str, width: int, first: int, last: int) -> str:
    """Columns first..last of group ``index`` of ``width`` columns, written out by hand: (i-1)·w+first .. (i-1)·w+last,
    the end i·w where last is the group's last column."""
    end = rf"{index}\cdot {_tex_num(width)}" if last == width else rf"({index}-1)\cdot {_tex_num(width)}+{_tex_num(last)}"
    return rf"({index}-1)\cdot {_tex_num(width)}+{_tex_num(first)}\,..\,{end}"


@pytest.mark.parametrize("name", ["kimi_k2", "glm4_moe_lite"])
def test_latent_attentions_splits_into_parts_and_heads_are_printed_from_what_runs(collected, name):
    """Each head's query is its q^C_h columns then its q^R_h columns, the joint latent its c^KV columns then the
    one rotary key k^R, each head's key-value up-projection its k^C_h columns then its values; Q_h and K_h join the
    parts again, k^R repeated for every head. Every column range derived here from the released config."""
    c = released_config(name)
    heads, nope, rope, dv, rank = (c[k] for k in ("num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank"))
    eq = collected(name).facts["equations"]
    attention = next(pid for pid, kind in eq["kinds"].items() if kind == "latent_attention" and pid in eq["components"])
    steps = eq["components"][attention]["steps"]
    assert all(s["expression"] for s in steps), [s["tex"] for s in steps if not s["expression"]]
    tex = [s["tex"] for s in steps]
    q, k_r = r"[\htmlClass{st-q}{q^{C}_h};\,\htmlClass{st-q}{q^{R}_h}]", r"\htmlClass{st-k}{k^{R}}"
    latent, kv = rf"[\htmlClass{{st-k}}{{c^{{KV}}}};\,{k_r}]", r"[\htmlClass{st-k}{k^{C}_h};\,\htmlClass{st-v}{v_h}]"
    assert (rf"\htmlClass{{st-q}}{{q^{{C}}_h}}={q}_{{:,\,{_range('h', nope + rope, 1, nope)}}},\ "
            rf"\htmlClass{{st-q}}{{q^{{R}}_h}}={q}_{{:,\,{_range('h', nope + rope, nope + 1, nope + rope)}}}:\ h=1..{heads}") in tex
    assert (rf"\htmlClass{{st-k}}{{c^{{KV}}}}={latent}_{{:,\,1..{_tex_num(rank)}}},\ "
            rf"{k_r}={latent}_{{:,\,{_tex_num(rank + 1)}..{_tex_num(rank + rope)}}}") in tex
    split = next(s for s in steps if s["tex"].startswith(r"\htmlClass{st-k}{k^{C}_h}="))
    assert split["tex"] == (rf"\htmlClass{{st-k}}{{k^{{C}}_h}}={kv}_{{:,\,{_range('h', nope + dv, 1, nope)}}},\ "
                            rf"\htmlClass{{st-v}}{{V_h}}={kv}_{{:,\,{_range('h', nope + dv, nope + 1, nope + dv)}}}:\ h=1..{heads}")
    assert split["values"] == [None, "attention_values"]
    joined = next(s for s in steps if s["values"] == ["attention_queries", "attention_keys"])
    assert joined["tex"] == (r"\htmlClass{st-q}{Q_h}=[\htmlClass{st-q}{q^{C}_h};\,\htmlClass{st-q}{q^{R}_h}],\ "
                             rf"\htmlClass{{st-k}}{{K_h}}=[\htmlClass{{st-k}}{{k^{{C}}_h}};\,{k_r}]\in\mathbb{{R}}^{{{nope + rope}}}"
                             r"\quad\text{one rotary key for every head}")


def test_a_part_of_each_head_counted_from_the_wrong_end_fails_at_the_split(monkeypatch):
    """The nope and rope parts swapped in the one definition of a head's part (printed as before, each part taken
    from the other end of its head): MiniCPM3's values, the first value the run compares, no longer match the
    module, and the failure names the key-value split."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import arrange as A

    right = A.head_part

    def from_the_other_end(index):
        f = right(index)
        return E.Function(f.name, lambda t, width, heads, first, last: f.arithmetic(t, width, heads, t.shape[-1] // int(heads) - int(last) + 1,
                                                                                   t.shape[-1] // int(heads) - int(first) + 1),
                          f.notation, bracket=f.bracket)

    monkeypatch.setattr(A, "head_part", from_the_other_end)
    with pytest.raises(AtlasError) as error:
        collect("minicpm3")
    assert r"step `\htmlClass{st-k}{k^{C}_h}=[\htmlClass{st-k}{k^{C}_h};\,\htmlClass{st-v}{v_h}]_{:,\,(h-1)\cdot 128+1" in str(error.value)


def test_the_rotary_part_joined_first_fails_where_q_and_k_are_joined(monkeypatch):
    """[b; a] run where [a; b] is printed: DeepSeek-V2's queries no longer match the module at the step that joins
    each head's parts (the one that claims the queries and keys)."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import arrange as A

    monkeypatch.setattr(A, "parts_joined", E.Function("parts joined", lambda a, b: torch.cat((b, a), dim=-1), A.parts_joined.notation))
    with pytest.raises(AtlasError) as error:
        collect("minicpm3")
    assert r"step `\htmlClass{st-q}{Q_h}=[\htmlClass{st-q}{q^{C}_h};\,\htmlClass{st-q}{q^{R}_h}],\ " in str(error.value)


def test_a_fused_projections_layouts_are_printed_from_what_runs(collected):
    """Pythia's fused projection holds each head's query, key and value side by side (3 × 128 columns a head);
    CodeGen's four model-parallel groups of 3 × 256 hold [Q; V; K] shares (mp_num = 4, transformers' constant);
    Qwen3-Next's gated query holds each head's query then its gate (2 × 256); MiniMax's lightning projection each
    head's query, key and value. Each split printed by the columns it takes, derived here from the config."""
    qkv = r"[\htmlClass{st-q}{Q};\htmlClass{st-k}{K};\htmlClass{st-v}{V}]"
    c = released_config("pythia")
    d, heads = c["hidden_size"] // c["num_attention_heads"], c["num_attention_heads"]
    pythia = collected("pythia").facts["equations"]["components"]["transformer_block.attention"]["steps"]
    split = next(s for s in pythia if s["tex"].startswith(rf"\htmlClass{{st-q}}{{Q}}=\big[{qkv}"))
    assert split["expression"] and split["tex"].startswith(
        rf"\htmlClass{{st-q}}{{Q}}=\big[{qkv}_{{:,\,{_range('h', 3 * d, 1, d)}}}\big]_{{h=1..{heads}}},\ "
        rf"\htmlClass{{st-k}}{{K}}=\big[{qkv}_{{:,\,{_range('h', 3 * d, d + 1, 2 * d)}}}\big]_{{h=1..{heads}}},\ "
        rf"\htmlClass{{st-v}}{{V}}=\big[{qkv}_{{:,\,{_range('h', 3 * d, 2 * d + 1, 3 * d)}}}\big]_{{h=1..{heads}}}")
    c = released_config("codegen")
    share = c["n_embd"] // 4
    codegen = collected("codegen").facts["equations"]["components"]["transformer_block.attn"]["steps"]
    split = next(s for s in codegen if s["tex"].startswith(rf"\htmlClass{{st-q}}{{Q}}=\big[{qkv}"))
    assert split["expression"] and split["tex"].startswith(
        rf"\htmlClass{{st-q}}{{Q}}=\big[{qkv}_{{:,\,{_range('i', 3 * share, 1, share)}}}\big]_{{i=1..4}},\ "
        rf"\htmlClass{{st-k}}{{K}}=\big[{qkv}_{{:,\,{_range('i', 3 * share, 2 * share + 1, 3 * share)}}}\big]_{{i=1..4}},\ "
        rf"\htmlClass{{st-v}}{{V}}=\big[{qkv}_{{:,\,{_range('i', 3 * share, share + 1, 2 * share)}}}\big]_{{i=1..4}}")
    c = released_config("qwen3_next")
    d, heads = c["head_dim"], c["num_attention_heads"]
    qwen = collected("qwen3_next").facts["equations"]["components"]["global_block.self_attn"]["steps"]
    gated = r"[\htmlClass{st-q}{Q};G]"
    split = next(s for s in qwen if s["tex"].startswith(rf"\htmlClass{{st-q}}{{Q}}=\big[{gated}"))
    assert split["expression"] and split["tex"].startswith(
        rf"\htmlClass{{st-q}}{{Q}}=\big[{gated}_{{:,\,{_range('h', 2 * d, 1, d)}}}\big]_{{h=1..{heads}}},\ "
        rf"G=\big[{gated}_{{:,\,{_range('h', 2 * d, d + 1, 2 * d)}}}\big]_{{h=1..{heads}}}")
    c = released_config("minimax")
    d, heads = c["head_dim"], c["num_attention_heads"]
    minimax = collected("minimax").facts["equations"]["components"]["linear_attention_block.self_attn"]["steps"]
    assert (rf"\htmlClass{{st-q}}{{Q_h}}=a_{{:,\,{_range('h', 3 * d, 1, d)}}},\ \htmlClass{{st-k}}{{K_h}}=a_{{:,\,{_range('h', 3 * d, d + 1, 2 * d)}}},\ "
            rf"\htmlClass{{st-v}}{{V_h}}=a_{{:,\,{_range('h', 3 * d, 2 * d + 1, 3 * d)}}}:\ h=1..{heads}") in [s["tex"] for s in minimax if s["expression"]]


@pytest.mark.parametrize("name, step", [("pythia", r"`\htmlClass{st-q}{Q}=\big[[\htmlClass{st-q}{Q};\htmlClass{st-k}{K};\htmlClass{st-v}{V}]_{:,\,(h-1)\cdot 384+1"),
                                        ("codegen", r"`\htmlClass{st-q}{Q}=\big[[\htmlClass{st-q}{Q};\htmlClass{st-k}{K};\htmlClass{st-v}{V}]_{:,\,(i-1)\cdot 768+1"),
                                        # the values agree at the heads' split (they have no gate), so the divergence is first
                                        # seen where the queries are next compared: their rotation
                                        ("qwen3_next", r"step `\htmlClass{st-q}{Q_{t,h}}\leftarrow\htmlClass{st-q}{Q_{t,h}}\odot\cos")])
def test_groups_taken_in_the_wrong_order_fail_where_the_layout_is_printed(monkeypatch, name, step):
    """The groups' shares joined last group first in the one definition of a group's columns (printed as before):
    the heads (Pythia, Qwen3-Next) or the model-parallel groups (CodeGen) come out in the wrong order and the proof
    names the split among the steps the divergence may lie in (no value of the run is compared right after it);
    Qwen3-Next's values, which carry no gate, still agree at the heads' split, so its failure is named where its
    queries are next compared. The layout itself is measured apart (attention._fused_layout), so the wrong order cannot be
    chosen as another layout."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import arrange as A

    right = A.group_columns

    def reversed_groups(index):
        f = right(index)
        return E.Function(f.name, lambda t, width, groups, first, last: f.arithmetic(t.unflatten(-1, (int(groups), -1)).flip(-2).flatten(-2),
                                                                                    width, groups, first, last),
                          f.notation, bracket=f.bracket)

    monkeypatch.setattr(A, "group_columns", reversed_groups)
    with pytest.raises(AtlasError) as error:
        collect(name)
    assert "does not reproduce" in str(error.value) and step in str(error.value)


def test_a_fused_gate_and_up_projection_is_split_by_the_columns_printed(collected):
    """Phi-3's gate_up_proj: the gate its first 8,192 columns, the up projection the next (the config's
    intermediate_size), printed from what runs; the fused projection keeps its own summary line."""
    inner = released_config("phi3")["intermediate_size"]
    steps = collected("phi3").facts["equations"]["components"]["transformer_block.mlp"]["steps"]
    split = next(s for s in steps if s["tex"].startswith("g=[g;"))
    assert split["expression"] and split["tex"] == (rf"g=[g;\,u]_{{:,\,1..{_tex_num(inner)}}},\ "
                                                    rf"u=[g;\,u]_{{:,\,{_tex_num(inner + 1)}..{_tex_num(2 * inner)}}}")
    assert next(s for s in steps if s["tex"].startswith(r"[g;\,u]="))["summary"]


# --- the state-space scans -------------------------------------------------------------------------


@pytest.mark.parametrize("name, mixer", [("mamba2", "state_space_block.mixer"), ("mamba", "state_space_block.mixer"),
                                         ("falcon_mamba", "state_space_block.mixer"), ("falcon_h1", "attention_and_state_space_block.mamba"),
                                         ("lfm2", "short_convolution_block.conv")])
def test_a_state_space_mixers_every_step_is_printed_from_what_runs(collected, name, mixer):
    """Mamba-2's and Mamba-1's splits, convolution, time steps, decay, recurrence and gate, Falcon-H1's input and
    part constants, LFM2's short convolution and Mamba-2's grouped gated norm: every step an expression."""
    eq = collected(name).facts["equations"]["components"]
    chains = [pid for pid in eq if pid == mixer or pid.startswith(mixer + ".norm")]
    for pid in chains:
        assert [s["tex"] for s in eq[pid]["steps"] if not s["expression"]] == [], pid


def test_mamba2s_splits_are_the_column_blocks_its_config_gives(collected):
    """in_proj's columns: z the first d_inner = heads × head_dim, u the next d_inner + 2 × groups × state (x, B, C
    before the convolution), δ one per head; the convolution's output split likewise into x, B and C."""
    c = released_config("mamba2")
    inner, bc = c["num_heads"] * c["head_dim"], c["n_groups"] * c["state_size"]
    assert inner == c["expand"] * c["hidden_size"]
    n = _tex_num
    steps = {s["tex"].split("=")[0]: s for s in collected("mamba2").facts["equations"]["components"]["state_space_block.mixer"]["steps"]}
    assert steps["z"]["tex"] == (rf"z=p_{{:,\,1..{n(inner)}}},\ u=p_{{:,\,{n(inner + 1)}..{n(2 * inner + 2 * bc)}}},\ "
                                 rf"\delta=p_{{:,\,{n(2 * inner + 2 * bc + 1)}..{n(2 * inner + 2 * bc + c['num_heads'])}}}")
    assert steps["x"]["tex"].startswith(rf"x=c_{{:,\,1..{n(inner)}}},\ B=c_{{:,\,{n(inner + 1)}..{n(inner + bc)}}},\ "
                                        rf"C=c_{{:,\,{n(inner + bc + 1)}..{n(inner + 2 * bc)}}}")
    assert steps["c_t"]["tex"].startswith(rf"c_t=\operatorname{{SiLU}}(\textstyle\sum_{{k=0}}^{{{c['conv_kernel'] - 1}}} w_{{k}}\odot "
                                          rf"u_{{t-{c['conv_kernel'] - 1}+k}}+b),\quad u_{{<0}}=0")
    scan = steps[r"y^{h}_t"]
    assert scan["expression"] and scan["values"] == ["ssm_scan_output"]
    assert scan["tex"] == (r"y^{h}_t=S^{h}_t\,C^{g(h)}_t+D^{h}x^{h}_t,\quad S^{h}_t=e^{\Delta^{h}_t A^{h}}S^{h}_{t-1}+\Delta^{h}_t\,x^{h}_t\,"
                           rf"(B^{{g(h)}}_t)^{{\top}},\quad S^{{h}}\in\mathbb{{R}}^{{{c['head_dim']}\times{c['state_size']}}},\ S^{{h}}_{{-1}}=0")


def test_the_scans_compute_the_recurrence_they_print():
    """Two positions by hand. Mamba-2, one head, P = N = 1: x = (1, 2), B = (1, 1), C = (2, 1), Δ = (0.5, 1),
    A = -1, D = 0.5: S_0 = 0.5·1·1 = 0.5, y_0 = 0.5·2 + 0.5·1 = 1.5; S_1 = e^{-1}·0.5 + 1·2·1, y_1 = S_1·1 + 0.5·2
    = 3 + 0.5/e. Mamba-1, one channel, N = 2: the same x, Δ, A = (-1, -2), B_t = (1, 0) then (0, 1), C_t = (1, 1),
    D = 0: S_0 = (0.5, 0), y_0 = 0.5; S_1 = (0.5 e^{-1}, 2), y_1 = 0.5/e + 2."""
    import math

    from atlas.proof import ssm

    t = lambda *v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    x, dt = t(1.0, 2.0).reshape(1, 2, 1), t(0.5, 1.0).reshape(1, 2, 1)
    names = {n: E.Sym(n, n) for n in ("x", "B", "C", "dt", "A")}
    heads = ssm.scan(*names.values(), E.Weight("w_D", "D"), *(E.Size(1, 1) for _ in range(4)))
    y = heads.run(env_of(x=x, B=t(1.0, 1.0).reshape(1, 2, 1), C=t(2.0, 1.0).reshape(1, 2, 1), dt=dt, A=t(-1.0), w_D=t(0.5)))
    assert torch.allclose(y.flatten(), t(1.5, 3 + 0.5 / math.e), rtol=1e-12)
    channels = ssm.scan_channels(*names.values(), E.Weight("w_D", "D"), E.Size(2, 2), E.Size(1, 1))
    y = channels.run(env_of(x=x, B=t(1.0, 0.0, 0.0, 1.0).reshape(1, 2, 2), C=t(1.0, 1.0, 1.0, 1.0).reshape(1, 2, 2), dt=dt,
                            A=t(-1.0, -2.0).reshape(1, 2), w_D=t(0.0)))
    assert torch.allclose(y.flatten(), t(0.5, 0.5 / math.e + 2), rtol=1e-12)


def _mutated(function, arithmetic):
    return E.Function(function.name, arithmetic, function.notation)


def test_a_scan_without_its_skip_fails_where_the_recurrence_is_printed(monkeypatch):
    """Mamba-2's scan run without D x_t (printed as before): the proof fails at the recurrence, named as printed."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import ssm

    right = ssm.scan.arithmetic
    monkeypatch.setattr(ssm, "scan", _mutated(ssm.scan, lambda x, B, C, dt, A, D, *sizes: right(x, B, C, dt, A, D * 0, *sizes)))
    with pytest.raises(AtlasError) as error:
        collect("mamba2")
    assert "does not reproduce" in str(error.value) and r"step `y^{h}_t=S^{h}_t\,C^{g(h)}_t+D^{h}x^{h}_t" in str(error.value)


def test_a_scan_decayed_by_exp_a_alone_fails_where_the_recurrence_is_printed(monkeypatch):
    """Mamba-1's scan decayed by e^{A} in place of e^{Δ A} (Δ kept in the input term): the proof fails, naming the
    recurrence among the steps the divergence may lie in (the run records no value of Mamba-1's scan itself, so the
    first value compared after it is the output projection's)."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import ssm

    def exp_a(x, B, C, dt, A, D, *sizes):
        S, ys = x.new_zeros(x.shape[0], x.shape[2], A.shape[1]), []
        for t in range(x.shape[1]):
            S = torch.exp(A) * S + (dt[:, t] * x[:, t])[:, :, None] * B[:, t, None, :]
            ys.append((S * C[:, t, None, :]).sum(-1) + D * x[:, t])
        return torch.stack(ys, dim=1)

    monkeypatch.setattr(ssm, "scan_channels", _mutated(ssm.scan_channels, exp_a))
    with pytest.raises(AtlasError) as error:
        collect("mamba")
    said = str(error.value)
    assert "does not reproduce" in said and r"step `\Delta_{\mathrm{ssm}}=\hat y\,W_{\mathrm{out}}^{\top}" in said
    candidates = said.partition("the first divergence is this step or one of: ")[2]
    assert r"`y^{j}_t=S^{j}_t\cdot C_t+D^{j}c^{j}_t" in candidates
