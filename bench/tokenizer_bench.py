#!/usr/bin/env python3
"""Tokenizer speed: orin against Hugging Face tokenizers, same text, same run, one thread.

Builds a ~10 MB mixed-language text with the corpus generator of
scripts/gen_tokenizer_refs.py (a different seed from the test corpus: English
prose and code, Chinese, Japanese, Korean, Arabic, Cyrillic, emoji, combining
marks, numbers, whitespace, URLs), then times
  - loading tokenizer.json (best of 3) for both;
  - encoding the whole text as one string: the first call after loading
    ("cold", empty word caches) and the best of 3 more ("warm");
  - for Hugging Face also encode_batch over the text's lines, which is how it is
    usually fed (still one thread);
and checks that orin's ids equal Hugging Face's. Hugging Face runs with
RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false.

usage: python3 bench/tokenizer_bench.py [--build build] [--mb 10]
(needs the tokenizer_bench target: ninja -C build tokenizer_bench)
"""
import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import json  # noqa: E402
import lzma  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gen_tokenizer_refs  # noqa: E402
import tokenizers  # noqa: E402


def best_of(n, fn):
    best, result = None, None
    for _ in range(n):
        t0 = time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    return best, result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    exe = os.path.join(args.build, "tokenizer_bench")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build it with ninja -C {args.build} tokenizer_bench")
    tmp = tempfile.mkdtemp(prefix="orin-tokbench-")
    try:
        src = os.path.join(ROOT, "tests", "data", "tokenizer", "qwen3")
        with lzma.open(os.path.join(src, "tokenizer.json.xz")) as f, \
                open(os.path.join(tmp, "tokenizer.json"), "wb") as g:
            shutil.copyfileobj(f, g)
        shutil.copy(os.path.join(src, "tokenizer_config.json"), tmp)

        text = gen_tokenizer_refs.make_text(int(args.mb * 1e6), args.seed)
        data = text.encode("utf-8")
        text_path = os.path.join(tmp, "text.txt")
        with open(text_path, "wb") as f:
            f.write(data)
        mb = len(data) / 1e6

        # Hugging Face.
        path = os.path.join(tmp, "tokenizer.json")
        hf_load, tk = best_of(3, lambda: tokenizers.Tokenizer.from_file(path))
        hf_cold, enc = best_of(1, lambda: tk.encode(text, add_special_tokens=False))
        hf_ids = enc.ids
        hf_warm, _ = best_of(3, lambda: tk.encode(text, add_special_tokens=False))
        lines = text.split("\n")
        hf_batch, _ = best_of(3, lambda: tk.encode_batch(lines, add_special_tokens=False))

        # orin.
        ids_path = os.path.join(tmp, "ids.bin")
        out = subprocess.run([exe, tmp, text_path, ids_path], check=True, capture_output=True, text=True).stdout
        orin = json.loads(out)
        with open(ids_path, "rb") as f:
            raw = f.read()
        orin_ids = [int.from_bytes(raw[i:i + 4], "little", signed=True) for i in range(0, len(raw), 4)]
    finally:
        shutil.rmtree(tmp)

    same = orin_ids == hf_ids
    print(f"text: {len(data)} bytes ({mb:.2f} MB), {len(lines)} lines, {len(hf_ids)} tokens; "
          f"orin ids {'==' if same else '!='} Hugging Face ids")
    print(f"{'':34} {'load ms':>8} {'cold MB/s':>10} {'warm MB/s':>10}")
    print(f"{'orin (one string)':34} {orin['load_ms']:8.1f} {mb / orin['cold_s']:10.2f} {mb / orin['warm_s']:10.2f}")
    print(f"{'HF tokenizers ' + tokenizers.__version__ + ' (one string)':34} {hf_load * 1e3:8.1f} "
          f"{mb / hf_cold:10.2f} {mb / hf_warm:10.2f}")
    print(f"{'HF tokenizers (encode_batch lines)':34} {'':8} {'':10} {mb / hf_batch:10.2f}")
    print(f"orin / HF (one string, warm): {hf_warm / orin['warm_s']:.2f}x; "
          f"orin / HF batch: {hf_batch / orin['warm_s']:.2f}x")
    if not same:
        first = next(i for i, (a, b) in enumerate(zip(orin_ids + [None], hf_ids + [None])) if a != b)
        print(f"ids differ first at token {first}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
