#!/usr/bin/env python3
"""Test images for orin's image input (core/src/vision) and transformers'
pixel_values for them.

The reference is what a Qwen3-VL user gets from transformers: the default
image processor class for Qwen3-VL (AutoImageProcessor -> Qwen2VLImageProcessor,
torchvision backend) called on PIL.Image.open(file). Writes, under
tests/data/vision/:

  images/*.png, *.jpg   small synthetic images: PNG of every colour type
                        (grey 2/4/8/16-bit, grey+alpha, RGB 8/16-bit, RGBA,
                        palette with and without tRNS, colour keys,
                        interlaced) and JPEG (baseline, progressive, grey),
                        written by this script (PNG by its own encoder, so
                        that every bit depth and chunk is chosen; JPEG by PIL)
  bad/*                 files that must fail to load (truncated, corrupt,
                        empty, too large, not an image, CMYK, ...)
  qwen3vl/preprocessor_config.json   Qwen3-VL's published file (patch 16,
                        merge 2, temporal 2, mean/std 0.5, size {shortest_edge
                        65536, longest_edge 16777216})
  minmax/preprocessor_config.json    Qwen2.5-VL's form: min_pixels/max_pixels
                        keys (small bounds, so that images are resized down
                        as well as up), patch 14, CLIP mean and std
  rescale/processor_config.json      the nested form, do_normalize false
  normalize/preprocessor_config.json do_rescale false
  noresize/preprocessor_config.json  do_resize false
  refs.json             the cases: image, config, caller cap, grid_thw,
                        shapes, whether the image was resized, and offsets
                        into refs.bin
  refs.bin.xz           for each image, the RGB bytes the processor sees
                        (process_image: PIL decode + convert_to_rgb); for
                        each case, pixel_values as one byte per value: its
                        8-bit level, with refs.json's per-config "table"
                        (table[c][level] is the float32 value; the script
                        checks that table[c][level] reproduces transformers'
                        pixel_values bit for bit, so nothing is lost)

Run from the repository root (needs torch, torchvision, transformers, pillow,
numpy; CPU):
    python3 scripts/gen_vl_image_refs.py
Deterministic: two runs give the same files. It also prints, for the
record, how far the PIL backend (Qwen2VLImageProcessorPil) lands from the
default one on the resized cases.
"""
import io
import json
import lzma
import os
import shutil
import struct
import sys
import warnings
import zlib

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import AutoImageProcessor
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "vision")

QWEN3VL = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
MINMAX = {
    "min_pixels": 3136,
    "max_pixels": 20000,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2_5_VLProcessor",
}
SMALL = dict(MINMAX, max_pixels=200000)
CONFIGS = {
    "qwen3vl": ("preprocessor_config.json", QWEN3VL),
    "minmax": ("preprocessor_config.json", MINMAX),
    "rescale": ("processor_config.json",
                {"image_processor": dict(SMALL, do_normalize=False, rescale_factor=0.00390625),
                 "processor_class": "Qwen2_5_VLProcessor"}),
    "normalize": ("preprocessor_config.json",
                  dict(SMALL, do_rescale=False, image_mean=[120.5, 110.25, 100], image_std=60)),
    "noresize": ("preprocessor_config.json", dict(SMALL, do_resize=False)),
}

# ------------------------------------------------------------------ pictures


def picture(w, h, seed, channels=3, flat=False):
    """Gradients (or a flat ground), hard-edged discs and stripes, and one
    noisy square: detail at every frequency, yet small once compressed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((h, w, channels))
    for c in range(channels):
        a, b = rng.uniform(-1, 1, 2) * (0 if flat else 1)
        img[..., c] = 128 + 100 * (a * (x / max(w, 1) - 0.5) + b * (y / max(h, 1) - 0.5))
    for _ in range(4):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(3, max(4, min(w, h) / 3))
        img[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = rng.uniform(0, 255, channels)
    band = ((x + y) // 3 % 2 == 0) & (y > h * 0.6) & (y < h * 0.75)
    img[band] = 255 - img[band]
    n = max(2, min(w, h) // 8)
    x0, y0 = rng.integers(0, max(1, w - n)), rng.integers(0, max(1, h - n))
    img[y0:y0 + n, x0:x0 + n] += rng.uniform(-40, 40, (min(n, h - y0), min(n, w - x0), channels))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


# ------------------------------------------------------------ a PNG encoder

CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def pack_rows(a, bit_depth):
    """Rows of samples (H x W x C ints) as PNG scanlines, filter byte 0."""
    out = b""
    for row in a.reshape(a.shape[0], -1):
        if bit_depth == 16:
            raw = row.astype(">u2").tobytes()
        elif bit_depth == 8:
            raw = row.astype(np.uint8).tobytes()
        else:
            bits = np.unpackbits(row.astype(np.uint8)[:, None], axis=1)[:, 8 - bit_depth:]
            raw = np.packbits(bits.reshape(-1)).tobytes()
        out += b"\0" + raw
    return out


def png(a, color_type, bit_depth, palette=None, trns=None, interlace=False, width=None,
        height=None):
    if a.ndim == 2:
        a = a[:, :, None]
    h, w = a.shape[:2]
    if interlace:
        data = b"".join(pack_rows(a[ys::yd, xs::xd], bit_depth) for xs, ys, xd, yd in ADAM7
                        if a[ys::yd, xs::xd].size)
    else:
        data = pack_rows(a, bit_depth)
    ihdr = struct.pack(">IIBBBBB", width if width is not None else w,
                       height if height is not None else h, bit_depth, color_type, 0, 0,
                       1 if interlace else 0)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    if palette is not None:
        out += chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes())
    if trns is not None:
        out += chunk(b"tRNS", trns)
    return out + chunk(b"IDAT", zlib.compress(data, 9)) + chunk(b"IEND", b"")


def jpeg(a, **kw):
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, "JPEG", **kw)
    return buf.getvalue()


# ------------------------------------------------------------------ images


def make_images():
    """name -> file bytes. Sizes are chosen per config (see CASES)."""
    im = {}
    p = picture
    # Qwen3-VL config (factor 32, >= 65536 pixels)
    im["rgb_256x256.png"] = png(p(256, 256, 1), 2, 8)
    im["baseline_160x96.jpg"] = jpeg(p(160, 96, 2, flat=True), quality=90)
    # min/max config (factor 28, 3136..20000 pixels)
    rgba = p(84, 56, 4, 4)
    rgba[..., 3] = np.where(rgba[..., 3] < 60, 0, rgba[..., 3])  # some fully transparent
    rgba[:8, :, 3] = 255
    im["rgba_84x56.png"] = png(rgba, 6, 8)
    im["greyalpha_56x112.png"] = png(p(56, 112, 5, 2), 4, 8)
    g16 = p(112, 56, 6, 1).astype(np.uint16) * 3  # 0..765: PIL clips above 255
    im["grey16_112x56.png"] = png(g16, 0, 16)
    rgb16 = p(150, 100, 7).astype(np.uint16) * 257 + np.uint16(0x35)
    im["rgb16_150x100.png"] = png(rgb16, 2, 16)
    rgba16 = p(56, 56, 8, 4).astype(np.uint16) * 256 + 0x80
    im["rgba16_56x56.png"] = png(rgba16, 6, 16)
    rng = np.random.default_rng(9)
    pal = rng.integers(0, 256, (40, 3))
    idx = (p(200, 120, 10, 1)[..., 0].astype(int) * 45 // 256).astype(np.uint8)  # 0..44: 5 past the PLTE
    im["palette_200x120.png"] = png(idx, 3, 8, palette=pal)
    idx4 = (p(56, 84, 11, 1)[..., 0] // 16).astype(np.uint8)
    im["palette4_trns_56x84.png"] = png(idx4, 3, 4, palette=rng.integers(0, 256, (16, 3)),
                                        trns=bytes([0, 255, 128, 40, 200]))
    grey4 = (p(56, 56, 12, 1)[..., 0] // 16).astype(np.uint8)
    im["grey4_trns_56x56.png"] = png(grey4, 0, 4, trns=struct.pack(">H", 7))
    grey2 = (p(84, 56, 13, 1)[..., 0] // 64).astype(np.uint8)
    im["grey2_84x56.png"] = png(grey2, 0, 2)
    key = p(84, 84, 14)
    key[10:30, 10:30] = (12, 34, 56)
    im["rgb_trns_interlaced_84x84.png"] = png(key, 2, 8, trns=struct.pack(">HHH", 12, 34, 56),
                                              interlace=True)
    # PIL's colour keys: it compares the 8-bit pixel (16-bit grey clipped,
    # 16-bit RGB reduced to its high bytes) with the low byte of the key as
    # written; a 1-bit key is 255 when non-zero.
    g16k = p(56, 56, 20, 1).astype(np.uint16) * 2
    g16k[5:15, 5:25] = 300
    im["grey16_trns_56x56.png"] = png(g16k, 0, 16, trns=struct.pack(">H", 300))
    rgb16k = p(56, 56, 21).astype(np.uint16) * 256
    rgb16k[30:50, 10:20] = (0x1200, 0x3400, 0x5600)
    im["rgb16_trns_56x56.png"] = png(rgb16k, 2, 16, trns=struct.pack(">HHH", 0x1012, 0x2034, 0x3056))
    bits = (p(56, 56, 22, 1)[..., 0] > 128).astype(np.uint8)
    im["grey1_trns_56x56.png"] = png(bits, 0, 1, trns=struct.pack(">H", 1))
    g8k = p(56, 56, 23, 1)
    g8k[40:50, 10:40] = 77
    im["grey8_trns_56x56.png"] = png(g8k, 0, 8, trns=struct.pack(">H", 77))
    im["tall_40x1000.png"] = png(p(40, 1000, 15), 2, 8)
    im["wide_1000x8.png"] = png(p(1000, 8, 16, 1), 0, 8)
    im["progressive_120x90.jpg"] = jpeg(p(120, 90, 17, flat=True), quality=80, progressive=True,
                                        subsampling=1)
    im["grey_112x84.jpg"] = jpeg(p(112, 84, 18, 1, flat=True)[..., 0], quality=90)
    im["wide_250x1.png"] = png(p(250, 1, 19), 2, 8)  # aspect ratio 250: refused
    return im


# (image, config, caller cap or 0)
CASES = [
    ("rgb_256x256.png", "qwen3vl", 0),
    ("baseline_160x96.jpg", "qwen3vl", 0),
    ("rgb_256x256.png", "qwen3vl", 50000),
    ("rgba_84x56.png", "minmax", 0),
    ("greyalpha_56x112.png", "minmax", 0),
    ("grey16_112x56.png", "minmax", 0),
    ("rgb16_150x100.png", "minmax", 0),
    ("rgba16_56x56.png", "minmax", 0),
    ("palette_200x120.png", "minmax", 0),
    ("palette4_trns_56x84.png", "minmax", 0),
    ("grey4_trns_56x56.png", "minmax", 0),
    ("grey2_84x56.png", "minmax", 0),
    ("rgb_trns_interlaced_84x84.png", "minmax", 0),
    ("grey16_trns_56x56.png", "minmax", 0),
    ("rgb16_trns_56x56.png", "minmax", 0),
    ("grey1_trns_56x56.png", "minmax", 0),
    ("grey8_trns_56x56.png", "minmax", 0),
    ("tall_40x1000.png", "minmax", 0),
    ("wide_1000x8.png", "minmax", 0),
    ("progressive_120x90.jpg", "minmax", 0),
    ("grey_112x84.jpg", "minmax", 0),
    ("rgba_84x56.png", "rescale", 0),
    ("rgba16_56x56.png", "normalize", 0),
    ("rgba_84x56.png", "noresize", 0),
]


def make_bad(images):
    """name -> bytes of files that must fail (a missing file is the test's)."""
    bad = {}
    jpg = images["progressive_120x90.jpg"]
    pngb = images["rgba_84x56.png"]
    bad["truncated.jpg"] = jpg[:len(jpg) // 2]
    bad["truncated.png"] = pngb[:len(pngb) * 3 // 5]
    crc = bytearray(pngb)
    idat = pngb.index(b"IDAT")
    crc[idat + 4 + struct.unpack(">I", pngb[idat - 4:idat])[0]] ^= 0x55  # IDAT's stored CRC
    bad["bad_crc.png"] = bytes(crc)
    # Deflate data that zlib refuses, inside a chunk with a correct CRC.
    raw = b"\x78\x9c" + bytes([0xff] * 64)
    tiny = png(np.zeros((4, 4, 3), np.uint8), 2, 8)
    bad["bad_zlib.png"] = tiny[:tiny.index(b"IDAT") - 4] + chunk(b"IDAT", raw) + chunk(b"IEND", b"")
    bad["zero_width.png"] = png(np.zeros((4, 4, 3), np.uint8), 2, 8, width=0)
    sof = jpg.index(b"\xff\xc2")  # progressive
    zero = bytearray(jpg)
    zero[sof + 5:sof + 7] = b"\0\0"  # height 0
    bad["zero_height.jpg"] = bytes(zero)
    bad["huge_20000x20000.png"] = png(np.zeros((1, 1, 3), np.uint8), 2, 8, width=20000,
                                      height=20000)
    huge = bytearray(jpg)
    huge[sof + 5:sof + 9] = struct.pack(">HH", 20000, 20000)
    bad["huge_20000x20000.jpg"] = bytes(huge)
    bad["cmyk.jpg"] = cmyk_jpeg()
    bad["empty.png"] = b""
    bad["text.png"] = b"this is not an image\n"
    bad["image.gif"] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
    return bad


def cmyk_jpeg():
    buf = io.BytesIO()
    Image.new("CMYK", (8, 8), (10, 20, 30, 40)).save(buf, "JPEG")
    return buf.getvalue()


# ------------------------------------------------------------- references


def load_processor(cfg_dir, backend=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = {"backend": backend} if backend else {}
        return AutoImageProcessor.from_pretrained(cfg_dir, **kw)


def level_table(cfg_dir):
    """table[c][v]: the processor's own rescale/normalise of level v, on an
    instance of its own: rescale_and_normalize caches its fused mean and std
    per argument values, and 0.5 == np.float64(0.5) would share that entry
    with the reference calls. The arguments take the forms the processor's
    call gives them (lists become tuples)."""
    proc = load_processor(cfg_dir)
    levels = torch.arange(256, dtype=torch.uint8).reshape(1, 1, 1, 256).expand(1, 3, 1, 256)
    form = lambda v: tuple(v) if isinstance(v, list) else v
    if proc.do_rescale or proc.do_normalize:
        out = proc.rescale_and_normalize(levels.contiguous(), proc.do_rescale, proc.rescale_factor,
                                         proc.do_normalize, form(proc.image_mean),
                                         form(proc.image_std))
    else:
        out = levels.float()
    return out.float().reshape(3, 256).numpy()


def to_levels(pv, table, channels_per_row):
    """pixel_values -> levels, checking table[c][level] gives pv bit for bit."""
    pv = pv.astype(np.float32)
    dim = pv.shape[1]
    chan = np.arange(dim) // (dim // 3)
    levels = np.empty(pv.shape, np.uint8)
    for c in range(3):
        t = table[c]
        order = np.argsort(t, kind="stable")
        vals = pv[:, chan == c]
        pos = np.searchsorted(t[order], vals)
        lv = order[np.clip(pos, 0, 255)]
        if not np.array_equal(t[lv].view(np.uint32), vals.view(np.uint32)):
            sys.exit("a pixel value is not table[level]: the levels encoding would lose it")
        levels[:, chan == c] = lv
    return levels


def reference(proc, img, cap):
    kw = {}
    if cap:
        kw["size"] = {"shortest_edge": proc.size["shortest_edge"],
                      "longest_edge": min(proc.size["longest_edge"], cap)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = proc(images=img, return_tensors="pt", **kw)
    return out["pixel_values"].numpy(), out["image_grid_thw"].tolist()[0]


def smart_resize_table():
    """[height, width, factor, min_pixels, max_pixels, out_h, out_w] from
    transformers' smart_resize; out_h = out_w = -1 where it raises."""
    rng = np.random.default_rng(7)
    rows = [(48, 80, 32, 1024, 1 << 20), (80, 48, 32, 1024, 1 << 20),  # halves round to even
            (16, 16, 32, 1024, 4096), (1, 1, 32, 65536, 16777216), (1, 200, 28, 3136, 12845056),
            (1, 201, 28, 3136, 12845056), (200, 1, 14, 56, 1000), (4096, 4096, 32, 65536, 16777216),
            (4097, 4097, 32, 65536, 16777216), (10000, 7000, 32, 65536, 16777216),
            (3000, 4000, 28, 3136, 1003520), (1000, 40, 28, 3136, 20000), (8, 1000, 28, 3136, 20000),
            (700, 28, 28, 3136, 20000), (33, 33, 32, 1024, 1024), (100, 100, 32, 1, 500),
            (17, 4000, 32, 65536, 16777216), (20000, 20000, 32, 65536, 16777216)]
    for _ in range(60):
        h, w = (int(v) for v in np.exp(rng.uniform(0, np.log(9000), 2)))
        f = int(rng.choice([28, 32]))
        lo = int(rng.choice([3136, 65536, 1024]))
        rows.append((h, w, f, lo, int(rng.choice([lo * 4, 1003520, 16777216]))))
    table = []
    for h, w, f, lo, hi in rows:
        try:
            oh, ow = smart_resize(h, w, factor=f, min_pixels=lo, max_pixels=hi)
        except ValueError:
            oh = ow = -1
        table.append([h, w, f, lo, hi, oh, ow])
    return table


def main():
    if torch.cuda.is_available():
        torch.set_default_device("cpu")
    shutil.rmtree(DATA, ignore_errors=True)
    for sub in ("images", "bad"):
        os.makedirs(os.path.join(DATA, sub))
    images = make_images()
    for name, data in images.items():
        open(os.path.join(DATA, "images", name), "wb").write(data)
    for name, data in make_bad(images).items():
        open(os.path.join(DATA, "bad", name), "wb").write(data)

    procs, pil_procs, tables = {}, {}, {}
    for cfg, (fname, body) in CONFIGS.items():
        d = os.path.join(DATA, cfg)
        os.makedirs(d)
        with open(os.path.join(d, fname), "w") as f:
            json.dump(body, f, indent=2)
            f.write("\n")
        procs[cfg] = load_processor(d)
        pil_procs[cfg] = load_processor(d, "pil")
        assert type(procs[cfg]).__name__ == "Qwen2VLImageProcessor", type(procs[cfg])
        tables[cfg] = level_table(d)

    blob = bytearray()
    cases = []
    for name, cfg, cap in CASES:
        proc = procs[cfg]
        im = Image.open(os.path.join(DATA, "images", name))
        pv, thw = reference(proc, im, cap)
        lv = to_levels(pv, tables[cfg], 3)
        ps = proc.patch_size
        resized = [thw[1] * ps, thw[2] * ps]
        case = {"image": name, "config": cfg, "max_pixels": cap, "grid_thw": thw,
                "shape": list(pv.shape), "resized_hw": resized,
                "was_resized": resized != [im.height, im.width], "offset": len(blob)}
        blob += lv.tobytes()
        pil_pv, pil_thw = reference(pil_procs[cfg], Image.open(
            os.path.join(DATA, "images", name)), cap)
        if pil_thw == thw and case["was_resized"]:
            d = np.abs(pil_pv - pv)
            print(f"  {name} [{cfg}]: PIL backend vs torchvision: max {d.max():.4g}, "
                  f"mean {d.mean():.4g}")
        cases.append(case)
        print(f"{name} [{cfg}{', cap %d' % cap if cap else ''}]: {im.width}x{im.height} "
              f"-> {resized[1]}x{resized[0]}, grid {thw}, pixel_values {list(pv.shape)}")

    # The RGB the processor starts from, for each image that no case shows
    # unresized (an unresized case's pixel_values hold exactly these bytes).
    decoded = {}
    for name in images:
        if any(c["image"] == name and not c["was_resized"] for c in cases):
            continue
        im = Image.open(os.path.join(DATA, "images", name))
        rgb = procs["qwen3vl"].process_image(im, do_convert_rgb=True).permute(1, 2, 0).numpy()
        decoded[name] = {"offset": len(blob), "width": rgb.shape[1], "height": rgb.shape[0]}
        blob += rgb.astype(np.uint8).tobytes()
    # Plain RGB files: the only ones do_convert_rgb = false leaves as they are.
    modes = {}
    for name in images:
        im = Image.open(os.path.join(DATA, "images", name))
        modes[name] = {"mode": im.mode, "was_rgb": im.mode == "RGB" and "transparency" not in im.info}

    versions = {"transformers": transformers.__version__, "torch": torch.__version__,
                "pillow": Image.__version__, "numpy": np.__version__}
    one = lambda v: json.dumps(v, separators=(",", ":"))
    table_at = {}
    for k, t in tables.items():
        table_at[k] = len(blob)
        blob += t.astype("<f4").tobytes()
    lines = ['{"generator":"scripts/gen_vl_image_refs.py",', f'"versions":{one(versions)},',
             f'"blob_bytes":{len(blob)},', f'"tables":{one(table_at)},', '"decoded":{']
    lines += [f'{one(k)}:{one(v)}' + ("," if i + 1 < len(decoded) else "")
              for i, (k, v) in enumerate(decoded.items())]
    lines += ['},', '"images":{']
    lines += [f'{one(k)}:{one(v)}' + ("," if i + 1 < len(modes) else "")
              for i, (k, v) in enumerate(modes.items())]
    lines += ['},', f'"smart_resize":{one(smart_resize_table())},', '"cases":[']
    lines += [one(c) + ("," if i + 1 < len(cases) else "") for i, c in enumerate(cases)]
    lines += [']}']
    with open(os.path.join(DATA, "refs.json"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with lzma.open(os.path.join(DATA, "refs.bin.xz"), "wb", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write(bytes(blob))
    total = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(DATA) for fn in fns)
    print(f"{len(cases)} cases, {len(blob)} reference bytes; tests/data/vision: {total} bytes")


if __name__ == "__main__":
    main()
