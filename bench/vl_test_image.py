#!/usr/bin/env python3
"""Writes the deterministic RGB test image of the vision-language benchmark
(bench/gpu_vl.sh): 1,024 x 768 by default, smooth colour gradients with a
disc, a ring, a rectangle, diagonal stripes and a checkerboard on them, as an
8-bit RGB PNG. The same arguments write the same bytes on every machine
(numpy for the pixels, the PNG written here with zlib: no image library).

    python3 bench/vl_test_image.py OUT.png [--width 1024] [--height 768]

1,024 x 768 is a multiple of 32 (patch 16 x merge 2) on both sides and inside
Qwen3-VL's pixel bounds, so the processor does not resize it: a 48 x 64 patch
grid, 3,072 patches, 768 image tokens.
"""
import argparse
import struct
import sys
import zlib

import numpy as np


def make_image(width, height):
    """[height, width, 3] uint8."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / max(width - 1, 1), y / max(height - 1, 1)
    img = np.empty((height, width, 3), np.float64)
    img[..., 0] = 255 * u
    img[..., 1] = 255 * v
    img[..., 2] = 128 + 100 * np.sin(2 * np.pi * (u + 0.5 * v))
    # a blue disc and an orange ring
    cx, cy, r = 0.3 * width, 0.55 * height, 0.18 * min(width, height)
    d = np.hypot(x - cx, y - cy)
    img[d < r] = [30, 60, 220]
    ring = np.abs(np.hypot(x - 0.75 * width, y - 0.3 * height) - 0.12 * min(width, height))
    img[ring < 0.02 * min(width, height)] = [250, 150, 20]
    # a green rectangle with a lighter border
    rect = (x >= 0.58 * width) & (x < 0.9 * width) & (y >= 0.62 * height) & (y < 0.88 * height)
    inner = ((x >= 0.6 * width) & (x < 0.88 * width) & (y >= 0.65 * height) &
             (y < 0.85 * height))
    img[rect] = [140, 230, 140]
    img[inner] = [20, 150, 60]
    # diagonal stripes in the top-left corner
    corner = (x < 0.25 * width) & (y < 0.3 * height)
    stripes = corner & ((np.floor((x + y) / 12) % 2) == 0)
    img[stripes] = 0.5 * img[stripes] + 0.5 * np.array([255, 255, 255])
    # a checkerboard along the bottom-left
    check = (x < 0.4 * width) & (y >= 0.88 * height) & (((x // 16 + y // 16) % 2) == 0)
    img[check] = [240, 240, 240]
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def png_bytes(rgb):
    """An 8-bit RGB PNG of the [h, w, 3] uint8 array (filter 0 on every row)."""
    h, w, _ = rgb.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1).tobytes()

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def write_image(path, width=1024, height=768):
    with open(path, "wb") as f:
        f.write(png_bytes(make_image(width, height)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--height", type=int, default=768)
    a = ap.parse_args()
    if a.width < 1 or a.height < 1:
        ap.error("--width and --height: positive")
    write_image(a.out, a.width, a.height)
    return 0


if __name__ == "__main__":
    sys.exit(main())
