#!/usr/bin/env python3
"""Hugging Face transformers on the GPU with one image: the figures orin's
Qwen3-VL time to first token and decode are set beside (bench/gpu_vl.sh).

Loads a Qwen3-VL folder (the same one orin-run reads) with AutoProcessor and
Qwen3VLForConditionalGeneration in f16 or bf16 on cuda:0 (attention: sdpa),
and times, each the median of the repeats after one untimed warm-up, with
torch.cuda.synchronize() before every clock reading:

  preprocess   reading and decoding the image file, rendering the chat template
               (the image, then the prompt's text), the processor call (resize,
               rescale, normalise, patches; tokenizing, one <|image_pad|> per
               merged patch) and moving its tensors to the GPU
  vision       the vision encoder on those pixels: get_image_features (the
               model's, or model.model's), else the visual module itself
  forward      one forward of the whole prompt with the image (vision encoder,
               then the language model's prefill), only the last logits
  prefill      forward - vision
  first_token  generate(max_new_tokens=1): vision, prefill and the first token
  ttft         preprocess + first_token
  decode       generate(N) - generate(1), greedy, min_new_tokens=N (no early
               end): N - 1 decode steps, as tok/s

One JSON line per dtype (and, with --text, one human-readable line).

    python3 bench/torch_vl_generate.py MODEL_DIR IMAGE [--dtype f16|bf16|f16,bf16]
        [--max-new-tokens 64] [--repeat 3] [--prompt "Describe this image."]

Needs torch, transformers (4.57 or later: Qwen3-VL) and PIL with a GPU.
"""
import argparse
import json
import statistics
import time

import torch
import transformers
from PIL import Image
from transformers import AutoProcessor

try:
    from transformers import Qwen3VLForConditionalGeneration as ModelClass
except ImportError:  # pragma: no cover - older or renamed
    from transformers import AutoModelForImageTextToText as ModelClass

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


DEVICE = "cuda:0"


def sync():
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn):
    """(seconds, fn's result), synchronised on both sides."""
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out


def load_processor(folder):
    try:
        return AutoProcessor.from_pretrained(folder)
    except Exception as e:  # e.g. no torchvision for the fast image processor
        print(f"# AutoProcessor failed ({type(e).__name__}: {e}); trying use_fast=False",
              flush=True)
        return AutoProcessor.from_pretrained(folder, use_fast=False)


def preprocess(proc, image_path, prompt):
    image = Image.open(image_path)
    image.load()
    image = image.convert("RGB")
    messages = [{"role": "user", "content": [{"type": "image"},
                                             {"type": "text", "text": prompt}]}]
    text = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = proc(text=[text], images=[image], return_tensors="pt")
    return {k: v.to(DEVICE) if torch.is_tensor(v) else v for k, v in inputs.items()}


def vision_call(model, inputs):
    """The vision encoder alone, however the installed version exposes it."""
    pv, grid = inputs["pixel_values"], inputs["image_grid_thw"]
    for owner in (getattr(model, "model", None), model):
        fn = getattr(owner, "get_image_features", None)
        if fn is not None:
            return lambda: fn(pv, grid), f"{type(owner).__name__}.get_image_features"
    visual = getattr(model, "visual", None) or model.model.visual
    return lambda: visual(pv.type(visual.dtype), grid_thw=grid), "visual"


def forward_call(model, inputs):
    """One forward over the prompt, keeping only the last position's logits
    where the version takes logits_to_keep (as generate's prefill does)."""
    try:
        model(**inputs, logits_to_keep=1)
        return lambda: model(**inputs, logits_to_keep=1)
    except TypeError:
        return lambda: model(**inputs)


def generate(model, inputs, n, pad_id):
    return model.generate(**inputs, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                          temperature=None, top_p=None, top_k=None, pad_token_id=pad_id)


def bench_dtype(args, name):
    t0 = time.perf_counter()
    proc = load_processor(args.model)
    kw = dict(dtype=DTYPES[name], attn_implementation="sdpa")
    try:
        model = ModelClass.from_pretrained(args.model, device_map=DEVICE, **kw)
    except (ImportError, ValueError):  # device_map needs accelerate: load, then move
        model = ModelClass.from_pretrained(args.model, **kw).to(DEVICE)
    model.eval()
    load_s = time.perf_counter() - t0
    pad_id = proc.tokenizer.pad_token_id
    if pad_id is None:
        pad_id = proc.tokenizer.eos_token_id
    R, N = args.repeat, args.max_new_tokens
    with torch.inference_mode():
        # warm-up: every step once (kernels, allocator, the processor's caches)
        inputs = preprocess(proc, args.image, args.prompt)
        vision, vision_name = vision_call(model, inputs)
        vision()
        forward = forward_call(model, inputs)
        generate(model, inputs, min(N, 4), pad_id)

        pre = [timed(lambda: preprocess(proc, args.image, args.prompt))[0] for _ in range(R)]
        vis = [timed(vision)[0] for _ in range(R)]
        fwd = [timed(forward)[0] for _ in range(R)]
        first = [timed(lambda: generate(model, inputs, 1, pad_id))[0] for _ in range(R)]
        full = []
        for _ in range(R):
            s, out = timed(lambda: generate(model, inputs, N, pad_id))
            full.append(s)
    prompt_tokens = int(inputs["input_ids"].shape[1])
    generated = int(out.shape[1]) - prompt_tokens
    image_id = getattr(model.config, "image_token_id", None)
    image_tokens = int((inputs["input_ids"] == image_id).sum()) if image_id is not None else -1
    med = {k: statistics.median(v) for k, v in
           dict(pre=pre, vis=vis, fwd=fwd, first=first, full=full).items()}
    decode_s = med["full"] - med["first"]
    r = {
        "engine": "transformers " + transformers.__version__, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(DEVICE) if DEVICE.startswith("cuda") else DEVICE,
        "dtype": name, "attention": "sdpa",
        "image": args.image, "grid_thw": inputs["image_grid_thw"][0].tolist(),
        "image_tokens": image_tokens, "prompt_tokens": prompt_tokens,
        "generated_tokens": generated, "repeats": R, "load_s": round(load_s, 2),
        "vision_fn": vision_name,
        "preprocess_ms": round(1e3 * med["pre"], 2),
        "vision_ms": round(1e3 * med["vis"], 2),
        "forward_ms": round(1e3 * med["fwd"], 2),
        "prefill_ms": round(1e3 * (med["fwd"] - med["vis"]), 2),
        "first_token_ms": round(1e3 * med["first"], 2),
        "ttft_ms": round(1e3 * (med["pre"] + med["first"]), 2),
        "decode_tok_s": round((N - 1) / decode_s, 2) if N > 1 and decode_s > 0 else None,
        "decode_step_ms": round(1e3 * decode_s / (N - 1), 3) if N > 1 else None,
    }
    if generated != N:
        r["warning"] = f"generated {generated} tokens, not {N}"
    if args.text:
        print(f"torch {name} ttft_ms {r['ttft_ms']} preprocess_ms {r['preprocess_ms']} "
              f"vision_ms {r['vision_ms']} prefill_ms {r['prefill_ms']} "
              f"first_token_ms {r['first_token_ms']} decode_tok_s {r['decode_tok_s']} "
              f"prompt_tokens {prompt_tokens}", flush=True)
    print(json.dumps(r), flush=True)
    del model
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("image")
    ap.add_argument("--dtype", default="f16", help="f16, bf16 or a comma list")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prompt", default="Describe this image.")
    ap.add_argument("--text", action="store_true", help="also a human-readable line per dtype")
    ap.add_argument("--device", default="cuda:0", help="cuda:0; cpu only to try the script out")
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    if args.max_new_tokens < 2 or args.repeat < 1:
        ap.error("--max-new-tokens >= 2, --repeat >= 1")
    for name in args.dtype.split(","):
        if name not in DTYPES:
            ap.error(f"--dtype {name}: f16 or bf16 (f32 too)")
        bench_dtype(args, name)


if __name__ == "__main__":
    main()
