#!/usr/bin/env python3
"""Writes the model-loading test fixtures under tests/data/loader/ with the real
Hugging Face writers, so that tests/loader proves orin reads what they write:

  python_writer.safetensors  safetensors.torch.save_file: every dtype orin knows,
                             one it does not (I64), a scalar, an empty tensor,
                             metadata, and the writer's space-padded header.
  qwen2_tf_config.json       transformers Qwen2Config.save_pretrained
  qwen3_tf_config.json       transformers Qwen3Config.save_pretrained

The values are chosen exactly representable so that the C test can state the
expected bits by hand. Run from the repository root: python3 scripts/gen_loader_fixtures.py
"""
import json
import os
import shutil
import tempfile

import torch
from safetensors.torch import save_file
from transformers import Qwen2Config, Qwen3Config

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "loader")


def write_safetensors():
    tensors = {
        # value i * 0.25 - 2 at flat index i
        "f32.matrix": (torch.arange(15, dtype=torch.float32) * 0.25 - 2).reshape(3, 5),
        "f16.values": torch.tensor([0.0, 1.0, -2.0, 0.5, 65504.0, 2.0**-24, -0.0, float("inf")],
                                   dtype=torch.float16),
        "bf16.values": torch.tensor([[1.0, -1.0, 0.5], [3.0, 2.0**-10, -65536.0]],
                                    dtype=torch.bfloat16),
        "i32.ids": torch.tensor([[1, -2], [2147483647, -2147483648]], dtype=torch.int32),
        "i8.bytes": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "u8.bytes": torch.tensor([0, 1, 128, 254, 255], dtype=torch.uint8),
        "i64.unknown": torch.tensor([7, -7, 1 << 40], dtype=torch.int64),
        "scalar": torch.tensor(1.5, dtype=torch.float32),
        "empty": torch.zeros(0, 4, dtype=torch.float32),
    }
    save_file(tensors, os.path.join(OUT, "python_writer.safetensors"), metadata={"format": "pt"})


def write_configs():
    tmp = tempfile.mkdtemp()
    try:
        # Sizes like a tiny test model: GQA, Qwen3 head_dim decoupled from hidden/heads.
        common = dict(vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048,
                      rms_norm_eps=1e-5, bos_token_id=None, eos_token_id=[5, 7])
        configs = {
            "qwen2_tf_config.json": Qwen2Config(**common, rope_theta=500000.0,
                                                tie_word_embeddings=True, dtype="bfloat16"),
            "qwen3_tf_config.json": Qwen3Config(**common, head_dim=16, rope_theta=1000000.0,
                                                tie_word_embeddings=False, dtype="float16",
                                                attention_bias=True),
        }
        for name, cfg in configs.items():
            cfg.save_pretrained(tmp)
            shutil.copy(os.path.join(tmp, "config.json"), os.path.join(OUT, name))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write_safetensors()
    write_configs()
