"""Models from a Hugging Face config.json given by path: one fixture per family, and what is refused.

Fixtures (tests/data/hf_configs/) copy the public config.json of each model. Expected values: the shipped
model YAMLs (dse/data/models, each citing the same config.json) and the model cards' parameter counts
(Mixtral 8x7B 46.7B; DeepSeekMoE 16B 16.4B; Qwen3-30B-A3B 30.5B; Llama 3.3 70B 70.6B).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.errors import SpecError
from dse.serve import serve
from dse.workload import decode, load_model, model_names, parameter_counts, read_hf_config

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
SAME_AS_SHIPPED = [("llama-3.1-8b.json", "llama-3.1-8b"), ("qwen3-8b.json", "qwen3-8b"),
                   ("qwen3-30b-a3b.json", "qwen3-30b-a3b"), ("mixtral-8x7b.json", "mixtral-8x7b")]
FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab", "tie_embeddings",
          "qk_norm", "max_position_embeddings", "moe")


@pytest.mark.parametrize("fixture, shipped", SAME_AS_SHIPPED)
def test_families_read_as_the_shipped_models(fixture, shipped):
    got, want = load_model(FIXTURES / fixture), load_model(shipped)
    assert {k: getattr(got, k) for k in FIELDS} == {k: getattr(want, k) for k in FIELDS}
    assert got.name == shipped and str(FIXTURES / fixture) in got.source


def test_gqa_dense_and_qk_norm():
    llama, qwen = load_model(FIXTURES / "llama-3.1-8b.json"), load_model(FIXTURES / "qwen3-8b.json")
    assert (llama.heads, llama.kv_heads, llama.head_dim) == (32, 8, 128)  # head_dim = 4096 / 32
    assert qwen.qk_norm and not llama.qk_norm


def test_mixtral_experts_are_full_ffns():
    m = load_model(FIXTURES / "mixtral-8x7b.json")
    assert (m.moe.experts, m.moe.top_k, m.moe.intermediate) == (8, 2, 14336)
    assert sum(parameter_counts(m).values()) == pytest.approx(46.7e9, rel=5e-3)


def test_deepseek_moe_fields():
    m = load_model(FIXTURES / "deepseek-moe-16b.json")
    # first_k_dense_replace 1: layer 0 dense, layers 1..27 MoE; 64 routed experts (6 per token) + 2 shared
    assert m.moe.layers == list(range(1, 28)) and m.dense_layer_count == 1
    assert (m.moe.experts, m.moe.top_k, m.moe.shared_experts, m.moe.intermediate) == (64, 6, 2, 1408)
    assert m.kv_heads == m.heads == 16  # MHA: num_key_value_heads = heads
    assert sum(parameter_counts(m).values()) == pytest.approx(16.4e9, rel=5e-3)


def test_new_shipped_models_cite_their_source_and_match_the_cards():
    for name, params in (("llama-3.3-70b", 70.6e9), ("qwen3-30b-a3b", 30.5e9)):
        assert name in model_names()
        m = load_model(name)
        assert m.source.startswith("Hugging Face ") and "config.json" in m.source
        assert sum(parameter_counts(m).values()) == pytest.approx(params, rel=5e-3)


def test_a_config_path_serves_and_builds_workloads():
    path = FIXTURES / "qwen3-30b-a3b.json"
    a = serve("h100-sxm", str(path), 1000, 1000, weights="fp8")
    b = serve("h100-sxm", "qwen3-30b-a3b", 1000, 1000, weights="fp8")
    assert a.output_tokens_per_s == pytest.approx(b.output_tokens_per_s, rel=1e-9)
    assert decode(path, batch=2, context=64).batch == 2


@pytest.mark.parametrize("change, key, words", [
    ({"kv_lora_rank": 512}, "kv_lora_rank", "multi-head latent attention"),
    ({"model_type": "gpt2"}, "model_type", "one of llama"),
    ({"hidden_act": "gelu"}, "hidden_act", "gated SiLU"),
    ({"sliding_window": 4096, "use_sliding_window": True}, "sliding_window", "sliding-window"),
    ({"num_key_value_heads": 5}, "num_key_value_heads", "divisor of num_attention_heads"),
    ({"num_hidden_layers": 0}, "num_hidden_layers", "integer >= 1"),
    ({"num_hidden_layers": None}, "num_hidden_layers", "missing required key"),
    ({"is_encoder_decoder": True}, "is_encoder_decoder", "decoder-only"),
])
def test_what_cannot_be_expressed_is_refused(tmp_path, change, key, words):
    cfg = json.loads((FIXTURES / "llama-3.1-8b.json").read_text())
    cfg.update(change)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(SpecError) as err:
        load_model(path)
    text = str(err.value)
    assert str(path) in text and f"{key}:" in text and words in text


def test_deepseek_v3_mla_is_refused_by_name():
    with pytest.raises(SpecError, match="kv_lora_rank: expected absent: multi-head latent attention"):
        read_hf_config(FIXTURES / "deepseek-v3-mla.json")


def test_files_that_are_not_configs(tmp_path):
    with pytest.raises(SpecError, match="no such config.json"):
        load_model(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SpecError, match="expected a JSON object"):
        load_model(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(SpecError, match="found list"):
        load_model(bad)
    nested = tmp_path / "mm.json"
    nested.write_text(json.dumps({"model_type": "llava", "text_config": {"model_type": "llama"}}))
    with pytest.raises(SpecError, match="text_config"):
        load_model(nested)


def test_a_config_in_a_model_folder_is_named_after_the_folder(tmp_path):
    cfg = json.loads((FIXTURES / "qwen3-8b.json").read_text())
    folder = tmp_path / "My_Model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    assert load_model(folder / "config.json").name == "my-model"


def test_a_config_path_names_the_model_of_a_workload(tmp_path, monkeypatch, capsys):
    """`dse serve --model` took a config.json; a workload (a study's, a what-if's, `dse eval --workload`) took only
    a shipped name. It takes the path too, in the mapping and in the short form; in a file, a relative path is
    taken from the file's folder (as its chip files are), whatever the working folder. The Qwen3-8B fixture reads
    as the shipped qwen3-8b (above), so its workloads are the shipped model's: the same FLOPs and bytes."""
    import shutil

    from dse.cli import main
    from dse.spec.study import load_study
    from dse.whatif import load_proposals
    from dse.workload import build

    (tmp_path / "models").mkdir()
    shutil.copy(FIXTURES / "qwen3-8b.json", tmp_path / "models" / "qwen3-8b.json")
    body = ('workloads:\n  - "models/qwen3-8b.json:decode:batch=2:context=1024"\n'
            '  - {model: models/qwen3-8b.json, phase: prefill, tokens: 512}\n')
    (tmp_path / "s.yaml").write_text("name: s\n" + body + "base: h100-sxm\nspace:\n  hbm.stacks: {int: [4, 5]}\n"
                                     "objectives: [tpot]\nsolver: {method: grid}\n")
    (tmp_path / "w.yaml").write_text("name: w\nbaseline: h100-sxm\nproposals:\n  p: {hbm.stacks: 6}\n" + body)
    monkeypatch.chdir(FIXTURES)  # another folder
    shipped = [build({"model": "qwen3-8b", "phase": "decode", "batch": 2, "context": 1024}),
               build({"model": "qwen3-8b", "phase": "prefill", "tokens": 512})]
    study = [build(w) for w, _ in load_study(tmp_path / "s.yaml").workloads]
    whatif = list(load_proposals(tmp_path / "w.yaml").workloads)
    for got in (study, whatif):
        assert [(w.total_flops, w.bytes_read) for w in got] == [(w.total_flops, w.bytes_read)
                                                                      for w in shipped]
    assert main(["eval", "--chip", "h100-sxm", "--workload", f"{tmp_path / 'models' / 'qwen3-8b.json'}:decode:"
                 "batch=2:context=1024", "--workload", "qwen3-8b:decode:batch=2:context=1024"]) == 0
    times = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step time  ")]
    assert len(times) == 2 and times[0] == times[1]
    assert main(["eval", "--chip", "h100-sxm", "--workload", "missing.json:decode:batch=1:context=8"]) == 2
    assert "no such config.json" in capsys.readouterr().err
