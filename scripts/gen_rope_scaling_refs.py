#!/usr/bin/env python3
"""References for RoPE scaling (config.json's rope_scaling linear and yarn).

    python3 scripts/gen_rope_scaling_refs.py

1. tests/loader/rope_scaling_ref.h: for a set of configs (both rope dict
   spellings, every yarn key, linear), the float32 inverse frequencies and the
   cos/sin factor that transformers' rotary embedding module computes
   (Qwen2RotaryEmbedding / Qwen3RotaryEmbedding: inv_freq, attention_scaling),
   as bit patterns, with the config each came from. test_model_config checks
   orin_rope_scaling_inv_freq against them.
2. tests/data/models/qwen3-tiny-yarn and qwen2-tiny-yarn: the tiny models of
   gen_tiny_models.py (weights and tokenizer copied) with yarn in config.json
   (Qwen3 as rope_parameters, Qwen2 in the older rope_scaling spelling that
   Qwen2.5's model cards give), and their float64 references as
   gen_tiny_models.py makes them (its float64_math takes a scaled model's own
   float32 frequencies, upcast, and its attention_scaling).
3. tests/data/models/qwen3vl-tiny-yarn: qwen3vl-tiny with yarn beside its
   mrope keys (as Qwen3-VL's model cards give it for long inputs) and
   gen_vl_models.py's references (images, two images, text, greedy).

Needs what gen_tiny_models.py and gen_vl_models.py need (torch, transformers
5.23.0, torchvision, pillow); offline. Run those two first: this copies their
folders.
"""
import copy
import json
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_tiny_models as tiny  # noqa: E402  (sets the offline environment first)

import torch  # noqa: E402
from transformers import AutoTokenizer, Qwen2Config, Qwen3Config  # noqa: E402
from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding  # noqa: E402
from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Real shapes: Qwen3-8B's (head_dim 128, theta 1e6, 40,960 positions) and
# Qwen2.5-7B's (hidden 3,584 / 28 heads, 32,768), as their model cards say to
# enable YaRN, then every key and spelling transformers reads.
QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
         "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
         "max_position_embeddings": 40960, "rope_theta": 1000000.0}
QWEN25 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
          "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
          "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768,
          "rope_theta": 1000000.0}
YARN4 = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
CASES = [
    ("qwen3-8b yarn (model card)", QWEN3, {"rope_scaling": YARN4}),
    ("qwen2.5-7b yarn, 'type' (model card)", QWEN25,
     {"rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}),
    ("qwen3 yarn in rope_parameters with its theta", QWEN3,
     {"rope_theta": None, "rope_parameters": dict(YARN4, rope_theta=5000000.0)}),
    ("yarn without original: max_position_embeddings", QWEN3,
     {"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}),
    ("yarn factor null: max / original", QWEN3,
     {"max_position_embeddings": 131072,
      "rope_scaling": {"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 32768}}),
    ("yarn betas, attention_factor, truncate false", QWEN3,
     {"rope_scaling": dict(YARN4, beta_fast=16, beta_slow=2, attention_factor=1.25, truncate=False)}),
    ("yarn mscale and mscale_all_dim", QWEN3,
     {"rope_theta": 10000.0,
      "rope_scaling": {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                       "mscale": 1.0, "mscale_all_dim": 0.707}}),
    ("yarn, original at the top level wins", QWEN3,
     {"original_max_position_embeddings": 8192, "rope_scaling": YARN4}),
    ("yarn, a ramp below zero (original 16 positions)", QWEN3,
     {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}}),
    ("yarn factor below 1", QWEN3,
     {"rope_scaling": {"rope_type": "yarn", "factor": 0.5, "original_max_position_embeddings": 32768}}),
    ("qwen2.5 linear", QWEN25, {"rope_scaling": {"type": "linear", "factor": 2.5}}),
    ("qwen3 linear, head_dim 64", QWEN3,
     {"head_dim": 64, "rope_theta": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 3.0}}),
]

# The tiny models' yarn: fewer pretrained positions than their 2,048, so that
# the long text (1,579 tokens) runs past them. Each folder takes the first
# (factor, original) whose references pass gen_tiny_models' top-2 gap checks
# (no near-tie an f32 engine could flip), as that script moves to the next seed.
TINY = {
    "qwen3-tiny-yarn": ("qwen3-tiny", lambda f, o: {"rope_parameters": {
        "rope_type": "yarn", "rope_theta": 1000000.0, "factor": f,
        "original_max_position_embeddings": o}}),
    "qwen2-tiny-yarn": ("qwen2-tiny", lambda f, o: {"rope_scaling": {
        "type": "yarn", "factor": f, "original_max_position_embeddings": o}}),
}
TINY_SCALINGS = [(4.0, 512), (2.0, 1024), (3.0, 512), (8.0, 256), (2.0, 512)]


def edited(base, edit):
    """base with edit's top-level keys set; None removes the key."""
    cfg = copy.deepcopy(base)
    for k, v in edit.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    return cfg


def rotary_of(cfg):
    cls, rope = ((Qwen3Config, Qwen3RotaryEmbedding) if cfg["model_type"] == "qwen3"
                 else (Qwen2Config, Qwen2RotaryEmbedding))
    config = cls.from_dict(copy.deepcopy(cfg))
    module = rope(config)
    return module.inv_freq.to(torch.float32), float(module.attention_scaling)


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_header(path):
    lines = ["/* Written by scripts/gen_rope_scaling_refs.py (transformers "
             f"{tiny.transformers.__version__}): do not edit. */",
             "#ifndef ROPE_SCALING_REF_H", "#define ROPE_SCALING_REF_H", "", "#include <stdint.h>", "",
             "typedef struct rope_scaling_ref {",
             "    const char *what;",
             "    const char *config;          /* config.json */",
             "    int half;                    /* head_dim / 2 */",
             "    uint32_t attention_factor;   /* float32 bits of attention_scaling */",
             "    uint32_t inv_freq[64];       /* float32 bits */",
             "} rope_scaling_ref;", "", "static const rope_scaling_ref rope_scaling_refs[] = {"]
    for what, base, edit in CASES:
        cfg = edited(base, edit)
        inv, factor = rotary_of(cfg)
        bits = [f32_bits(float(v)) for v in inv.tolist()]
        words = ", ".join(f"0x{b:08x}u" for b in bits)
        lines += ["    {", f"        {c_string(what)},", f"        {c_string(json.dumps(cfg))},",
                  f"        {len(bits)}, 0x{f32_bits(factor):08x}u,", f"        {{{words}}},", "    },"]
        print(f"{what}: {len(bits)} frequencies, attention_factor {factor!r}")
    lines += ["};", "", "#endif", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def make_tiny(models, name, src, edit_of, texts):
    for factor, original in TINY_SCALINGS:
        if try_tiny(models, name, src, edit_of(factor, original), texts):
            return
        print(f"{name}: factor {factor}, original {original}: fails gen_tiny_models' gap "
              "checks; trying the next")
    sys.exit(f"{name}: no scaling in {TINY_SCALINGS} passes the gap checks")


def try_tiny(models, name, src, edit, texts):
    dst = os.path.join(models, name)
    if os.path.isdir(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for f in sorted(os.listdir(os.path.join(models, src))):
        if f != "config.json" and not f.startswith("ref_"):
            shutil.copy(os.path.join(models, src, f), os.path.join(dst, f))
    with open(os.path.join(models, src, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg.pop("rope_parameters", None)
    cfg.update(edit)
    tiny.write_json(os.path.join(dst, "config.json"), cfg)
    tokenizer = AutoTokenizer.from_pretrained(dst)
    refs, figures = tiny.references(dst, tokenizer, texts)
    tiny.write_refs(dst, refs)
    plain = {}
    for key in texts:
        with open(os.path.join(models, src, f"ref_{key}.json"), encoding="utf-8") as f:
            plain[key] = json.load(f)["logprobs"]
    moved = max(abs(a - b) for k in texts for a, b in zip(refs[k]["logprobs"], plain[k]))
    print(f"{name}: {json.dumps(edit)}: max |lp - lp of {src}| {moved:.3g} (what the scaling "
          f"moves); max |lp32 - lp64| {figures['f32_vs_64']:.3g}; min top-2 gap "
          f"{figures['min_gap']:.3g}; margin {figures['margin32']:.3g}; greedy32 same "
          f"{figures['greedy32_same']}")
    return tiny.acceptable(figures)


def make_vl_yarn(models, vision):
    """qwen3vl-tiny with yarn beside its mrope keys (as Qwen3-VL's model cards
    give it for long inputs) and gen_vl_models.py's references for it (its
    float64_math() likewise keeps the scaled float32 frequencies). The test
    images' pixel values are written again where they are: they must come out
    the same bytes (git shows it)."""
    import gen_vl_models as vl
    src, dst = os.path.join(models, "qwen3vl-tiny"), os.path.join(models, "qwen3vl-tiny-yarn")
    if os.path.isdir(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for f in sorted(os.listdir(os.path.join(src))):
        path = os.path.join(src, f)
        if os.path.isfile(path) and f != "config.json" and not f.startswith("ref_"):
            shutil.copy(path, os.path.join(dst, f))
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["text_config"]["rope_parameters"].update(
        {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 512})
    tiny.write_json(os.path.join(dst, "config.json"), cfg)
    processor = vl.AutoProcessor.from_pretrained(dst)
    images = vl.make_images()
    pixel_files = vl.write_pixel_values(vision, images, processor)
    refs, _, figures = vl.references(dst, processor, images, pixel_files)
    for key, ref in refs.items():
        fname = "ref_vl_generate.json" if key == "generate" else f"ref_{key}.json"
        tiny.write_json(os.path.join(dst, fname), ref, indent=None)
    moved = 0.0
    for key in vl.CASES:
        with open(os.path.join(src, f"ref_{key}.json"), encoding="utf-8") as f:
            plain = json.load(f)["logprobs"]
        moved = max(moved, max(abs(a - b) for a, b in zip(refs[key]["logprobs"], plain)))
    print(f"qwen3vl-tiny-yarn: max |lp - lp of qwen3vl-tiny| {moved:.3g}; max |lp32 - lp64| "
          f"{figures['f32_vs_64']:.3g}; min top-2 gap {figures['min_gap']:.3g}; margin "
          f"{figures['margin32']:.3g}; greedy32 same {figures['greedy32_same']}")
    if not vl.acceptable(figures):
        sys.exit("qwen3vl-tiny-yarn: the references fail gen_vl_models' checks")


def main():
    torch.set_num_threads(1)
    print(f"transformers {tiny.transformers.__version__}, torch {torch.__version__}")
    write_header(os.path.join(ROOT, "tests/loader/rope_scaling_ref.h"))
    models = os.path.join(ROOT, "tests/data/models")
    texts = {}
    for key in tiny.TEXTS:
        with open(os.path.join(models, f"text_{key}.txt"), encoding="utf-8") as f:
            texts[key] = f.read()
    for name, (src, edit) in TINY.items():
        make_tiny(models, name, src, edit, texts)
    make_vl_yarn(models, os.path.join(ROOT, "tests/data/vision"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
