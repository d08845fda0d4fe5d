"""Model configs: the shipped LLM configs (dse/data/models) and what their parameters weigh.

Configs carry the Hugging Face config.json values that seed 004 §4.3.1 and
§4.8.2 use; parameter counts, resident weight bytes and KV bytes per token
follow from them and the tensor formats.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import model_validator

from dse.errors import SpecError, unknown_name
from dse.precision import storage_bytes
from dse.spec import load_yaml, validate
from dse.spec.types import Count, CountOrZero, Record
from dse.workload.formats import _as_formats, _matrix_bytes
from dse.workload.hf_config import is_config_path, read_hf_config

MODEL_DIR = Path(__file__).resolve().parents[1] / "data" / "models"


class MoEConfig(Record):
    """Mixture-of-experts block (Hugging Face config names in comments of the YAML)."""

    experts: Count
    top_k: Count
    intermediate: Count
    shared_experts: CountOrZero = 0
    shared_intermediate: Count | None = None  # width of each shared expert (None: intermediate)
    layers: Literal["all"] | list[CountOrZero] = "all"

    @model_validator(mode="after")
    def _check(self):
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= experts ({self.experts})")
        if isinstance(self.layers, list) and len(set(self.layers)) != len(self.layers):
            raise ValueError("layers: repeated layer index")
        return self

    def __hash__(self) -> int:  # frozen, and hashable with a list of layers (a config.json's MoE layers)
        return hash(tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()))


class ModelConfig(Record):
    """A decoder-only transformer, as its Hugging Face config.json describes it.

    Attention: ``heads`` query heads and ``kv_heads`` KV heads (GQA) of
    ``head_dim``; FFN: SwiGLU of width ``intermediate`` (gate, up, down);
    ``qk_norm``: RMSNorm on every query and key head (Qwen3). ``moe``: the
    layers listed there replace the FFN by routed experts.
    """

    name: str
    title: str | None = None
    source: str
    layers: Count
    hidden: Count
    heads: Count
    kv_heads: Count
    head_dim: Count
    intermediate: Count
    vocab: Count
    tie_embeddings: bool = False
    qk_norm: bool = False
    max_position_embeddings: Count | None = None
    moe: MoEConfig | None = None

    @model_validator(mode="after")
    def _check(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.moe is not None and isinstance(self.moe.layers, list):
            bad = [i for i in self.moe.layers if i >= self.layers]
            if bad:
                raise ValueError(f"moe.layers: index {bad[0]} >= layers ({self.layers})")
        return self

    @property
    def q_per_kv(self) -> int:
        """Query heads sharing one KV head (GQA group)."""
        return self.heads // self.kv_heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def moe_layer_count(self) -> int:
        if self.moe is None:
            return 0
        return self.layers if self.moe.layers == "all" else len(self.moe.layers)

    @property
    def dense_layer_count(self) -> int:
        return self.layers - self.moe_layer_count


@functools.lru_cache(maxsize=1)
def model_names() -> tuple[str, ...]:
    """Names of the shipped model configs (dse/data/models/*.yaml; seed 004 §4.8.2 uses qwen3-8b)."""
    return tuple(sorted(p.stem for p in MODEL_DIR.glob("*.yaml")))


@functools.lru_cache(maxsize=64)
def _load_model_file(name: str) -> ModelConfig:
    path = MODEL_DIR / f"{name}.yaml"
    cfg = validate(ModelConfig, load_yaml(path))
    if cfg.name != name:
        raise SpecError(f"{path}: name '{cfg.name}' does not match the file name '{name}'")
    return cfg


def load_model(name: str | Path | ModelConfig) -> ModelConfig:
    """The shipped model config called ``name``, or a Hugging Face config.json given by path.

    Configs carry the Hugging Face config.json values that seed 004 §4.3.1 and
    §4.8.2 use (layers, hidden, heads, KV heads, head dim, FFN width, vocab);
    a ``.json`` path is read by :func:`dse.workload.hf_config.read_hf_config`.
    SpecError with did-you-mean if the name is unknown.
    """
    if isinstance(name, ModelConfig):
        return name
    if is_config_path(name):
        path = Path(name).resolve()
        return _load_hf_file(str(path), path.stat().st_mtime_ns if path.is_file() else 0)
    if not isinstance(name, str):
        raise SpecError(f"model must be a name, got {name!r}")
    key = name.strip().lower()
    if key not in model_names():
        raise SpecError(unknown_name("model", name, model_names()))
    return _load_model_file(key)


@functools.lru_cache(maxsize=64)
def _load_hf_file(path: str, mtime_ns: int) -> ModelConfig:
    """A config.json's ModelConfig (cached per file version)."""
    try:
        return validate(ModelConfig, read_hf_config(path))
    except SpecError as e:
        raise SpecError([f"{path}: {m}" if not m.startswith(path) else m for m in e.problems]) from None


def parameter_counts(model: ModelConfig | str) -> dict[str, int]:
    """Parameters by role: attention, ffn, experts, shared_experts, router, embedding, lm_head, norms.

    seed 004 §4.8.2: W_layer = 2 d^2 + 2 d (kv_heads x head_dim) + 3 d d_ff for
    Qwen3-8B (Q and O of d x heads*head_dim; K and V of d x kv_dim). The LM
    head counts 0 when tied to the embedding.
    """
    m = load_model(model)
    d, L = m.hidden, m.layers
    attn = d * m.q_dim * 2 + d * m.kv_dim * 2
    norms = L * 2 * d + d + (L * 2 * m.head_dim if m.qk_norm else 0)
    out = {
        "attention": L * attn,
        "ffn": m.dense_layer_count * 3 * d * m.intermediate,
        "experts": 0,
        "shared_experts": 0,
        "router": 0,
        "embedding": m.vocab * d,
        "lm_head": 0 if m.tie_embeddings else m.vocab * d,
        "norms": norms,
    }
    if m.moe is not None:
        e, lm = m.moe, m.moe_layer_count
        out["experts"] = lm * e.experts * 3 * d * e.intermediate
        out["shared_experts"] = lm * e.shared_experts * 3 * d * (e.shared_intermediate or e.intermediate)
        out["router"] = lm * d * e.experts
    return out


def resident_weight_bytes(model: ModelConfig | str, formats=None) -> float:
    """Bytes of every stored parameter: all layers, all experts, embedding table, LM head, norms.

    seed 004 §4.8.2 (Qwen3-8B BF16: 16.381 GB), §4.3.3 / §4.6.3 (all experts
    stay resident; weights and scales). Each matrix is stored in its role's
    format (weights, embedding, router, norms).
    """
    m, f = load_model(model), _as_formats(formats)
    d, L = m.hidden, m.layers
    w, emb, router, nrm = f.fmt("weights"), f.fmt("embedding"), f.fmt("router"), f.fmt("norms")
    total = L * (2 * _matrix_bytes(d, m.q_dim, w) + 2 * _matrix_bytes(d, m.kv_dim, w))
    total += m.dense_layer_count * 3 * _matrix_bytes(d, m.intermediate, w)
    if m.moe is not None:
        e, lm = m.moe, m.moe_layer_count
        total += lm * e.experts * 3 * _matrix_bytes(d, e.intermediate, w)
        total += lm * e.shared_experts * 3 * _matrix_bytes(d, e.shared_intermediate or e.intermediate, w)
        total += lm * _matrix_bytes(d, e.experts, router)
    total += _matrix_bytes(m.vocab, d, emb) * (1 if m.tie_embeddings else 2)
    total += float(storage_bytes(parameter_counts(m)["norms"], nrm))
    return total


def kv_bytes_per_token(model: ModelConfig | str, kv_format="bf16") -> float:
    """KV-cache bytes per context token: layers x 2 (K, V) x kv_heads x head_dim x bytes.

    seed 004 §4.3.1: Qwen3-8B BF16, 36 x 2 x 8 x 128 x 2 = 147,456 B (144 KiB).
    """
    m = load_model(model)
    return 2.0 * m.layers * m.kv_heads * float(storage_bytes(m.head_dim, kv_format))
