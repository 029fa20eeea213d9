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

    python3 bench/make_shaped_model.py --fast qwen3-vl-8b /tmp/qwen3-vl-8b

writes a Qwen3-VL-8B-Instruct-shaped folder (Qwen3VLForConditionalGeneration:
the 36-layer Qwen3-8B text model under model.language_model., the 27-block
vision tower, its patch merger and three DeepStack mergers under
model.visual.), with config.json in the layout of the published folder
(text_config with rope_theta and rope_scaling {mrope_section [24, 20, 20],
interleaved}, vision_config, the image/video/vision token ids),
preprocessor_config.json and video_preprocessor_config.json as published
(patch 16, merge 2, temporal patch 2, 65,536 to 16,777,216 pixels), the
published generation_config.json, and Qwen3-VL-Instruct's chat template with
image content (tokenizer_config.json and chat_template.json, taken from
tests/data/models/qwen3vl-tiny). transformers' Qwen3VLForConditionalGeneration
and AutoProcessor load it unchanged, and so does orin. Vision LayerNorm
weights are 1 and every vision bias 0; the rows of <|endoftext|> and
<|im_end|> in lm_head are 0, so their logits are 0 and greedy decoding of the
random model never stops early (the largest of the other, random, logits is
always > 0).
--layers N writes N text layers instead of the shape's (load tests of a
smaller folder with the real widths; a VL folder needs at least as many as it
has DeepStack layers, which orin checks).
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
# Qwen3-VL-Instruct's chat template, as the repo's VL fixtures carry it.
VL_FIXTURE = os.path.join(HERE, "..", "tests", "data", "models", "qwen3vl-tiny")

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
    "qwen3-14b": dict(arch="qwen3", hidden=5120, inter=17408, layers=40, heads=40, kv=8,
                      head_dim=128, tie=False, max_pos=40960),
    "qwen2.5-0.5b": dict(arch="qwen2", hidden=896, inter=4864, layers=24, heads=14, kv=2,
                         head_dim=64, tie=True, max_pos=32768),
    "qwen2.5-1.5b": dict(arch="qwen2", hidden=1536, inter=8960, layers=28, heads=12, kv=2,
                         head_dim=128, tie=True, max_pos=32768),
    "qwen2.5-7b": dict(arch="qwen2", hidden=3584, inter=18944, layers=28, heads=28, kv=4,
                       head_dim=128, tie=False, max_pos=32768),
    # Qwen/Qwen3-VL-8B-Instruct: text_config and vision_config of its config.json.
    "qwen3-vl-8b": dict(arch="qwen3_vl", hidden=4096, inter=12288, layers=36, heads=32, kv=8,
                        head_dim=128, tie=False, max_pos=262144, rope_theta=5000000.0,
                        mrope_section=[24, 20, 20],
                        vision=dict(depth=27, hidden=1152, inter=4304, heads=16, patch=16,
                                    temporal=2, merge=2, pos=2304, deepstack=[8, 16, 24])),
}
# Not listed by --list: a small folder of the same layout (the real vocabulary,
# patch, merge and token ids, small widths) for checking the writer and the
# loaders quickly on a CPU.
TEST_SHAPES = {
    "qwen3-vl-test": dict(arch="qwen3_vl", hidden=256, inter=512, layers=4, heads=4, kv=2,
                          head_dim=64, tie=False, max_pos=262144, rope_theta=5000000.0,
                          mrope_section=[12, 10, 10],
                          vision=dict(depth=4, hidden=128, inter=256, heads=2, patch=16,
                                      temporal=2, merge=2, pos=64, deepstack=[0, 1, 2])),
}
VOCAB = 151936
# The published Qwen3-VL ids (the Qwen tokenizer's added tokens).
VL_TOKENS = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
                 vision_end_token_id=151653)
EOS_IDS = (151643, 151645)  # <|endoftext|>, <|im_end|>
SHARD_BYTES = 2 << 30


def vl_config_json(s):
    """config.json as Qwen/Qwen3-VL-8B-Instruct publishes it: text_config with
    rope_theta and rope_scaling (transformers 4.57 reads these; 5.x turns them
    into rope_parameters, and orin reads either), vision_config with
    model_type "qwen3_vl" (5.x renames it qwen3_vl_vision), the token ids at
    the top level."""
    v = s["vision"]
    text = {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
        "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": s["head_dim"],
        "hidden_act": "silu", "hidden_size": s["hidden"], "initializer_range": 0.02,
        "intermediate_size": s["inter"], "max_position_embeddings": s["max_pos"],
        "model_type": "qwen3_vl_text", "num_attention_heads": s["heads"],
        "num_hidden_layers": s["layers"], "num_key_value_heads": s["kv"],
        "rms_norm_eps": 1e-6,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": s["mrope_section"],
                         "rope_type": "default"},
        "rope_theta": s["rope_theta"], "tie_word_embeddings": s["tie"], "use_cache": True,
        "vocab_size": VOCAB,
    }
    vision = {
        "deepstack_visual_indexes": v["deepstack"], "depth": v["depth"],
        "hidden_act": "gelu_pytorch_tanh", "hidden_size": v["hidden"], "in_channels": 3,
        "initializer_range": 0.02, "intermediate_size": v["inter"], "model_type": "qwen3_vl",
        "num_heads": v["heads"], "num_position_embeddings": v["pos"],
        "out_hidden_size": s["hidden"], "patch_size": v["patch"],
        "spatial_merge_size": v["merge"], "temporal_patch_size": v["temporal"],
    }
    return {"architectures": ["Qwen3VLForConditionalGeneration"],
            "image_token_id": VL_TOKENS["image_token_id"], "model_type": "qwen3_vl",
            "text_config": text, "tie_word_embeddings": s["tie"], "torch_dtype": "bfloat16",
            "transformers_version": "4.57.0.dev0",
            "video_token_id": VL_TOKENS["video_token_id"], "vision_config": vision,
            "vision_end_token_id": VL_TOKENS["vision_end_token_id"],
            "vision_start_token_id": VL_TOKENS["vision_start_token_id"]}


def config_json(s):
    if s["arch"] == "qwen3_vl":
        return vl_config_json(s)
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


def vision_shapes(s):
    """The vision tower of Qwen3VLVisionModel under model.visual.: the patch
    embedding (a Conv3d over [channels, temporal, patch, patch]), the learned
    position table, the blocks (LayerNorm, fused qkv, proj, GELU MLP, all with
    biases), the patch merger (LayerNorm over the block width, then two
    linears over merge^2 patches) and one DeepStack merger per index
    (LayerNorm over the merged width)."""
    v = s["vision"]
    d, f, out_d = v["hidden"], v["inter"], s["hidden"]
    m = d * v["merge"] ** 2
    p = "model.visual."
    out = [(p + "patch_embed.proj.weight", (d, 3, v["temporal"], v["patch"], v["patch"])),
           (p + "patch_embed.proj.bias", (d,)),
           (p + "pos_embed.weight", (v["pos"], d))]
    for i in range(v["depth"]):
        b = f"{p}blocks.{i}."
        out += [(b + "norm1.weight", (d,)), (b + "norm1.bias", (d,)),
                (b + "attn.qkv.weight", (3 * d, d)), (b + "attn.qkv.bias", (3 * d,)),
                (b + "attn.proj.weight", (d, d)), (b + "attn.proj.bias", (d,)),
                (b + "norm2.weight", (d,)), (b + "norm2.bias", (d,)),
                (b + "mlp.linear_fc1.weight", (f, d)), (b + "mlp.linear_fc1.bias", (f,)),
                (b + "mlp.linear_fc2.weight", (d, f)), (b + "mlp.linear_fc2.bias", (d,))]
    mergers = [(p + "merger.", d)] + [(f"{p}deepstack_merger_list.{j}.", m)
                                      for j in range(len(v["deepstack"]))]
    for name, norm in mergers:
        out += [(name + "norm.weight", (norm,)), (name + "norm.bias", (norm,)),
                (name + "linear_fc1.weight", (m, m)), (name + "linear_fc1.bias", (m,)),
                (name + "linear_fc2.weight", (out_d, m)), (name + "linear_fc2.bias", (out_d,))]
    return out


def tensor_shapes(s):
    """(name, shape) in the order save_pretrained writes them."""
    d, f, hd = s["hidden"], s["inter"], s["head_dim"]
    q, kv = s["heads"] * hd, s["kv"] * hd
    vl = s["arch"] == "qwen3_vl"
    lm = "model.language_model." if vl else "model."
    out = vision_shapes(s) if vl else []
    out.append((lm + "embed_tokens.weight", (VOCAB, d)))
    for i in range(s["layers"]):
        p = f"{lm}layers.{i}."
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
    out.append((lm + "norm.weight", (d,)))
    if not s["tie"]:
        out.append(("lm_head.weight", (VOCAB, d)))
    return out


def is_norm_weight(name):
    """RMSNorm and LayerNorm scales (the vision blocks' are norm1 and norm2)."""
    return name.endswith(("norm.weight", ".norm1.weight", ".norm2.weight"))


def is_vision_bias(name):
    return name.startswith("model.visual.") and name.endswith(".bias")


def random_bf16(rng, name, shape):
    """Norm weights 1, vision biases 0, other biases and matrices N(0, 0.02):
    activations stay finite."""
    if is_vision_bias(name):
        return np.zeros(shape, np.uint16)
    if is_norm_weight(name):
        f32 = np.ones(shape, np.float32)
    else:
        f32 = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    return (f32.view(np.uint32) >> 16).astype(np.uint16)  # bf16: the top half


def random_bf16_fast(rng, name, shape):
    """--fast: random bit patterns, +-[2^-7, 2^-6) with random mantissas, about
    ten times faster than drawing normals (a 16 GiB folder in a minute): the
    same bytes for the memory system, only the distribution differs."""
    if is_vision_bias(name):
        return np.zeros(shape, np.uint16)
    if is_norm_weight(name):
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


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def write_vl_files(out, s):
    """The files a Qwen3-VL folder has beside the weights and config.json:
    processor settings, generation settings and the chat template with image
    content, as Qwen/Qwen3-VL-8B-Instruct publishes them."""
    v = s["vision"]
    common = {"patch_size": v["patch"], "temporal_patch_size": v["temporal"],
              "merge_size": v["merge"], "image_mean": [0.5, 0.5, 0.5],
              "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor"}
    write_json(os.path.join(out, "preprocessor_config.json"),
               {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, **common,
                "image_processor_type": "Qwen2VLImageProcessorFast"})
    write_json(os.path.join(out, "video_preprocessor_config.json"),
               {"size": {"longest_edge": 25165824, "shortest_edge": 4096}, **common,
                "video_processor_type": "Qwen3VLVideoProcessor"})
    write_json(os.path.join(out, "generation_config.json"),
               {"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": True,
                "eos_token_id": [151645, 151643], "top_k": 20, "top_p": 0.8,
                "repetition_penalty": 1.0, "temperature": 0.7,
                "transformers_version": "4.56.0"})
    with open(os.path.join(VL_FIXTURE, "chat_template.json"), encoding="utf-8") as f:
        template = json.load(f)["chat_template"]
    write_json(os.path.join(out, "chat_template.json"), {"chat_template": template})
    # The Qwen3 tokenizer (Qwen3-VL uses the same one) with the VL template.
    with open(os.path.join(TOKENIZER, "tokenizer_config.json"), encoding="utf-8") as f:
        tok = json.load(f)
    tok["chat_template"] = template
    tok["model_max_length"] = 262144
    write_json(os.path.join(out, "tokenizer_config.json"), tok)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shape", nargs="?", choices=sorted(SHAPES) + sorted(TEST_SHAPES),
                    metavar="SHAPE", help="one of " + ", ".join(SHAPES))
    ap.add_argument("out", nargs="?")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true", help="print the shapes and their sizes")
    ap.add_argument("--fast", action="store_true",
                    help="random bit patterns instead of normals (much faster; for speed runs)")
    ap.add_argument("--awq", type=int, metavar="GROUP",
                    help="write the AWQ int4 folder of the shape with this group size (128 as "
                         "Qwen publishes; -1: one group per row)")
    ap.add_argument("--layers", type=int, metavar="N",
                    help="N text decoder layers instead of the shape's (smaller folders of the "
                         "real widths, for load tests)")
    a = ap.parse_args()
    if a.list:
        for k, s in SHAPES.items():
            n = sum(int(np.prod(sh)) for _, sh in tensor_shapes(s))
            print(f"{k:14s} {n / 1e9:6.2f} B parameters, {2 * n / 2**30:6.2f} GiB in bf16")
        return 0
    if not a.shape or not a.out:
        ap.error("give SHAPE and OUT (or --list)")
    s = dict(SHAPES.get(a.shape) or TEST_SHAPES[a.shape])
    vl = s["arch"] == "qwen3_vl"
    if a.layers is not None:
        need = len(s["vision"]["deepstack"]) if vl else 1
        if a.layers < need:
            ap.error(f"--layers {a.layers}: {a.shape} needs at least {need} (one per DeepStack "
                     "layer)" if vl else f"--layers {a.layers}: at least 1")
        s["layers"] = a.layers
    if vl and a.awq is not None:
        ap.error("--awq: not for the vision-language shapes")
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

        def make(rng, name, shape, dtype):
            t = bf16(rng, name, shape)
            if vl and name == "lm_head.weight":
                t[list(EOS_IDS)] = 0  # logit 0: greedy decoding never picks an end token
            return t
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
    with lzma.open(os.path.join(TOKENIZER, "tokenizer.json.xz")) as src, \
            open(os.path.join(a.out, "tokenizer.json"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    if vl:
        write_vl_files(a.out, s)
    else:
        with open(os.path.join(a.out, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643],
                       "do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}, f,
                      indent=2)
        shutil.copy(os.path.join(TOKENIZER, "tokenizer_config.json"), a.out)
    kind = f"AWQ int4 (group {a.awq})" if a.awq is not None else "bf16"
    print(f"{a.out}: {a.shape}, {total / 2**30:.2f} GiB of random {kind} weights", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
