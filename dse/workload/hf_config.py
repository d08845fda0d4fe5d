"""A Hugging Face ``config.json`` (given by path, never downloaded) -> the fields of a :class:`ModelConfig`.

:func:`read_hf_config` returns the mapping :func:`dse.workload.load_model` validates into a ModelConfig
(``load_model("path/to/config.json")``). Families and the fields read (the names are Hugging Face's):

================================ ======================================================================
every family                     num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads
                                 (default: num_attention_heads, i.e. MHA), head_dim (default:
                                 hidden_size / num_attention_heads), intermediate_size, vocab_size,
                                 tie_word_embeddings, max_position_embeddings
llama, mistral, qwen2            dense SwiGLU decoder (GQA when num_key_value_heads < heads)
qwen3                            + RMSNorm on every query and key head (qk_norm)
qwen3_moe, qwen2_moe             num_experts, num_experts_per_tok, moe_intermediate_size,
                                 decoder_sparse_step, mlp_only_layers, shared_expert_intermediate_size
mixtral                          num_local_experts, num_experts_per_tok; each expert is intermediate_size wide
deepseek (DeepSeekMoE)           n_routed_experts, n_shared_experts, num_experts_per_tok,
                                 moe_intermediate_size, first_k_dense_replace, moe_layer_freq
================================ ======================================================================

What a ModelConfig cannot express is refused with a :class:`~dse.errors.SpecError` naming the file, the key,
what was expected and what was found: multi-head latent attention (``kv_lora_rank``, DeepSeek-V2/V3), a
sliding window shorter than the context (``sliding_window`` with ``use_sliding_window``), encoder-decoder
models, non-gated MLPs (``hidden_act`` other than SiLU/SwiGLU), nested multimodal configs (``text_config``),
a family not in the table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from dse.errors import SpecError
from dse.fileio import INPUT_MAX_BYTES, read_input_text
from dse.spec.types import MAX_COUNT
from dse.spec.yamlio import LocDict

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mixtral", "deepseek")
_GATED_ACTS = ("silu", "swiglu", "swish")


def is_config_path(name) -> bool:
    """Whether ``name`` names a config.json file (a ``.json`` path) rather than a shipped model."""
    return isinstance(name, (str, Path)) and str(name).strip().lower().endswith(".json")


def _model_name(path: Path, cfg: dict) -> str:
    raw = cfg.get("_name_or_path")
    if isinstance(raw, str) and raw.strip():
        base = raw.strip().rstrip("/").split("/")[-1]
    else:
        base = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return base.lower().replace("_", "-").replace(" ", "-") or "model"


#: The most layers a config may have (the largest public decoders have ~130; the MoE layer list is built per layer).
MAX_LAYERS = 10_000
#: The largest config.json read (real ones are a few kB).
MAX_BYTES = INPUT_MAX_BYTES


def _key_locator(text: str):
    """``loc(key)``: (line, col) where ``"key":`` is first written in the JSON text, (1, 1) if it is not."""
    cache: dict[str, tuple[int, int]] = {}

    def loc(key: str) -> tuple[int, int]:
        if key not in cache:
            m = re.search(r'"%s"\s*:' % re.escape(key), text)
            pos = m.start() if m else 0
            cache[key] = (text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1) if m else (1, 1)
        return cache[key]

    return loc


def _located(values: dict, sources: dict, file: str, loc) -> LocDict:
    """``values`` as a LocDict whose every field is located at the config.json key it was read from."""
    out = LocDict(values)
    out.file, out.loc = file, (1, 1)
    for field in values:
        out.key_locs[field] = out.value_locs[field] = loc(sources.get(field, ""))
    return out


def read_hf_config(path) -> dict:
    """The ModelConfig fields of the Hugging Face config.json at ``path`` (see the module docstring).

    A :class:`~dse.spec.LocDict` whose fields are located at the keys of the file they come from, so the
    ModelConfig's own checks name ``config.json:line:col`` too; every refusal here does.
    """
    p = Path(path)
    text = read_input_text(p, "a config.json", "config.json files", max_bytes=MAX_BYTES,
                           missing="config.json (a Hugging Face model config is given by path; nothing is downloaded)")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"{p}:{e.lineno}:{e.colno}: expected a JSON object (a Hugging Face config.json), found "
                        f"unreadable JSON: {e.msg}") from None
    except (ValueError, RecursionError) as e:  # an integer of more than 4,300 digits; nesting too deep
        raise SpecError(f"{p}:1:1: expected a JSON object (a Hugging Face config.json), found unreadable JSON: "
                        f"{str(e)[:120] or type(e).__name__}") from None
    if not isinstance(cfg, dict):
        raise SpecError(f"{p}:1:1: expected a JSON object (a Hugging Face config.json), found {type(cfg).__name__}")
    loc = _key_locator(text)

    def fail(key: str, expected: str, found) -> SpecError:
        line, col = loc(key)
        return SpecError(f"{p}:{line}:{col} {key}: expected {expected}, found {found!r:.100}")

    if cfg.get("kv_lora_rank") or cfg.get("q_lora_rank"):
        key = "kv_lora_rank" if cfg.get("kv_lora_rank") else "q_lora_rank"
        raise fail(key, "absent: multi-head latent attention (DeepSeek-V2/V3 MLA) is not expressible, dse's "
                   "attention is GQA over num_key_value_heads x head_dim", cfg[key])
    if "text_config" in cfg and "num_hidden_layers" not in cfg:
        raise fail("text_config", "a decoder-only text model config (dse reads no nested multimodal configs; "
                   "give the text model's own config.json)", "a nested text_config")
    family = cfg.get("model_type")
    if not isinstance(family, str) or family not in FAMILIES:
        raise fail("model_type", f"one of {', '.join(FAMILIES)}", family)
    if cfg.get("is_encoder_decoder"):
        raise fail("is_encoder_decoder", "false (dse models decoder-only transformers)", True)
    act = str(cfg.get("hidden_act", "silu")).lower()
    if act not in _GATED_ACTS:
        raise fail("hidden_act", f"a gated SiLU MLP ({', '.join(_GATED_ACTS)}): dse's FFN is SwiGLU "
                   "(gate, up, down)", cfg.get("hidden_act"))
    window = cfg.get("sliding_window")
    uses_window = cfg.get("use_sliding_window", family in ("mistral", "mixtral"))
    max_pos = cfg.get("max_position_embeddings")
    if window is not None and not isinstance(window, bool) and not isinstance(window, int):
        raise fail("sliding_window", "null or an integer (positions a query attends)", window)
    if window and uses_window and (not isinstance(max_pos, int) or window < max_pos):
        raise fail("sliding_window", "null (sliding-window attention is not expressible: dse's attention sees "
                   "every cached position)", window)

    def integer(key: str, default=None, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
        v = cfg.get(key, default)
        if v is None:
            raise SpecError(f"{p}:1:1 {key}: missing required key (expected an integer >= {minimum})")
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
            raise fail(key, f"an integer >= {minimum}" + ("" if maximum == MAX_COUNT else f" and <= {maximum:,}"), v)
        return v

    layers = integer("num_hidden_layers", maximum=MAX_LAYERS)
    hidden = integer("hidden_size")
    heads = integer("num_attention_heads")
    kv_heads = integer("num_key_value_heads", heads)
    head_src = "head_dim"
    if cfg.get("head_dim") is not None:
        head_dim = integer("head_dim")
    else:
        if hidden % heads:
            raise fail("head_dim", f"a value (hidden_size {hidden} is not a multiple of num_attention_heads "
                       f"{heads})", None)
        head_dim, head_src = hidden // heads, "hidden_size"
    if heads % kv_heads:
        raise fail("num_key_value_heads", f"a divisor of num_attention_heads ({heads})", kv_heads)
    out = {
        "name": _model_name(p, cfg),
        "title": str(cfg.get("_name_or_path") or p),
        "source": f"Hugging Face config.json at {p}",
        "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
        "intermediate": integer("intermediate_size"),
        "vocab": integer("vocab_size"),
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "qk_norm": family in ("qwen3", "qwen3_moe"),
    }
    if isinstance(max_pos, int) and not isinstance(max_pos, bool) and max_pos >= 1:
        out["max_position_embeddings"] = max_pos
    sources = {"name": "_name_or_path", "title": "_name_or_path", "layers": "num_hidden_layers",
               "hidden": "hidden_size", "heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
               "head_dim": head_src, "intermediate": "intermediate_size", "vocab": "vocab_size",
               "tie_embeddings": "tie_word_embeddings", "qk_norm": "model_type",
               "max_position_embeddings": "max_position_embeddings"}
    moe = _moe(p, cfg, family, layers, integer, fail)
    if moe is not None:
        block, moe_sources = moe
        out["moe"] = _located(block, moe_sources, str(p), loc)
        sources["moe"] = moe_sources["experts"]
    return _located(out, sources, str(p), loc)


def _moe(p, cfg, family, layers, integer, fail) -> tuple[dict, dict] | None:
    """The ``moe`` block of a MoE family and the config.json key of each of its fields, or None (a dense config)."""
    if family in ("qwen2_moe", "qwen3_moe"):
        experts = integer("num_experts")
        step = integer("decoder_sparse_step", 1)
        dense = cfg.get("mlp_only_layers") or []
        if not isinstance(dense, list) or any(not isinstance(i, int) or isinstance(i, bool) for i in dense):
            raise fail("mlp_only_layers", "a list of layer indices", dense)
        moe_layers = [i for i in range(layers) if i not in dense and (i + 1) % step == 0]
        shared_w = cfg.get("shared_expert_intermediate_size") or 0
        block = {"experts": experts, "top_k": integer("num_experts_per_tok"),
                 "intermediate": integer("moe_intermediate_size"),
                 "shared_experts": 1 if shared_w else 0}
        if shared_w:
            block["shared_intermediate"] = integer("shared_expert_intermediate_size")
        sources = {"experts": "num_experts", "top_k": "num_experts_per_tok", "intermediate": "moe_intermediate_size",
                   "shared_experts": "shared_expert_intermediate_size",
                   "shared_intermediate": "shared_expert_intermediate_size",
                   "layers": "mlp_only_layers" if dense else "decoder_sparse_step"}
    elif family == "mixtral":
        block = {"experts": integer("num_local_experts"), "top_k": integer("num_experts_per_tok"),
                 "intermediate": integer("intermediate_size"), "shared_experts": 0}
        moe_layers = list(range(layers))
        sources = {"experts": "num_local_experts", "top_k": "num_experts_per_tok", "intermediate": "intermediate_size",
                   "layers": "num_hidden_layers"}
    elif family == "deepseek":
        if not cfg.get("n_routed_experts"):
            return None
        first = integer("first_k_dense_replace", 0, minimum=0)
        freq = integer("moe_layer_freq", 1)
        moe_layers = [i for i in range(layers) if i >= first and i % freq == 0]
        shared = integer("n_shared_experts", 0, minimum=0)
        block = {"experts": integer("n_routed_experts"), "top_k": integer("num_experts_per_tok"),
                 "intermediate": integer("moe_intermediate_size"), "shared_experts": shared}
        sources = {"experts": "n_routed_experts", "top_k": "num_experts_per_tok",
                   "intermediate": "moe_intermediate_size", "shared_experts": "n_shared_experts",
                   "layers": "first_k_dense_replace"}
    else:
        for key in ("num_experts", "num_local_experts", "n_routed_experts"):
            if cfg.get(key):
                raise fail(key, f"absent for model_type {family} (a dense family)", cfg[key])
        return None
    if block["top_k"] > block["experts"]:
        raise fail("num_experts_per_tok", f"at most the number of experts ({block['experts']})", block["top_k"])
    if not moe_layers:
        return None
    block["layers"] = "all" if len(moe_layers) == layers else moe_layers
    return block, sources
