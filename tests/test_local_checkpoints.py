"""Real checkpoints written from tiny real models (bf16, FP8 with block scales, sharded with an index),
read back by the strict reader and checked tensor by tensor by `build.py --weights`."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from atlas.build import publish
from atlas.inputs.safetensors_headers import read_checkpoint
from tests.conftest import ROOT, run_build

TINY = dict(
    vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
    num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
    n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16,
    qk_rope_head_dim=8, v_head_dim=16, routed_scaling_factor=2.827,
    num_nextn_predict_layers=0,  # as Kimi K2: the files hold no multi-token-prediction block
)
BLOCK = 16  # FP8 scale block edge for the tiny checkpoint


def tiny_model():
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    torch.manual_seed(0)
    model = DeepseekV3ForCausalLM(DeepseekV3Config(**TINY))
    # As the released files: parameters in bf16, the router's selection bias kept in float32.
    for p in model.parameters():
        p.data = p.data.to(torch.bfloat16)
    return model


def module_elements(model) -> int:
    return sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers() if b.dtype == torch.float32 and b.dim() == 1 and b.numel() == TINY["n_routed_experts"])


@pytest.fixture(scope="module")
def bf16_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bf16")
    model = tiny_model()
    model.save_pretrained(directory)
    return directory, model


@pytest.fixture(scope="module")
def sharded_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("sharded")
    model = tiny_model()
    model.save_pretrained(directory, max_shard_size="100KB")
    return directory, model


def quantize_fp8(source: Path, target: Path) -> None:
    """Rewrite a bf16 checkpoint as the FP8 releases store theirs: every projection weight in
    float8_e4m3 with a float32 `_scale_inv` per BLOCK × BLOCK tile; everything else unchanged."""
    target.mkdir()
    tensors = {}
    for name, tensor in load_file(str(source / "model.safetensors")).items():
        if name.endswith("_proj.weight") or name.endswith("_proj_with_mqa.weight"):
            rows, cols = tensor.shape
            tensors[name] = tensor.float().to(torch.float8_e4m3fn)
            tensors[name + "_scale_inv"] = torch.ones(math.ceil(rows / BLOCK), math.ceil(cols / BLOCK))
        else:
            tensors[name] = tensor
    save_file(tensors, str(target / "model.safetensors"))
    config = json.loads((source / "config.json").read_text())
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [BLOCK, BLOCK]}
    (target / "config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def fp8_dir(bf16_dir, tmp_path_factory):
    directory = tmp_path_factory.mktemp("fp8") / "ck"
    quantize_fp8(bf16_dir[0], directory)
    return directory


def test_reader_counts_equal_the_modules_bf16(bf16_dir):
    directory, model = bf16_dir
    tensors, described = read_checkpoint(directory)
    assert described["files"] == ["model.safetensors"]
    assert sum(t.elements for t in tensors) == module_elements(model)
    # Fused experts are stored one tensor per expert and projection.
    experts = [t for t in tensors if ".mlp.experts." in t.name]
    assert len(experts) == 2 * TINY["n_routed_experts"] * 3


def test_reader_counts_equal_the_modules_sharded(sharded_dir):
    directory, model = sharded_dir
    tensors, described = read_checkpoint(directory)
    assert len(described["files"]) > 1
    assert sum(t.elements for t in tensors) == module_elements(model)
    assert described["index_total_size"] == sum(t.elements * (4 if t.dtype == "F32" else 2) for t in tensors)


def test_reader_counts_fp8_with_scales(fp8_dir, bf16_dir):
    tensors, _ = read_checkpoint(fp8_dir)
    weights = [t for t in tensors if not t.name.endswith("_scale_inv")]
    scales = [t for t in tensors if t.name.endswith("_scale_inv")]
    assert sum(t.elements for t in weights) == module_elements(bf16_dir[1])
    assert {t.dtype for t in scales} == {"F32"}
    assert len(scales) == len([t for t in weights if t.dtype == "F8_E4M3"])


@pytest.mark.parametrize("which", ["bf16", "sharded", "fp8"])
def test_build_checks_a_local_checkpoint(which, bf16_dir, sharded_dir, fp8_dir, tmp_path):
    directory = {"bf16": bf16_dir[0], "sharded": sharded_dir[0], "fp8": fp8_dir}[which]
    result = run_build(ROOT, "--family", "kimi_k2", "--weights", str(directory), "--out", str(tmp_path / "site"))
    assert result.returncode == 0, result.stderr
    facts = json.loads((tmp_path / "site" / "kimi_k2" / "facts.json").read_text())
    local = facts["checkpoint_check"]["local"]
    # counted by safetensors' own reader, file by file, not by the atlas reader under test
    files = sorted(Path(directory).glob("*.safetensors"))
    assert local["files"] == [f.name for f in files]
    counted = 0
    for f in files:
        with safe_open(str(f), "pt") as opened:
            counted += len(list(opened.keys()))
    assert local["summary"]["tensors"] == counted


def test_a_missing_scale_fails_the_build_naming_the_tensor(fp8_dir, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    tensors = load_file(str(fp8_dir / "model.safetensors"))
    del tensors["model.layers.1.self_attn.o_proj.weight_scale_inv"]
    save_file(tensors, str(broken / "model.safetensors"))
    (broken / "config.json").write_text((fp8_dir / "config.json").read_text())
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "keep.txt").write_text("previous site")
    (tmp_path / "site" / publish.MARKER).write_text(publish.MARKER_TEXT)  # a site, so the build may replace it
    result = run_build(ROOT, "--family", "kimi_k2", "--weights", str(broken), "--out", str(tmp_path / "site"))
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {broken}: model.layers.1.self_attn.o_proj.weight_scale_inv: predicted but in no file; ")
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == [publish.MARKER, "keep.txt"]


def test_a_wrong_dtype_fails_the_build_naming_file_and_tensor(bf16_dir, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    tensors = load_file(str(bf16_dir[0] / "model.safetensors"))
    tensors["model.norm.weight"] = tensors["model.norm.weight"].float()
    save_file(tensors, str(broken / "model.safetensors"))
    (broken / "config.json").write_text((bf16_dir[0] / "config.json").read_text())
    result = run_build(ROOT, "--family", "kimi_k2", "--weights", str(broken), "--out", str(tmp_path / "site"))
    assert result.returncode == 1
    assert f"error: {broken}/model.safetensors: model.norm.weight: dtype F32, predicted BF16" in result.stderr


def test_a_small_local_checkpoint_feeds_the_preview_run(bf16_dir, tmp_path):
    from atlas.model.preview import PROMPT

    directory, model = bf16_dir
    result = run_build(ROOT, "--family", "kimi_k2", "--weights", str(directory), "--out", str(tmp_path / "site"))
    assert result.returncode == 0, result.stderr
    preview = json.loads((tmp_path / "site" / "kimi_k2" / "facts.json").read_text())["preview"]
    assert preview["weights"] == str(directory)
    assert str(directory) in preview["description"] and "random" not in preview["description"]
    assert preview["config"]["num_hidden_layers"] == TINY["num_hidden_layers"]
    # The same prompt through the test's own model: block 0's output matches the preview's (float16) copy.
    ids = torch.tensor([list(PROMPT.encode("utf-8"))])
    reference = copy.deepcopy(model).float().eval()
    reference.set_attn_implementation("eager")
    with torch.no_grad():
        hidden = reference(ids, output_hidden_states=True).hidden_states[1][0]  # (seq, hidden): block 0's output
    shown = torch.tensor(preview["tensors"]["layers.0.layer_output"]["data"])
    assert shown.shape == hidden.shape
    torch.testing.assert_close(shown, hidden, atol=2e-2, rtol=1e-2)
    # ... and so do the next-token probabilities at the last position, the whole model's output.
    with torch.no_grad():
        probs = torch.softmax(reference(ids).logits[0, -1], dim=-1)
    kept = preview["tensors"]["next_token_probs"]
    torch.testing.assert_close(torch.tensor(kept["data"]), probs[:: kept["strides"][0]], atol=1e-3, rtol=1e-2)
