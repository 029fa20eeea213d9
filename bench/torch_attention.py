#!/usr/bin/env python3
"""torch's scaled_dot_product_attention on the GPU, flash and cuDNN back ends: the
figures bench/attention_bench.c's rows are set beside (bench/attention.sh).

Same shapes, dtypes and timing as attention_bench: Qwen3-8B attention (32 query
heads, 8 kv heads, head_dim 128), f16 and bf16;
  prefill  causal from position 0 (is_causal=True), S = 512, 2048, 8192, 16384:
           ms and TFLOP/s with FLOPs = 2 S^2 hd H;
  decode   one query row against L = 1024, 8192, 32768 keys, no mask: us per
           call and 2 L Hkv hd dtype-size bytes per second as a fraction of the
           device-to-device copy bandwidth (1 GiB copy, bytes read + written,
           best of 5, this run).
Random inputs uniform in [-1, 1), warm-up, CUDA events around every call, the
median of the runs (>= 20). Decode rotates through layer caches totalling four
times the L2 (at least 8), and also replays a CUDA graph of one call per cache
("graph", per call), as a model's captured decode step would.

Layout: q (1, H, n, hd), K and V (1, Hkv, L, hd), contiguous. GQA: with
enable_gqa=True where the back end takes it (config "gqa"); where it refuses,
K and V expanded to H heads (repeat_interleave, outside the timed region) and
the row says "expand": that kernel reads H / Hkv times the cache bytes, and the
fraction still counts the real cache's bytes, so it compares times like for like.

    python3 bench/torch_attention.py [--json] [--mode prefill|decode|all]
        [--backends flash,cudnn] [--dtypes f16,bf16] [--runs 30]

One JSON line per row with --json (the keys of attention_bench's), else a table.
A row that fails says so; the others go on. Needs torch with a GPU.
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
PREFILL_LENS = (512, 2048, 8192, 16384)
DECODE_LENS = (1024, 8192, 32768)
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def copy_bandwidth():
    """Bytes read + written per second by a 1 GiB device copy, best of 5, GB/s."""
    n = 1 << 30
    src = torch.ones(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    best = 0.0
    for i in range(6):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        stop.record()
        stop.synchronize()
        if i:
            best = max(best, 2 * n / (start.elapsed_time(stop) * 1e-3))
    del src, dst
    torch.cuda.empty_cache()
    return best / 1e9


def noise(shape, dtype, gen):
    return (torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)


def time_eager(calls, runs):
    """The median seconds of `runs` calls (cycling through `calls`), each between
    two events recorded back to back."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(runs + 1)]
    events[0].record()
    for i in range(runs):
        calls[i % len(calls)]()
        events[i + 1].record()
    events[-1].synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) * 1e-3 for i in range(runs))


def time_graph(calls):
    """One CUDA graph of every call once, replayed 5 times: median seconds per call."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on a side stream, as torch asks
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    each = []
    for _ in range(5):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        each.append(start.elapsed_time(stop) * 1e-3 / len(calls))
    return statistics.median(each)


def sdpa_call(q, k, v, causal, gqa):
    """The call (inside the caller's sdpa_kernel context: the back end is chosen
    there, once, not in the timed region). enable_gqa is passed only when set,
    so that expanded K/V also run on a torch older than 2.5."""
    if gqa:
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def expand(t):
    return t.repeat_interleave(HEADS // KV_HEADS, dim=1).contiguous()


def choose(q, k, v, causal):
    """How the back end in force takes GQA: "gqa" (enable_gqa=True) or "expand"
    (K and V repeated to H heads); raises when it takes neither."""
    try:
        sdpa_call(q, k, v, causal, True)()
        torch.cuda.synchronize()
        return "gqa"
    except (RuntimeError, TypeError) as first:  # TypeError: a torch without enable_gqa
        try:
            sdpa_call(q, expand(k), expand(v), causal, False)()
            torch.cuda.synchronize()
            return "expand"
        except RuntimeError as second:
            raise RuntimeError(f"gqa: {first}; expanded: {second}") from None


def emit(args, row):
    if args.json:
        print(json.dumps(row), flush=True)
        return
    head = f"{row['op']:7s} {row['provider']:5s} {row['config']:6s} {row['dtype']:5s} " \
           f"{row.get('seq', row.get('kv_len')):6d}"
    if row["status"] != "ok":
        print(f"{head}  {row['status']}", flush=True)
    elif row["op"] == "decode":
        graph = f"   graph {row['graph_us']:9.2f} us  {100 * row['graph_frac']:5.1f} %" \
            if "graph_us" in row else ""
        print(f"{head}  {row['us']:9.2f} us  {row['gbs']:7.1f} GB/s  {100 * row['frac']:5.1f} %"
              f"{graph}", flush=True)
    else:
        print(f"{head}  {row['ms']:9.3f} ms  {row['tflops']:7.1f} TFLOP/s", flush=True)


def first_line(e):
    return str(e).strip().split("\n")[0][:160]


def run_prefill(args, copy_gbs, backend, dt, S):
    row = {"engine": "torch", "op": "prefill", "provider": backend, "config": "-", "dtype": dt,
           "seq": S, "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM,
           "status": "ok", "copy_gbs": round(copy_gbs, 1)}
    try:
        gen = torch.Generator(device="cuda").manual_seed(S)
        q = noise((1, HEADS, S, HEAD_DIM), DTYPES[dt], gen)
        k = noise((1, KV_HEADS, S, HEAD_DIM), DTYPES[dt], gen)
        v = noise((1, KV_HEADS, S, HEAD_DIM), DTYPES[dt], gen)
        with sdpa_kernel(BACKENDS[backend]):
            config = choose(q, k, v, True)
            if config == "expand":
                k, v = expand(k), expand(v)
            call = sdpa_call(q, k, v, True, config == "gqa")
            call()
            s = time_eager([call], args.runs)
        flops = 2.0 * S * S * HEAD_DIM * HEADS
        row.update(config=config, ms=round(s * 1e3, 4), flops=flops,
                   tflops=round(flops / s / 1e12, 2))
    except Exception as e:  # noqa: BLE001 -- a failing row must not stop the others
        row["status"] = f"failed: {first_line(e)}"
    emit(args, row)
    torch.cuda.empty_cache()


def run_decode(args, copy_gbs, l2_bytes, backend, dt, L):
    row = {"engine": "torch", "op": "decode", "provider": backend, "config": "-", "dtype": dt,
           "kv_len": L, "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM,
           "status": "ok", "copy_gbs": round(copy_gbs, 1)}
    try:
        dtype = DTYPES[dt]
        size = torch.tensor([], dtype=dtype).element_size()
        kv_bytes = 2 * L * KV_HEADS * HEAD_DIM * size
        layers = max(8, math.ceil(4 * l2_bytes / kv_bytes))
        gen = torch.Generator(device="cuda").manual_seed(L)
        q = noise((1, HEADS, 1, HEAD_DIM), dtype, gen)
        caches = [(noise((1, KV_HEADS, L, HEAD_DIM), dtype, gen),
                   noise((1, KV_HEADS, L, HEAD_DIM), dtype, gen)) for _ in range(layers)]
        with sdpa_kernel(BACKENDS[backend]):
            config = choose(q, caches[0][0], caches[0][1], False)
            if config == "expand":
                caches = [(expand(k), expand(v)) for k, v in caches]
            calls = [sdpa_call(q, k, v, False, config == "gqa") for k, v in caches]
            for call in calls:  # warm-up: every layer
                call()
            s = time_eager(calls, max(args.runs, layers))
            row.update(config=config, us=round(s * 1e6, 3), kv_bytes=kv_bytes,
                       gbs=round(kv_bytes / s / 1e9, 1),
                       frac=round(kv_bytes / s / 1e9 / copy_gbs, 4))
            try:
                gs = time_graph(calls)
                row.update(graph_us=round(gs * 1e6, 3),
                           graph_frac=round(kv_bytes / gs / 1e9 / copy_gbs, 4))
            except Exception as e:  # noqa: BLE001 -- the eager figure stands without it
                print(f"torch_attention: decode {backend} {dt} {L}: graph: {first_line(e)}",
                      file=sys.stderr)
    except Exception as e:  # noqa: BLE001 -- a failing row must not stop the others
        row["status"] = f"failed: {first_line(e)}"
    emit(args, row)
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--mode", default="all", choices=("prefill", "decode", "all"))
    ap.add_argument("--backends", default="flash,cudnn")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    args.runs = max(args.runs, 20)
    if not torch.cuda.is_available():
        print("torch_attention: no CUDA device", file=sys.stderr)
        return 77
    props = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(props, "L2_cache_size", 0) or (64 << 20)
    copy_gbs = copy_bandwidth()
    if args.json:
        print(json.dumps({"engine": "torch", "op": "copy", "device": props.name,
                          "copy_gbs": round(copy_gbs, 1), "l2_bytes": l2_bytes,
                          "torch": torch.__version__}), flush=True)
    else:
        print(f"{props.name}: copy {copy_gbs:.1f} GB/s, L2 {l2_bytes / 2**20:.0f} MiB, "
              f"torch {torch.__version__}")
    for dt in args.dtypes.split(","):
        for backend in args.backends.split(","):
            if args.mode != "decode":
                for S in PREFILL_LENS:
                    run_prefill(args, copy_gbs, backend, dt, S)
            if args.mode != "prefill":
                for L in DECODE_LENS:
                    run_decode(args, copy_gbs, l2_bytes, backend, dt, L)
    return 0


if __name__ == "__main__":
    sys.exit(main())
