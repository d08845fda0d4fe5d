"""The engine iteration of continuous batching (dse.serve.step.mixed_step): what it counts, checked by hand.

Numbers: seed 004 §4.8.2 (Qwen3-8B BF16: decode at 8K 19.97 GFLOPs and 15.137 GB of weights read; prefill
of 4,096 tokens 61.85 TFLOPs, of which the LM head on the last position 1.245 GFLOPs).
"""

from __future__ import annotations

import pytest

from dse.errors import SpecError
from dse.serve.step import mixed_step
from dse.workload import decode


def test_no_chunk_is_the_decode_step():
    d = decode("qwen3-8b", batch=8, context=2048)
    m = mixed_step("qwen3-8b", batch=8, context=2048, chunk=0)
    assert m.ops == d.ops and m.tokens_per_step == 8


def test_decode_plus_a_whole_prompt_counts_both_once():
    # 1 decode at 8K + a 4,096-token prompt as one chunk: 19.97 GFLOPs + 61.85 TFLOPs - the prompt's LM head
    # (1.245 GFLOPs: the chunk's last position is not sampled in this iteration), seed 004 §4.8.2
    m = mixed_step("qwen3-8b", batch=1, context=8192, chunk=4096, prompt=4096)
    assert m.total_flops == pytest.approx(19.97e9 + 61.85e12 - 1.245e9, rel=2e-4)
    assert m.tokens_per_step == 1 and m.phase == "decode"


def test_weights_are_read_once_for_decodes_and_chunk():
    # the linear layers see batch + chunk rows together: the weights are read once (15.137 GB, seed 004
    # §4.8.2); only the 4,096 extra embedding rows (4096 x 4096 x 2 B BF16) are added
    d = decode("qwen3-8b", batch=1, context=8192)
    m = mixed_step("qwen3-8b", batch=1, context=8192, chunk=4096, prompt=4096)
    assert d.weight_bytes_read == pytest.approx(15.137e9, rel=1e-4)
    assert m.weight_bytes_read - d.weight_bytes_read == 4096 * 4096 * 2


def test_a_partial_chunk_sees_the_average_prefix():
    # a chunk of P = 1000 tokens of a 3000-token prompt, on average after (3000 - 1000) / 2 = 1000 cached
    # tokens: P (S + 1) / 2 = 1000 x 3001 / 2 query-key pairs per head and layer; QK and PV each 2 x
    # head_dim FLOPs per pair, 32 heads, 36 layers (Qwen3-8B)
    m = mixed_step("qwen3-8b", batch=4, context=2048, chunk=1000, prompt=3000)
    qk = m.op("chunk0.attn_qk")
    assert qk.flops * qk.count == pytest.approx(2 * 128 * 32 * 36 * 1000 * 3001 / 2, rel=1e-9)
    # the four decodes: 2 x head_dim x heads x context per layer each
    dq = m.op("decode.attn_qk")
    assert dq.flops * dq.count == pytest.approx(4 * 2 * 128 * 32 * 36 * 2048, rel=1e-9)


def test_a_chunk_longer_than_a_prompt_is_whole_prompts_plus_a_piece():
    # 2,500 tokens of 1,000-token prompts: 2 whole prompts (1000 x 1001 / 2 pairs each) and 500 tokens after
    # 250 cached ones (500 x 250 + 500 x 501 / 2 pairs)
    m = mixed_step("qwen3-8b", batch=2, context=1500, chunk=2500, prompt=1000)
    whole, piece = m.op("chunk0.attn_qk"), m.op("chunk1.attn_qk")
    per_pair = 2 * 128 * 32 * 36
    assert whole.flops * whole.count == pytest.approx(per_pair * 2 * 1000 * 1001 / 2, rel=1e-9)
    assert piece.flops * piece.count == pytest.approx(per_pair * (500 * 250 + 500 * 501 / 2), rel=1e-9)


def test_bad_arguments():
    with pytest.raises(SpecError, match="prompt length"):
        mixed_step("qwen3-8b", batch=1, context=10, chunk=5)
    with pytest.raises(SpecError, match="chunk must be an integer >= 0"):
        mixed_step("qwen3-8b", batch=1, context=10, chunk=-1, prompt=3)
