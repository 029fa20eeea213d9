#!/usr/bin/env python3
"""Check the Qwen3-VL references with an independent float64 implementation.

    python3 scripts/check_vl_refs.py [tests/data/models/qwen3vl-tiny ...] [--sensitivity]

Written from tests/data/models/README-vl.md, in numpy only (no torch, no
transformers): it reads config.json, preprocessor_config.json and the
safetensors shards itself (BF16/F16/F32), makes image 1's pixel_values from
its PNG, runs the vision encoder, builds the M-RoPE position ids, runs the
language model with the image rows and the DeepStack features, and compares
with the folder's references:

  - image 1's pixel_values (from the PNG) with the processor's .f32 file
  - every vision intermediate in ref_tensors.json (image 1 stage by stage;
    image 2's position embedding, merger and DeepStack outputs)
  - the LM hidden states of the one-image chat (ref_tensors.json lm_image.*)
  - position_ids and rope_delta of every ref_*.json
  - log-probs and argmax of ref_image.json, ref_two_images.json, ref_text.json
  - the 8 greedy tokens of ref_vl_generate.json

--sensitivity also prints how far the two-image log-probs move under common
implementation mistakes (what a C test with tolerance 1e-3 can catch).
"""
import json
import math
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_MODELS = [os.path.join(ROOT, "tests/data/models", m) for m in ("qwen3vl-tiny", "qwen3vl-tiny-tied")]


# ------------------------------------------------------------------ files

def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_safetensors(path):
    """{name: float64 array} from one .safetensors file (header: u64 length,
    JSON {name: {dtype, shape, data_offsets}}, then the raw data)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[a:b]
        if info["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32).astype(np.float64)
        elif info["dtype"] == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif info["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        else:
            raise ValueError(f"{path}: {name}: dtype {info['dtype']}")
        out[name] = arr.reshape(info["shape"])
    return out


def load_weights(folder):
    w = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            w.update(read_safetensors(os.path.join(folder, f)))
    return w


class Config:
    """config.json in either layout: transformers 5's rope_parameters, or the
    published folders' rope_theta + rope_scaling (vision rope theta then
    defaults to 10000)."""

    def __init__(self, folder):
        c = read_json(os.path.join(folder, "config.json"))
        tc, vc = c["text_config"], c["vision_config"]
        rp = tc.get("rope_parameters") or dict(tc.get("rope_scaling") or {}, rope_theta=tc["rope_theta"])
        self.theta = float(rp["rope_theta"])
        self.mrope_section = list(rp.get("mrope_section", [24, 20, 20]))
        self.hidden = tc["hidden_size"]
        self.heads = tc["num_attention_heads"]
        self.kv_heads = tc["num_key_value_heads"]
        self.head_dim = tc.get("head_dim") or self.hidden // self.heads
        self.layers = tc["num_hidden_layers"]
        self.eps = tc["rms_norm_eps"]
        self.vocab = tc["vocab_size"]
        self.tie = bool(c.get("tie_word_embeddings", False))
        self.v_hidden = vc["hidden_size"]
        self.v_heads = vc["num_heads"]
        self.v_depth = vc["depth"]
        self.v_act = vc.get("hidden_act", "gelu_pytorch_tanh")
        self.patch = vc["patch_size"]
        self.tpatch = vc["temporal_patch_size"]
        self.merge = vc["spatial_merge_size"]
        self.n_pos = vc["num_position_embeddings"]
        self.deepstack = list(vc["deepstack_visual_indexes"])
        self.v_theta = float((vc.get("rope_parameters") or {}).get("rope_theta", 10000.0))
        self.image_token_id = c["image_token_id"]
        self.video_token_id = c["video_token_id"]


# ------------------------------------------------------------ preprocessing

def patchify(img, patch, tpatch, merge):
    """[3, H, W] normalised float -> [grid_h*grid_w, 3*tpatch*patch*patch]:
    rows in merge-window order (block_row, block_col, in_row, in_col), each row
    flattened as (channel, t, y, x), the single frame repeated tpatch times."""
    c, h, w = img.shape
    gh, gw = h // patch, w // patch
    x = img.reshape(c, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.transpose(1, 4, 2, 5, 0, 3, 6)            # bh, bw, mh, mw, c, py, px
    x = np.repeat(x[:, :, :, :, :, None], tpatch, axis=5)  # ..., c, t, py, px
    return x.reshape(gh * gw, c * tpatch * patch * patch), (1, gh, gw)


def preprocess_no_resize(rgb, pp):
    """uint8 [H, W, 3] whose sides are multiples of patch*merge -> pixel_values."""
    mean = np.array(pp["image_mean"], np.float64)[:, None, None]
    std = np.array(pp["image_std"], np.float64)[:, None, None]
    x = rgb.transpose(2, 0, 1).astype(np.float64) / 255.0
    return patchify((x - mean) / std, pp["patch_size"], pp["temporal_patch_size"], pp["merge_size"])


# ------------------------------------------------------------ vision tower

def layernorm(x, w, b, eps=1e-6):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu_erf(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def merge_order_rc(gh, gw, merge):
    """(row, col) of every patch in merge-window order."""
    rows, cols = [], []
    for br in range(gh // merge):
        for bc in range(gw // merge):
            for ir in range(merge):
                for ic in range(merge):
                    rows.append(br * merge + ir)
                    cols.append(bc * merge + ic)
    return np.array(rows), np.array(cols)


def interp_pos_embed(table, side, gh, gw, merge, align_corners=True, raster=False):
    """Bilinear resampling of the side x side learned table to gh x gw,
    align_corners=True (src = i * (side-1) / (n-1)), edge taps clamped; rows
    in merge-window order (raster=True: row-major, a deliberate mistake)."""
    if raster:
        rows, cols = np.divmod(np.arange(gh * gw), gw)
    else:
        rows, cols = merge_order_rc(gh, gw, merge)

    def axis(i, n):
        if align_corners:
            src = i * (side - 1) / max(n - 1, 1)
        else:
            src = (i + 0.5) * side / n - 0.5
        f = np.floor(src)
        frac = src - f
        i0 = np.clip(f.astype(int), 0, side - 1)
        i1 = np.clip(f.astype(int) + 1, 0, side - 1)
        return i0, i1, 1 - frac, frac
    h0, h1, hw0, hw1 = axis(rows.astype(np.float64), gh)
    w0, w1, ww0, ww1 = axis(cols.astype(np.float64), gw)
    t = table
    return ((hw0 * ww0)[:, None] * t[h0 * side + w0] + (hw0 * ww1)[:, None] * t[h0 * side + w1]
            + (hw1 * ww0)[:, None] * t[h1 * side + w0] + (hw1 * ww1)[:, None] * t[h1 * side + w1])


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def vision_rope_tables(cfg, gh, gw):
    """cos/sin [n, head_dim]: per patch (merge order) angles
    [row*f_0.., col*f_0.., row*f_0.., col*f_0..] with f_j = theta^(-2j/(d/2)),
    j < d/4 (d = vision head_dim)."""
    d = cfg.v_hidden // cfg.v_heads
    half = d // 2
    inv = 1.0 / cfg.v_theta ** (np.arange(0, half, 2) / half)
    rows, cols = merge_order_rc(gh, gw, cfg.merge)
    ang = np.concatenate([rows[:, None] * inv, cols[:, None] * inv], axis=1)
    ang = np.concatenate([ang, ang], axis=1)
    return np.cos(ang), np.sin(ang)


def vision_block(cfg, w, i, x, cos, sin):
    p = f"model.visual.blocks.{i}."
    n, d = x.shape
    hd = d // cfg.v_heads
    h = layernorm(x, w[p + "norm1.weight"], w[p + "norm1.bias"])
    qkv = h @ w[p + "attn.qkv.weight"].T + w[p + "attn.qkv.bias"]
    qkv = qkv.reshape(n, 3, cfg.v_heads, hd)
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]           # [n, heads, hd]
    c, s = cos[:, None, :], sin[:, None, :]
    q = q * c + rotate_half(q) * s
    k = k * c + rotate_half(k) * s
    out = np.empty_like(q)
    for head in range(cfg.v_heads):                     # bidirectional, one image
        sc = q[:, head] @ k[:, head].T / math.sqrt(hd)
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        out[:, head] = (sc / sc.sum(-1, keepdims=True)) @ v[:, head]
    x = x + out.reshape(n, d) @ w[p + "attn.proj.weight"].T + w[p + "attn.proj.bias"]
    h = layernorm(x, w[p + "norm2.weight"], w[p + "norm2.bias"])
    h = h @ w[p + "mlp.linear_fc1.weight"].T + w[p + "mlp.linear_fc1.bias"]
    h = gelu_tanh(h) if cfg.v_act == "gelu_pytorch_tanh" else gelu_erf(h)
    return x + h @ w[p + "mlp.linear_fc2.weight"].T + w[p + "mlp.linear_fc2.bias"]


def merger(cfg, w, prefix, x, postshuffle):
    """LayerNorm (over hidden before the 2x2 shuffle, or over 4*hidden after
    it), then fc1 (4h -> 4h), exact-erf GELU, fc2 (4h -> out_hidden)."""
    m2 = cfg.merge * cfg.merge
    if postshuffle:
        x = x.reshape(-1, m2 * cfg.v_hidden)
        x = layernorm(x, w[prefix + "norm.weight"], w[prefix + "norm.bias"])
    else:
        x = layernorm(x, w[prefix + "norm.weight"], w[prefix + "norm.bias"]).reshape(-1, m2 * cfg.v_hidden)
    x = gelu_erf(x @ w[prefix + "linear_fc1.weight"].T + w[prefix + "linear_fc1.bias"])
    return x @ w[prefix + "linear_fc2.weight"].T + w[prefix + "linear_fc2.bias"]


def vision_forward(cfg, w, pixels, grid, variant=()):
    """One image's pixel_values [n, 3*t*p*p] -> stage outputs."""
    _, gh, gw = grid
    out = {}
    wp = w["model.visual.patch_embed.proj.weight"].reshape(cfg.v_hidden, -1)
    out["patch_embed"] = pixels @ wp.T + w["model.visual.patch_embed.proj.bias"]
    side = int(math.isqrt(cfg.n_pos))
    out["pos_embed"] = interp_pos_embed(w["model.visual.pos_embed.weight"], side, gh, gw, cfg.merge,
                                        align_corners="pos_half_pixel" not in variant,
                                        raster="pos_raster" in variant)
    x = out["embed"] = out["patch_embed"] + out["pos_embed"]
    cos, sin = vision_rope_tables(cfg, gh, gw)
    deep = []
    for i in range(cfg.v_depth):
        x = out[f"block{i}"] = vision_block(cfg, w, i, x, cos, sin)
        if i in cfg.deepstack:
            j = cfg.deepstack.index(i)
            deep.append(merger(cfg, w, f"model.visual.deepstack_merger_list.{j}.", x, True))
    out["merger"] = merger(cfg, w, "model.visual.merger.", x, False)
    for j, f in enumerate(deep):
        out[f"deepstack{j}"] = f
    return out


# ---------------------------------------------------------------- M-RoPE

def rope_index(cfg, ids, grids):
    """[3, n] position ids (t, h, w) and rope_delta. Text tokens: all three =
    the running position p, then p += 1. An image's run of <|image_pad|>
    (llm grid lh x lw = grid_h/2 x grid_w/2, row-major): t = p, h = p + row,
    w = p + col; then p += max(lh, lw). rope_delta = max position + 1 - n."""
    n = len(ids)
    pos = np.zeros((3, n), dtype=np.int64)
    p, i, img = 0, 0, 0
    while i < n:
        if ids[i] == cfg.image_token_id:
            _, gh, gw = grids[img]
            lh, lw = gh // cfg.merge, gw // cfg.merge
            for r in range(lh):
                for c in range(lw):
                    pos[:, i] = (p, p + r, p + c)
                    i += 1
            p += max(lh, lw)
            img += 1
        else:
            pos[:, i] = p
            p += 1
            i += 1
    return pos, int(pos.max() + 1 - n)


def mrope_tables(cfg, pos, variant=()):
    """cos/sin [n, head_dim]. inv_freq f_j = theta^(-2j/d), j < d/2; the angle
    of frequency j uses position row t, h or w: interleaved, j % 3 == 1 and
    j < 3*section[1] -> h, j % 3 == 2 and j < 3*section[2] -> w, else t."""
    d = cfg.head_dim
    half = d // 2
    inv = 1.0 / cfg.theta ** (np.arange(0, d, 2) / d)
    axis = np.zeros(half, dtype=int)
    sec = cfg.mrope_section
    if "mrope_chunked" in variant:                      # Qwen2-VL's layout: [t..., h..., w...]
        axis[sec[0]:sec[0] + sec[1]] = 1
        axis[sec[0] + sec[1]:] = 2
    else:
        for j in range(half):
            if j % 3 == 1 and j < 3 * sec[1]:
                axis[j] = 1
            elif j % 3 == 2 and j < 3 * sec[2]:
                axis[j] = 2
    if "positions_1d" in variant:
        pos = np.broadcast_to(np.arange(pos.shape[1]), pos.shape)
    ang = pos[axis, :].T * inv[None, :]                 # [n, half]
    ang = np.concatenate([ang, ang], axis=1)
    return np.cos(ang), np.sin(ang)


# -------------------------------------------------------- language model

def rmsnorm(x, weight, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def lm_forward(cfg, w, ids, pos, image_rows=None, deep=None, variant=(), record=None):
    """Logits [n, vocab]. image_rows replace the embeddings of the
    <|image_pad|> tokens (in order); deep[i] is added at those rows to the
    output of decoder layer i."""
    n = len(ids)
    ids = np.asarray(ids)
    x = w["model.language_model.embed_tokens.weight"][ids].copy()
    mask = ids == cfg.image_token_id
    if image_rows is not None:
        x[mask] = image_rows
    cos, sin = mrope_tables(cfg, pos, variant)
    cos, sin = cos[:, None, :], sin[:, None, :]
    causal = np.triu(np.full((n, n), -np.inf), 1)
    hd = cfg.head_dim
    for layer in range(cfg.layers):
        if record is not None:
            record[f"layer{layer}_in"] = x.copy()
        p = f"model.language_model.layers.{layer}."
        h = rmsnorm(x, w[p + "input_layernorm.weight"], cfg.eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, cfg.heads, hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, cfg.kv_heads, hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, cfg.kv_heads, hd)
        q = rmsnorm(q, w[p + "self_attn.q_norm.weight"], cfg.eps)
        k = rmsnorm(k, w[p + "self_attn.k_norm.weight"], cfg.eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        out = np.empty((n, cfg.heads, hd))
        for head in range(cfg.heads):
            kv = head // (cfg.heads // cfg.kv_heads)
            s = q[:, head] @ k[:, kv].T / math.sqrt(hd) + causal
            s = np.exp(s - s.max(-1, keepdims=True))
            out[:, head] = (s / s.sum(-1, keepdims=True)) @ v[:, kv]
        x = x + out.reshape(n, cfg.heads * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], cfg.eps)
        gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
        if deep is not None and layer < len(deep) and "no_deepstack" not in variant:
            x[mask] += deep[layer]
    if record is not None:
        record["norm_in"] = x.copy()
    x = rmsnorm(x, w["model.language_model.norm.weight"], cfg.eps)
    head = w["model.language_model.embed_tokens.weight"] if cfg.tie else w["lm_head.weight"]
    return x @ head.T


def log_softmax(logits):
    top = logits.max(-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))


# ------------------------------------------------------------------ check

def read_f32(path, shape):
    return np.fromfile(path, dtype="<f4").astype(np.float64).reshape(shape)


def multimodal_inputs(cfg, w, folder, ref, variant=(), cache=None):
    """Image rows and DeepStack features for a reference's images."""
    rows, deep = [], None
    for pv_path, grid in zip(ref["pixel_values"], ref["image_grid_thw"]):
        key = (pv_path, tuple(variant))
        if cache is not None and key in cache:
            v = cache[key]
        else:
            t, gh, gw = grid
            pixels = read_f32(os.path.join(folder, pv_path), (t * gh * gw, -1))
            v = vision_forward(cfg, w, pixels, grid, variant)
            if cache is not None:
                cache[key] = v
        rows.append(v["merger"])
        feats = [v[f"deepstack{j}"] for j in range(len(cfg.deepstack))]
        deep = feats if deep is None else [np.concatenate([a, b]) for a, b in zip(deep, feats)]
    if not rows:
        return None, None
    return np.concatenate(rows), deep


def check_model(folder, quiet=False, sensitivity=False):
    cfg = Config(folder)
    w = load_weights(folder)
    pp = read_json(os.path.join(folder, "preprocessor_config.json"))
    res = {}

    def diff(name, a, b):
        d = float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())
        res[name] = max(res.get(name, 0.0), d)
        return d

    # 1. image 1's pixel_values from its PNG (no resize: 64 x 96 is a multiple of 32)
    from PIL import Image
    ref_img = read_json(os.path.join(folder, "ref_image.json"))
    png = os.path.join(folder, ref_img["images"][0])
    with Image.open(png) as im:
        rgb = np.asarray(im.convert("RGB"))
    mine, grid = preprocess_no_resize(rgb, pp)
    if list(grid) != ref_img["image_grid_thw"][0]:
        raise AssertionError(f"{folder}: image 1 grid {grid} vs {ref_img['image_grid_thw'][0]}")
    theirs = read_f32(os.path.join(folder, ref_img["pixel_values"][0]), mine.shape)
    diff("pixel_values_image1_vs_f64", mine, theirs)
    res["pixel_values_image1_exact_f32"] = bool(np.array_equal(mine.astype(np.float32), theirs.astype(np.float32)))

    # 2. vision intermediates
    index = {t["name"]: t for t in read_json(os.path.join(folder, "ref_tensors.json"))["tensors"]}

    def stored(name):
        t = index[name]
        return np.fromfile(os.path.join(folder, t["file"]), dtype="<f8").reshape(t["shape"])

    two = read_json(os.path.join(folder, "ref_two_images.json"))
    cache = {}
    multimodal_inputs(cfg, w, folder, two, cache=cache)
    for img, pv in (("image1", two["pixel_values"][0]), ("image2", two["pixel_values"][1])):
        v = cache[(pv, ())]
        for name in index:
            if name.startswith(img + "."):
                diff("vision", v[name.split(".", 1)[1]], stored(name))

    # 3. language model: positions, log-probs, argmax, hidden states
    for key in ("image", "two_images", "text"):
        ref = read_json(os.path.join(folder, f"ref_{key}.json"))
        pos, delta = rope_index(cfg, ref["ids"], ref["image_grid_thw"])
        if pos.tolist() != ref["position_ids"] or delta != ref["rope_delta"]:
            raise AssertionError(f"{folder}: {key}: position ids differ")
        rows, deep = multimodal_inputs(cfg, w, folder, ref, cache=cache)
        record = {} if key == "image" else None
        logits = lm_forward(cfg, w, ref["ids"], pos, rows, deep, record=record)
        lp = log_softmax(logits)[np.arange(len(ref["ids"]) - 1), np.array(ref["ids"][1:])]
        diff("logprobs", lp, ref["logprobs"])
        if logits.argmax(-1).tolist() != ref["argmax"]:
            raise AssertionError(f"{folder}: {key}: argmax differs")
        if record is not None:
            for name in record:
                diff("lm_hidden", record[name], stored("lm_image." + name))

    # 4. greedy generation (full forward per step; generated tokens are text)
    gen = read_json(os.path.join(folder, "ref_vl_generate.json"))
    ids = list(gen["prompt_ids"])
    pos, delta = rope_index(cfg, ids, gen["image_grid_thw"])
    if pos.tolist() != gen["position_ids"] or delta != gen["rope_delta"]:
        raise AssertionError(f"{folder}: generate: position ids differ")
    rows, deep = multimodal_inputs(cfg, w, folder, gen, cache=cache)
    out = []
    for _ in range(len(gen["generated_ids"])):
        pos, _ = rope_index(cfg, ids, gen["image_grid_thw"])
        nxt = int(lm_forward(cfg, w, ids, pos, rows, deep)[-1].argmax())
        out.append(nxt)
        ids.append(nxt)
    if out != gen["generated_ids"]:
        raise AssertionError(f"{folder}: greedy {out} vs {gen['generated_ids']}")
    res["greedy_same"] = True

    res["max_diff"] = max(res["vision"], res["logprobs"], res["lm_hidden"])

    if sensitivity:
        base = two["logprobs"]
        pos, _ = rope_index(cfg, two["ids"], two["image_grid_thw"])
        sens = {}
        for variant in (("mrope_chunked",), ("positions_1d",), ("no_deepstack",),
                        ("pos_half_pixel",), ("pos_raster",)):
            rows, deep = multimodal_inputs(cfg, w, folder, two, variant, cache=cache)
            logits = lm_forward(cfg, w, two["ids"], pos, rows, deep, variant)
            lp = log_softmax(logits)[np.arange(len(two["ids"]) - 1), np.array(two["ids"][1:])]
            sens[variant[0]] = float(np.abs(lp - np.array(base)).max())
        res["sensitivity"] = sens

    if not quiet:
        print(f"{folder}: {json.dumps(res)}")
    return res


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sensitivity = "--sensitivity" in sys.argv
    worst = 0.0
    for folder in args or DEFAULT_MODELS:
        worst = max(worst, check_model(folder, sensitivity=sensitivity)["max_diff"])
    print(f"max abs difference {worst:.3g}")
    return 0 if worst <= 1e-10 else 1


if __name__ == "__main__":
    sys.exit(main())
