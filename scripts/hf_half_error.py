#!/usr/bin/env python3
"""How far Hugging Face transformers itself lands from the float64 references
when it runs the tiny fixture models in f16 and bf16: the yardstick for the
half-precision tolerances of the model tests (an engine cannot be held to a
tighter bar than the reference implementation meets at the same precision).

    python3 scripts/hf_half_error.py [--models tests/data/models] [--device cuda]

Prints one line per model x dtype x text: max and mean |logprob - reference|
over the reference text's tokens, and argmax disagreements. Needs torch and
transformers (the lent GPU machine has them).
"""
import argparse
import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                     "data", "models"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    for name in ("qwen2-tiny", "qwen3-tiny"):
        folder = os.path.join(args.models, name)
        for dt in ("f32", "f16", "bf16"):
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=DTYPES[dt],
                                                         attn_implementation="eager")
            model.to(args.device).eval()
            for text in ("short", "long"):
                with open(os.path.join(folder, f"ref_{text}.json")) as f:
                    ref = json.load(f)
                ids = torch.tensor([ref["ids"]], device=args.device)
                with torch.inference_mode():
                    logits = model(ids).logits[0].double()
                lp = torch.log_softmax(logits, dim=-1)
                got = lp[:-1].gather(1, ids[0, 1:, None])[:, 0].cpu()
                err = (got - torch.tensor(ref["logprobs"], dtype=torch.float64)).abs()
                argmax = logits.argmax(-1).cpu().tolist()
                flips = sum(a != b for a, b in zip(argmax, ref["argmax"]))
                print(f"transformers {name} {dt:4s} {text:5s} {len(ref['ids']):5d} tokens: "
                      f"max {err.max().item():.4f} mean {err.mean().item():.4f} "
                      f"argmax differs at {flips}", flush=True)


if __name__ == "__main__":
    main()
