#!/usr/bin/env python3
"""Scores a text with orin-run (--score, prefill and decode paths) and with
Hugging Face transformers on the same token ids, and prints how far apart the
log-probabilities are. For model folders too big to commit reference data for
(bench/make_shaped_model.py writes some); the committed tiny models are checked
by the test suite instead.

    python3 scripts/compare_hf.py --orin build/orin-run --model DIR --text FILE \
        [--tol 2e-3] [--set section.key=value ...]

Needs torch and transformers (the lent GPU machine has them). transformers runs
in float64 on the CPU; orin-run in the model.dtype of etc/orin.ini unless --set
changes it. Exit 1 when a path differs by more than --tol anywhere.
"""
import argparse
import json
import subprocess
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def orin_score(args, path):
    cmd = [args.orin, "--config", args.config, "--set", f"model.path={args.model}",
           "--set", f"score.path={path}", "--score", args.text]
    for kv in args.set or []:
        cmd += ["--set", kv]
    start = time.time()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    took = time.time() - start
    rows = [json.loads(line) for line in out.splitlines()]
    per_token = [r for r in rows if "pos" in r]
    return per_token, rows[-1], took


def hf_logprobs(model_dir, ids):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    lp = torch.log_softmax(logits, dim=-1)
    return [lp[i - 1, ids[i]].item() for i in range(1, len(ids))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orin", default="build/orin-run")
    ap.add_argument("--config", default="etc/orin.ini")
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--tol", type=float, default=2e-3)
    ap.add_argument("--set", action="append", help="extra orin-run --set (repeatable)")
    args = ap.parse_args()

    results = {p: orin_score(args, p) for p in ("prefill", "decode")}
    rows = results["prefill"][0]
    ids = [None] * (len(rows) + 1)
    for r in rows:
        ids[r["pos"]] = r["id"]
    # The first token is not scored; orin-run --tokenize gives it.
    first = subprocess.run([args.orin, "--config", args.config, "--set",
                            f"model.path={args.model}", "--tokenize", args.text],
                           check=True, capture_output=True, text=True).stdout
    ids[0] = json.loads(first)[0]

    start = time.time()
    ref = hf_logprobs(args.model, ids)
    hf_s = time.time() - start
    worst = 0.0
    for path, (per_token, summary, took) in results.items():
        diff = max(abs(r["logprob"] - ref[r["pos"] - 1]) for r in per_token)
        worst = max(worst, diff)
        print(f"{args.model}: {path}: {len(per_token)} tokens scored, max |logprob - hf| = "
              f"{diff:.3g}, ppl {summary['ppl']:.6g}, orin-run {took:.1f} s")
    print(f"{args.model}: transformers float64 on the CPU: {hf_s:.1f} s")
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
