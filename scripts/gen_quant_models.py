#!/usr/bin/env python3
"""Quantized fixtures: AWQ int4 folders of the tiny models, and int8 references.

From the tiny random models of scripts/gen_tiny_models.py (tests/data/models/
qwen2-tiny and qwen3-tiny), offline:

    python3 scripts/gen_quant_models.py [--models tests/data/models]

writes
  <models>/qwen3-tiny-awq/, <models>/qwen2-tiny-awq/
      AWQ int4 folders in the layout of a published Qwen AWQ checkpoint
      (Qwen3-8B-AWQ, Qwen2.5-7B-Instruct-AWQ): config.json with their
      quantization_config keys and torch_dtype float16; per quantized linear
      layer `qweight` I32 [in, out/8], `qzeros` I32 [in/group, out/8] and
      `scales` F16 [in/group, out] (AutoAWQ's GEMM packing), its bias F16;
      every other tensor F16; sharded with an index; the tokenizer files and
      generation_config.json of the source folder. qwen3: group 32,
      modules_to_not_convert null (as Qwen publishes); qwen2: group 64, and
      one layer left float through modules_to_not_convert.
      ref_short.json, ref_long.json: float64 log-probs of the texts through
      the dequantized weights, w = (q - z) * s (the function the folder means).
  <models>/int8/<model>_{short,long}.json, <model>_lm_head_short.json
      float64 log-probs of the source folders with every linear layer (and,
      for _lm_head, the lm_head too) quantized the way orin's model.quant =
      int8 does at load (core/src/tensor/quant.c): symmetric, one f16 scale
      per 128 input values (per output row where the width is not a multiple
      of 128), scale = f16(max|w| / 127), q = rint(w / scale) in -127..127.
      The test loads the float folder with model.quant = int8 and must land
      on these.

The packing is checked against AutoAWQ (pip install autoawq; its package
__init__ wants `datasets` and a calibration stack, so only the two modules
used are imported): WQLinear_GEMM.from_linear packs our integers and must give
our qweight/qzeros/scales bit for bit, and its unpack_awq/reverse_awq_order
and dequantize_gemm must read our tensors back to the same integers and
weights. Without AutoAWQ the script stops (--no-autoawq skips the check and
says so).

The float64 forward is gen_tiny_models.py's: transformers' Qwen model in
float64 with its three float32 upcasts patched (float64_math), the weights
loaded from the dequantized state dict, checked against the independent numpy
forward (numpy_forward_logprobs) to 1e-10. Deterministic: two runs give
byte-identical files.
"""
import argparse
import importlib.util
import json
import math
import os
import shutil
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_tiny_models as tiny  # noqa: E402  (sets the offline environment first)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: E402

LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
AWQ = {
    "qwen3-tiny": dict(group=32, skip=None),
    "qwen2-tiny": dict(group=64, skip=["model.layers.1.mlp.down_proj"]),
}
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)   # nibble i of a word holds column 8j + AWQ_ORDER[i]
INT8_GROUP = 128
SHARD_BYTES = 600_000
NUMPY_AGREEMENT = 1e-10


# ------------------------------------------------------------------ AutoAWQ

def import_autoawq():
    """AutoAWQ's packer and unpacker, without running awq/__init__ (which
    imports the quantizer and its calibration-data stack)."""
    spec = importlib.util.find_spec("awq")
    if spec is None:
        return None
    pkg = types.ModuleType("awq")
    pkg.__path__ = list(spec.submodule_search_locations)
    sys.modules["awq"] = pkg
    from awq.modules.linear.gemm import WQLinear_GEMM
    from awq.utils import packing_utils
    return types.SimpleNamespace(WQLinear_GEMM=WQLinear_GEMM, unpack_awq=packing_utils.unpack_awq,
                                 reverse_awq_order=packing_utils.reverse_awq_order,
                                 dequantize_gemm=packing_utils.dequantize_gemm)


# ------------------------------------------------------------------- formats

def awq_quantize(w, group):
    """Asymmetric 4-bit min-max per group of `group` input values, AutoAWQ's
    pseudo_quantize_tensor rule (no activation-aware scaling: the weights are
    random). w float32 [out, in] -> q uint8 [out, in], z uint8 [in/group, out],
    s float16 [in/group, out], with w ~ (q - z) * s."""
    out, inp = w.shape
    wg = w.reshape(out, inp // group, group)
    hi, lo = wg.max(-1), wg.min(-1)
    s = (np.maximum(hi - lo, np.float32(1e-5)) / np.float32(15)).astype(np.float16)
    s32 = s.astype(np.float32)
    z = np.clip(-np.rint(lo / s32), 0, 15)
    q = np.clip(np.rint(wg / s32[..., None]) + z[..., None], 0, 15)
    return q.reshape(out, inp).astype(np.uint8), z.T.astype(np.uint8), s.T.copy()


def awq_pack(cols):
    """[rows, 8m] integers 0..15 -> int32 [rows, m]: nibble i of word j is
    column 8j + AWQ_ORDER[i]."""
    rows, n = cols.shape
    words = np.zeros((rows, n // 8), dtype=np.uint32)
    for i, c in enumerate(AWQ_ORDER):
        words |= cols[:, c::8].astype(np.uint32) << np.uint32(4 * i)
    return words.view(np.int32)


def awq_dequantize(q, z, s, group):
    """float64 [out, in]: (q - z) * s, exactly (the function the folder means)."""
    zr = np.repeat(z.T.astype(np.float64), group, axis=1)
    sr = np.repeat(s.T.astype(np.float64), group, axis=1)
    return (q.astype(np.float64) - zr) * sr


def int8_quantize(w):
    """orin's model.quant = int8 (core/src/tensor/quant.c), bit for bit:
    float32 arithmetic, f16 scales rounded to nearest even, rint ties to even.
    Returns the dequantized weight as float64."""
    out, inp = w.shape
    group = INT8_GROUP if inp % INT8_GROUP == 0 else inp
    wg = w.reshape(out, inp // group, group)
    amax = np.abs(wg).max(-1)
    s = (amax / np.float32(127)).astype(np.float16).astype(np.float32)
    safe = np.where(s > 0, s, np.float32(1))
    q = np.where(s[..., None] > 0, np.clip(np.rint(wg / safe[..., None]), -127, 127), 0)
    return (q.astype(np.float64) * s[..., None].astype(np.float64)).reshape(out, inp)


def check_with_autoawq(awq, name, w_deq32, bias, q, z, s, group, qweight, qzeros):
    """AutoAWQ packs the same integers into the same words, and reads ours back."""
    out, inp = w_deq32.shape
    linear = torch.nn.Linear(inp, out, bias=bias is not None, dtype=torch.float32)
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(w_deq32))
        if bias is not None:
            linear.bias.copy_(bias.float())
    ref = awq.WQLinear_GEMM.from_linear(linear, 4, group, scales=torch.from_numpy(s.astype(np.float32)),
                                        zeros=torch.from_numpy(z.astype(np.float32)))
    if not (np.array_equal(ref.qweight.numpy(), qweight) and np.array_equal(ref.qzeros.numpy(), qzeros)
            and np.array_equal(ref.scales.numpy(), s)):
        sys.exit(f"{name}: AutoAWQ's WQLinear_GEMM packs these integers differently")
    iw, iz = awq.unpack_awq(torch.from_numpy(qweight), torch.from_numpy(qzeros), 4)
    iw, iz = awq.reverse_awq_order(iw, iz, 4)
    if not (np.array_equal((iw & 15).numpy(), q.T) and np.array_equal((iz & 15).numpy(), z)):
        sys.exit(f"{name}: AutoAWQ's unpack_awq reads other integers from our words")
    deq = awq.dequantize_gemm(torch.from_numpy(qweight), torch.from_numpy(qzeros),
                              torch.from_numpy(s.astype(np.float32)), 4, group)
    if not np.array_equal(deq.numpy().T, w_deq32):
        sys.exit(f"{name}: AutoAWQ's dequantize_gemm gives other weights")


# ------------------------------------------------------------------ folders

def read_weights(folder):
    w = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            w.update(load_file(os.path.join(folder, f)))
    return w


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def skipped(name, skip):
    """transformers' rule: a module stays float when any entry is a substring
    of its full name."""
    return any(key in name for key in (skip or ()))


def quantized_modules(cfg, skip):
    return [f"model.layers.{i}.{lin}" for i in range(cfg["num_hidden_layers"]) for lin in LINEARS
            if not skipped(f"model.layers.{i}.{lin}", skip)]


def awq_folder(src, dst, spec, awq):
    """Writes the AWQ folder; returns the dequantized float64 weights."""
    cfg = read_json(os.path.join(src, "config.json"))
    weights = read_weights(src)
    tensors, deq = {}, {}
    modules = set(quantized_modules(cfg, spec["skip"]))
    for name in sorted(weights):
        t = weights[name]
        module = name.rsplit(".", 1)[0]
        if module in modules and name.endswith(".weight"):
            w = t.float().numpy()
            q, z, s = awq_quantize(w, spec["group"])
            qweight, qzeros = awq_pack(q.T.copy()), awq_pack(z)
            w64 = awq_dequantize(q, z, s, spec["group"])
            if awq is not None:
                check_with_autoawq(awq, module, w64.astype(np.float32), weights.get(module + ".bias"),
                                   q, z, s, spec["group"], qweight, qzeros)
            tensors[module + ".qweight"] = torch.from_numpy(qweight)
            tensors[module + ".qzeros"] = torch.from_numpy(qzeros)
            tensors[module + ".scales"] = torch.from_numpy(s)
            deq[name] = w64
        else:
            tensors[name] = t.to(torch.float16)
            deq[name] = tensors[name].to(torch.float64).numpy()

    if os.path.isdir(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
    out_cfg = {k: v for k, v in cfg.items() if k != "dtype"}
    out_cfg["torch_dtype"] = "float16"
    out_cfg["quantization_config"] = {
        "bits": 4, "group_size": spec["group"], "modules_to_not_convert": spec["skip"],
        "quant_method": "awq", "version": "gemm", "zero_point": True,
    }
    tiny.write_json(os.path.join(dst, "config.json"), dict(sorted(out_cfg.items())))
    write_shards(dst, tensors)
    return cfg, deq


def write_shards(folder, tensors):
    """Shards of about SHARD_BYTES in name order, and their index, as
    save_pretrained lays them out."""
    shards, current, size = [], {}, 0
    for name in sorted(tensors):
        nbytes = tensors[name].numel() * tensors[name].element_size()
        if current and size + nbytes > SHARD_BYTES:
            shards.append(current)
            current, size = {}, 0
        current[name] = tensors[name].contiguous()
        size += nbytes
    shards.append(current)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(folder, fname), metadata={"format": "pt"})
        os.chmod(os.path.join(folder, fname), 0o644)   # safetensors writes them 0600
        for name, t in shard.items():
            weight_map[name] = fname
            total += t.numel() * t.element_size()
    tiny.write_json(os.path.join(folder, "model.safetensors.index.json"),
                    {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})


def int8_weights(src, lm_head):
    cfg = read_json(os.path.join(src, "config.json"))
    weights = read_weights(src)
    deq = {name: t.to(torch.float64).numpy() for name, t in weights.items()}
    for module in quantized_modules(cfg, None):
        deq[module + ".weight"] = int8_quantize(weights[module + ".weight"].float().numpy())
    if lm_head:
        head = weights.get("lm_head.weight", weights["model.embed_tokens.weight"])
        deq["lm_head.weight"] = int8_quantize(head.float().numpy())
    return cfg, deq


# --------------------------------------------------------------- references

def float64_model(src, deq):
    """transformers' model of the source config, in float64, holding `deq`."""
    config = AutoConfig.from_pretrained(src)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").to(torch.float64).eval()
    state = {name: torch.from_numpy(np.ascontiguousarray(w)) for name, w in deq.items()}
    if config.tie_word_embeddings and "lm_head.weight" in state:
        config.tie_word_embeddings = False      # an int8 lm_head beside the float embedding
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").to(torch.float64).eval()
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if unexpected or set(missing) - allowed:
        sys.exit(f"{src}: state dict mismatch: missing {missing}, unexpected {unexpected}")
    return model


def references(src, cfg, deq, texts, tokenizer):
    """The float64 references of `texts` through `deq`, checked against numpy."""
    model = float64_model(src, deq)
    refs = {}
    with tiny.float64_math():
        for key, text in texts.items():
            refs[key], _, _ = tiny.text_reference(model, tokenizer, text)
    for key, ref in refs.items():
        lp, argmax = tiny.numpy_forward_logprobs(cfg, deq, ref["ids"])
        diff = float(np.abs(lp - np.array(ref["logprobs"])).max())
        if diff > NUMPY_AGREEMENT or argmax.tolist() != ref["argmax"]:
            sys.exit(f"{src}: the numpy float64 forward disagrees with transformers on {key}: {diff:.3g}")
    return refs


def ppl(logprobs):
    return math.exp(-sum(logprobs) / len(logprobs))


def summary(label, refs, float_refs):
    for key, ref in refs.items():
        diff = max(abs(a - b) for a, b in zip(ref["logprobs"], float_refs[key]["logprobs"]))
        print(f"  {label} {key}: {len(ref['ids'])} tokens, ppl {ppl(ref['logprobs']):.4f} "
              f"(float {ppl(float_refs[key]['logprobs']):.4f}), max |lp - float lp| {diff:.3g}, "
              f"min top-2 gap {ref['min_top2_gap']:.3g} at {ref['min_top2_gap_pos']}")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=os.path.join(root, "tests/data/models"))
    ap.add_argument("--no-autoawq", action="store_true",
                    help="skip the packing check against AutoAWQ (say so wherever the files go)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    awq = None if args.no_autoawq else import_autoawq()
    if awq is None and not args.no_autoawq:
        sys.exit("AutoAWQ is not installed (pip install --no-deps autoawq && pip install accelerate); "
                 "--no-autoawq skips the packing check")
    print(f"transformers {tiny.transformers.__version__}, torch {torch.__version__}, "
          f"AutoAWQ {'checked' if awq else 'NOT checked'}")

    texts = {}
    for key in tiny.TEXTS:
        with open(os.path.join(args.models, f"text_{key}.txt"), encoding="utf-8") as f:
            texts[key] = f.read()
    int8_dir = os.path.join(args.models, "int8")
    os.makedirs(int8_dir, exist_ok=True)
    for name, spec in AWQ.items():
        src = os.path.join(args.models, name)
        dst = os.path.join(args.models, name + "-awq")
        print(f"== {name}")
        tokenizer = AutoTokenizer.from_pretrained(src)
        float_refs = {key: read_json(os.path.join(src, f"ref_{key}.json")) for key in texts}

        cfg, deq = awq_folder(src, dst, spec, awq)
        refs = references(src, cfg, deq, texts, tokenizer)
        tiny.write_refs(dst, refs)
        summary(f"awq g{spec['group']}", refs, float_refs)

        cfg, deq = int8_weights(src, lm_head=False)
        refs = references(src, cfg, deq, texts, tokenizer)
        for key, ref in refs.items():
            tiny.write_json(os.path.join(int8_dir, f"{name}_{key}.json"), ref, indent=None)
        summary("int8", refs, float_refs)

        cfg, deq = int8_weights(src, lm_head=True)
        refs = references(src, cfg, deq, {"short": texts["short"]}, tokenizer)
        tiny.write_json(os.path.join(int8_dir, f"{name}_lm_head_short.json"), refs["short"], indent=None)
        summary("int8 + lm_head", refs, float_refs)
        print(f"  {dst}: {tiny.folder_size(dst)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
