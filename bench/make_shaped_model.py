#!/usr/bin/env python3
"""Writes a model folder with the exact shapes of a real Qwen checkpoint and
random bf16 weights, for benchmarks and load tests where the real weights
cannot be downloaded (the lent GPU machine reaches no network).

    python3 bench/make_shaped_model.py qwen3-0.6b /tmp/qwen3-0.6b-shaped
    python3 bench/make_shaped_model.py --list

The folder is what Hugging Face's save_pretrained writes: config.json,
generation_config.json, model-0000N-of-0000M.safetensors shards (at most
2 GiB each) with model.safetensors.index.json, and the real Qwen3 tokenizer
(tokenizer.json, tokenizer_config.json with its chat template) from
tests/data/tokenizer/qwen3. Byte sizes, memory traffic and FLOPs equal the
real model's; the text it generates is noise. Needs numpy only.

    python3 bench/make_shaped_model.py --awq 128 qwen3-8b /tmp/qwen3-8b-awq

writes the AWQ int4 folder of that shape instead, laid out as the published
Qwen AWQ checkpoints are (orin/ops.h, orin_qweight): every linear layer of the
decoder as qweight I32 [in, out/8], qzeros I32 [in/group, out/8] and scales
F16 [in/group, out] (random nibbles, scales about 2^-9 so that the weights are
of the bf16 folder's size), every other tensor F16, config.json with
quantization_config {bits 4, group_size, quant_method awq, version gemm,
zero_point true} and torch_dtype float16. The int8 variant needs no folder:
model.quant = int8 on the bf16 one.
"""
import argparse
import json
import lzma
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "tests", "data", "tokenizer", "qwen3")

# The shape keys of each model's config.json on the Hugging Face hub.
SHAPES = {
    "qwen3-0.6b": dict(arch="qwen3", hidden=1024, inter=3072, layers=28, heads=16, kv=8,
                       head_dim=128, tie=True, max_pos=40960),
    "qwen3-1.7b": dict(arch="qwen3", hidden=2048, inter=6144, layers=28, heads=16, kv=8,
                       head_dim=128, tie=True, max_pos=40960),
    "qwen3-4b": dict(arch="qwen3", hidden=2560, inter=9728, layers=36, heads=32, kv=8,
                     head_dim=128, tie=True, max_pos=40960),
    "qwen3-8b": dict(arch="qwen3", hidden=4096, inter=12288, layers=36, heads=32, kv=8,
                     head_dim=128, tie=False, max_pos=40960),
    "qwen2.5-0.5b": dict(arch="qwen2", hidden=896, inter=4864, layers=24, heads=14, kv=2,
                         head_dim=64, tie=True, max_pos=32768),
    "qwen2.5-1.5b": dict(arch="qwen2", hidden=1536, inter=8960, layers=28, heads=12, kv=2,
                         head_dim=128, tie=True, max_pos=32768),
    "qwen2.5-7b": dict(arch="qwen2", hidden=3584, inter=18944, layers=28, heads=28, kv=4,
                       head_dim=128, tie=False, max_pos=32768),
}
VOCAB = 151936
SHARD_BYTES = 2 << 30


def config_json(s):
    qwen3 = s["arch"] == "qwen3"
    cfg = {
        "architectures": ["Qwen3ForCausalLM" if qwen3 else "Qwen2ForCausalLM"],
        "model_type": s["arch"],
        "hidden_size": s["hidden"], "intermediate_size": s["inter"],
        "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
        "num_key_value_heads": s["kv"], "max_position_embeddings": s["max_pos"],
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "hidden_act": "silu",
        "tie_word_embeddings": s["tie"], "vocab_size": VOCAB, "torch_dtype": "bfloat16",
        "bos_token_id": 151643, "eos_token_id": 151645,
        "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": s["layers"],
    }
    if qwen3:
        cfg.update(head_dim=s["head_dim"], attention_bias=False)
    return cfg


LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def awq_tensors(shapes, group):
    """The AWQ folder's tensors: each decoder linear weight [out, in] becomes
    qweight, qzeros and scales (group -1: one group per row); (name, shape,
    dtype) in name order."""
    out = []
    for name, shape in shapes:
        module, leaf = name.rsplit(".", 1)
        if leaf == "weight" and module.rsplit(".", 1)[-1] in LINEARS:
            o, i = shape
            g = i if group == -1 else group
            if i % g or o % 8:
                sys.exit(f"{module}: [{o}, {i}] does not take AWQ groups of {g}")
            out += [(module + ".qweight", (i, o // 8), "I32"),
                    (module + ".qzeros", (i // g, o // 8), "I32"),
                    (module + ".scales", (i // g, o), "F16")]
        else:
            out.append((name, shape, "F16"))
    return sorted(out)


DTYPE_BYTES = {"BF16": 2, "F16": 2, "I32": 4}


def random_awq(rng, name, shape, dtype):
    """Nibbles and zeros: random bits; scales: f16 in [2^-9, 2^-8); F16
    tensors: norms 1, the rest N(0, 0.02)."""
    if dtype == "I32":
        return rng.integers(0, 1 << 32, size=shape, dtype=np.uint32)
    if name.endswith(".scales"):
        return rng.integers(0, 1 << 10, size=shape, dtype=np.uint16) | np.uint16(0x1800)
    if name.endswith("norm.weight"):
        return np.full(shape, 0x3C00, np.uint16)
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)).astype(np.float16)


def tensor_shapes(s):
    """(name, shape) in the order save_pretrained writes them."""
    d, f, hd = s["hidden"], s["inter"], s["head_dim"]
    q, kv = s["heads"] * hd, s["kv"] * hd
    out = [("model.embed_tokens.weight", (VOCAB, d))]
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,)),
                (p + "self_attn.q_proj.weight", (q, d)),
                (p + "self_attn.k_proj.weight", (kv, d)),
                (p + "self_attn.v_proj.weight", (kv, d)),
                (p + "self_attn.o_proj.weight", (d, q))]
        if s["arch"] == "qwen2":
            out += [(p + "self_attn.q_proj.bias", (q,)), (p + "self_attn.k_proj.bias", (kv,)),
                    (p + "self_attn.v_proj.bias", (kv,))]
        else:
            out += [(p + "self_attn.q_norm.weight", (hd,)), (p + "self_attn.k_norm.weight", (hd,))]
        out += [(p + "post_attention_layernorm.weight", (d,)),
                (p + "mlp.gate_proj.weight", (f, d)), (p + "mlp.up_proj.weight", (f, d)),
                (p + "mlp.down_proj.weight", (d, f))]
    out.append(("model.norm.weight", (d,)))
    if not s["tie"]:
        out.append(("lm_head.weight", (VOCAB, d)))
    return out


def random_bf16(rng, name, shape):
    """Norm weights 1, biases and matrices N(0, 0.02): activations stay finite."""
    if name.endswith("norm.weight"):
        f32 = np.ones(shape, np.float32)
    else:
        f32 = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    return (f32.view(np.uint32) >> 16).astype(np.uint16)  # bf16: the top half


def random_bf16_fast(rng, name, shape):
    """--fast: random bit patterns, +-[2^-7, 2^-6) with random mantissas, about
    ten times faster than drawing normals (a 16 GiB folder in a minute): the
    same bytes for the memory system, only the distribution differs."""
    if name.endswith("norm.weight"):
        return np.full(shape, 0x3F80, np.uint16)  # 1.0
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    return (bits & np.uint16(0x807F)) | np.uint16(0x3C00)


def nbytes_of(shape, dtype):
    return DTYPE_BYTES[dtype] * int(np.prod(shape))


def plan_shards(tensors):
    """tensors: (name, shape, dtype)."""
    shards, size = [[]], 0
    for name, shape, dtype in tensors:
        nbytes = nbytes_of(shape, dtype)
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append((name, shape, dtype))
        size += nbytes
    return shards


def write_shard(path, tensors, rng, make):
    """make(rng, name, shape, dtype) -> the tensor's array."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, dtype in tensors:
        nbytes = nbytes_of(shape, dtype)
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # data starts 8-aligned, like the reference writer
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, shape, dtype in tensors:
            f.write(make(rng, name, shape, dtype).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shape", nargs="?", choices=sorted(SHAPES))
    ap.add_argument("out", nargs="?")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true", help="print the shapes and their sizes")
    ap.add_argument("--fast", action="store_true",
                    help="random bit patterns instead of normals (much faster; for speed runs)")
    ap.add_argument("--awq", type=int, metavar="GROUP",
                    help="write the AWQ int4 folder of the shape with this group size (128 as "
                         "Qwen publishes; -1: one group per row)")
    a = ap.parse_args()
    if a.list:
        for k, s in SHAPES.items():
            n = sum(int(np.prod(sh)) for _, sh in tensor_shapes(s))
            print(f"{k:14s} {n / 1e9:6.2f} B parameters, {2 * n / 2**30:6.2f} GiB in bf16")
        return 0
    if not a.shape or not a.out:
        ap.error("give SHAPE and OUT (or --list)")
    s = SHAPES[a.shape]
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    if a.awq is not None:
        if a.awq < 1 and a.awq != -1:
            ap.error("--awq GROUP: a positive group size, or -1")
        tensors_all = awq_tensors(tensor_shapes(s), a.awq)
        make = random_awq
    else:
        tensors_all = [(name, shape, "BF16") for name, shape in tensor_shapes(s)]
        bf16 = random_bf16_fast if a.fast else random_bf16
        make = lambda rng, name, shape, dtype: bf16(rng, name, shape)  # noqa: E731
    shards = plan_shards(tensors_all)
    weight_map, total = {}, 0
    for i, tensors in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_shard(os.path.join(a.out, fname), tensors, rng, make)
        for name, shape, dtype in tensors:
            weight_map[name] = fname
            total += nbytes_of(shape, dtype)
        print(f"{a.out}/{fname}: {len(tensors)} tensors", file=sys.stderr)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    cfg = config_json(s)
    if a.awq is not None:
        cfg["torch_dtype"] = "float16"
        cfg["quantization_config"] = {"bits": 4, "group_size": a.awq, "modules_to_not_convert": None,
                                      "quant_method": "awq", "version": "gemm", "zero_point": True}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643],
                   "do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}, f, indent=2)
    with lzma.open(os.path.join(TOKENIZER, "tokenizer.json.xz")) as src, \
            open(os.path.join(a.out, "tokenizer.json"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(os.path.join(TOKENIZER, "tokenizer_config.json"), a.out)
    kind = f"AWQ int4 (group {a.awq})" if a.awq is not None else "bf16"
    print(f"{a.out}: {a.shape}, {total / 2**30:.2f} GiB of random {kind} weights", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
