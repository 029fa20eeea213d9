#!/usr/bin/env python3
"""Hugging Face transformers' generate on the GPU: the figures orin's GPU decode
is set beside (bench/gpu_models.sh).

Loads a model folder (the same one orin-run reads) in f16 or bf16 on cuda:0,
then for a prompt of random token ids: prefill = one forward over the prompt,
decode = generate() of G + 1 new tokens minus generate() of 1 (both greedy,
static lengths), so the figure is G decode steps. Each is the median of the
repeats, synchronised before the clock is read. One JSON line per dtype.

    python3 bench/torch_gpu_generate.py MODEL_DIR [--dtypes f16,bf16]
        [--prompt-tokens 512] [--gen-tokens 64] [--repeats 3]

Needs torch and transformers with a GPU (the lent machine has them).
"""
import argparse
import json
import statistics
import time

import torch
import transformers
from transformers import AutoModelForCausalLM

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def generate(model, prompt, n):
    return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n,
                          min_new_tokens=n, do_sample=False, pad_token_id=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    for name in args.dtypes.split(","):
        t0 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=DTYPES[name],
                                                     device_map="cuda:0")
        model.eval()
        load_s = time.perf_counter() - t0
        gen = torch.Generator().manual_seed(0)
        prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt_tokens),
                               generator=gen).cuda()
        with torch.inference_mode():
            generate(model, prompt[:, :16], 4)  # warm-up
            pre = [timed(lambda: model(prompt)) for _ in range(args.repeats)]
            one = [timed(lambda: generate(model, prompt, 1)) for _ in range(args.repeats)]
            full = [timed(lambda: generate(model, prompt, args.gen_tokens + 1))
                    for _ in range(args.repeats)]
        decode_s = statistics.median(full) - statistics.median(one)
        print(json.dumps({
            "engine": "transformers " + transformers.__version__, "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0), "dtype": name,
            "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens,
            "load_s": round(load_s, 2),
            "prefill_tok_s": round(args.prompt_tokens / statistics.median(pre), 1),
            "decode_tok_s": round(args.gen_tokens / decode_s, 2),
            "decode_step_ms": round(1000 * decode_s / args.gen_tokens, 3),
        }), flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
