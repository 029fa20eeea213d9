#!/usr/bin/env python3
"""transformers on the CPU, the figures bench/cpu_dtypes.sh is set beside.

Loads a model folder with transformers (the same folder orin-run reads), runs a
prompt of random token ids through it once (prefill) and then decodes greedily
one token at a time with its KV cache, as orin-run --bench does. Prints one JSON
line per dtype: prefill tokens/s and decode ms/token, the median of the repeats.

    python3 bench/torch_cpu_decode.py MODEL_DIR [--threads N] [--dtypes f32,bf16,f16]

Needs torch and transformers (the lent GPU machine has them; the GPU is not used).
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def run_once(model, prompt, gen_tokens):
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = model(prompt, use_cache=True)
        t1 = time.perf_counter()
        past = out.past_key_values
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(gen_tokens):
            out = model(token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = out.logits[:, -1].argmax(-1, keepdim=True)
        t2 = time.perf_counter()
    return prompt.shape[1] / (t1 - t0), (t2 - t1) * 1000 / gen_tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--dtypes", default="f32,bf16,f16")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for name in args.dtypes.split(","):
        model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=DTYPES[name])
        model.eval()
        gen = torch.Generator().manual_seed(0)
        prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt_tokens), generator=gen)
        run_once(model, prompt[:, :8], 2)  # warm-up
        runs = [run_once(model, prompt, args.gen_tokens) for _ in range(args.repeats)]
        print(json.dumps({
            "engine": "transformers " + __import__("transformers").__version__,
            "torch": torch.__version__, "device": "cpu", "dtype": name,
            "threads": torch.get_num_threads(), "prompt_tokens": args.prompt_tokens,
            "gen_tokens": args.gen_tokens,
            "prefill_tok_s": round(statistics.median(r[0] for r in runs), 2),
            "decode_step_ms": round(statistics.median(r[1] for r in runs), 3),
        }), flush=True)
        del model


if __name__ == "__main__":
    main()
