#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ from the test data.

Run from anywhere: python3 tests/fuzz/make_seeds.py. The seeds are committed;
the fuzzers' own findings go to build-fuzz/, never here. Every seed is small
(the largest is the tiny tokenizer.json, 7 KB)."""
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def read(*parts, mode="rb"):
    with open(os.path.join(*parts), mode) as f:
        return f.read()


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None, pad=0):
    """tensors: [(name, dtype, shape, nbytes)] laid out in order."""
    hdr, off = {}, 0
    for name, dtype, shape, nbytes in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    if metadata is not None:
        hdr["__metadata__"] = metadata
    text = json.dumps(hdr, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(text)) + text + bytes(range(256)) * (off // 256) + bytes(off % 256)


def config_seeds():
    put("config", "orin.ini", read(ROOT, "etc", "orin.ini"))
    put("config", "small.ini", "[model]\npath = models/qwen3\ndtype = bf16\n"
        "[runtime]\ndevice = cuda:1\nmax_context = 0\nthreads = 4\n"
        "[generate]\nprompt = Hi\\nthere\\; ok \\\\ \\t\ntop_p = 0.95 ; comment\n"
        "temperature = 0\nseed = 18446744073709551615\n[score]\npath = decode\n")
    put("config", "plugins.ini", "\xef\xbb\xbf# bom and comments\n[plugins]\ndir = ../lib\n"
        "load = a.so, b.so\n[attention]\nbackend = fa1\nstrict = true\n")
    put("config", "errors.ini", "[generate]\nmax_tokenz = 3\n[modle]\npath = x\nno equals here\n")
    put("config", "bench.ini", "[bench]\nprompt_tokens = 8\ngen_tokens = 4\nrepeats = 1\n"
        "[generate]\nmin_p = 0.05\nrepetition_penalty = 1.1\npresence_penalty = -0.5\n"
        "chat = false\ninteractive = yes\nstream = off\n")


def safetensors_seeds():
    put("safetensors", "python_writer.safetensors", read(DATA, "loader", "python_writer.safetensors"))
    put("safetensors", "two.safetensors", safetensors(
        [("a", "F32", [2, 3], 24), ("b", "BF16", [4], 8)], {"format": "pt"}))
    put("safetensors", "dtypes.safetensors", safetensors(
        [("f16", "F16", [3], 6), ("i64", "I64", [1], 8), ("bool", "BOOL", [2, 1], 2),
         ("scalar", "F32", [], 4), ("empty", "U8", [0, 5], 0), ("f8", "F8_E4M3", [4], 4)]))
    put("safetensors", "padded.safetensors", safetensors([("x", "I32", [1, 1, 1, 2], 8)], pad=7))
    shard = read(DATA, "models", "qwen3-tiny", "model-00003-of-00004.safetensors")
    hdr_len = struct.unpack("<Q", shard[:8])[0]
    put("safetensors", "qwen3_header_only.safetensors", shard[:8 + hdr_len])


def st_index_seeds():
    wm = {"a.weight": "model-00001-of-00002.safetensors",
          "b.weight": "model-00001-of-00002.safetensors",
          "c.weight": "model-00002-of-00002.safetensors"}
    put("st_index", "valid.json", json.dumps({"metadata": {"total_size": 24}, "weight_map": wm}))
    put("st_index", "missing_tensor.json", json.dumps(
        {"weight_map": dict(wm, **{"d.weight": "model-00002-of-00002.safetensors"})}))
    put("st_index", "escape.json", json.dumps({"weight_map": {"a.weight": "../x.safetensors"}}))
    put("st_index", "qwen3_tiny.json", read(DATA, "models", "qwen3-tiny", "model.safetensors.index.json"))


def model_config_seeds():
    for m in ("qwen2-tiny", "qwen3-tiny", "qwen2-tiny-awq", "qwen3-tiny-awq", "qwen3vl-tiny",
              "qwen3vl-tiny-tied"):
        put("model_config", m + ".json", read(DATA, "models", m, "config.json"))
    for f in ("qwen2_tf_config.json", "qwen3_tf_config.json"):
        put("model_config", f, read(DATA, "loader", f))
    put("model_config", "minimal.json", json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": None,
        "vocab_size": 10, "eos_token_id": [1, 2], "rope_scaling": {"type": "default"},
        "head_dim": None, "torch_dtype": "float16"}))


def generation_config_seeds():
    for m in ("qwen2-tiny", "qwen3-tiny"):
        put("generation_config", m + ".json", read(DATA, "models", m, "generation_config.json"))
    put("generation_config", "full.json", json.dumps({
        "do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0,
        "repetition_penalty": 1.05, "eos_token_id": [151645, 151643], "bos_token_id": 151643}))


def tokenizer_json_seeds():
    tiny = read(DATA, "tokenizer", "tiny", "tokenizer.json")
    put("tokenizer_json", "tiny.json", tiny)
    put("tokenizer_json", "tiny_ignore_merges.json",
        read(DATA, "tokenizer", "tiny-ignore-merges", "tokenizer.json"))
    cfg = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": {"content": "<|endoftext|>"},
           "unk_token": None, "chat_template": "{{ messages[0].content }}"}
    put("tokenizer_json", "tiny_with_config.bin", tiny + b"\0" + json.dumps(cfg).encode())
    t = json.loads(tiny)
    t["normalizer"] = None
    t["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in t["model"]["merges"]]
    put("tokenizer_json", "tiny_no_nfc_pair_merges.json", json.dumps(t))


def tokenizer_encode_seeds():
    put("tokenizer_encode", "short.txt", read(DATA, "models", "text_short.txt"))
    put("tokenizer_encode", "specials.txt",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOK<|endoftext|>")
    put("tokenizer_encode", "unicode.txt",
        "Caf\u00e9 cafe\u0301 \u00c5ngstr\u00f6m \u4f60\u597d\uff0c\u4e16\u754c \U0001F600\U0001F468\u200d\U0001F469 "
        "\u0915\u094d\u0937 \ud55c\uad6d\uc5b4 123456789 3.14159 don't I'LL   \t\r\n\n  x")
    put("tokenizer_encode", "invalid_utf8.bin", b"ab\xff\xfe\xc3(\xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 ok\x00end")
    put("tokenizer_encode", "code.txt", "def f(x):\n    return x**2  # square\n\n\nif __name__ == '__main__':\n\tprint(f(3))\n")


def chat_template_seeds():
    for name, path in (("qwen3.jinja", ("models", "qwen3-tiny", "tokenizer_config.json")),
                       ("qwen2.5.jinja", ("chat", "qwen2.5_tokenizer_config.json"))):
        put("chat_template", name, json.loads(read(DATA, *path))["chat_template"])
    cases = json.loads(read(DATA, "chat", "jinja_refs.json"))["cases"]
    picked = [c for c in cases if len(c["template"]) > 40][:12]
    for c in picked:
        put("chat_template", "ref_" + c["name"] + ".jinja", c["template"])
    put("chat_template", "features.jinja",
        "{% macro m(a, b=2) %}{{ a ~ b }}{% endmacro %}{% set ns = namespace(x=0) %}"
        "{% for msg in messages if msg.role != 'tool' %}{{ loop.index }}:{{ msg.role|upper }}"
        "{% set ns.x = ns.x + 1 %}{{ m(msg.content|length) }}{% if not loop.last %},{% endif %}"
        "{% else %}none{% endfor %}{{ ns.x }}{{ tools|tojson if tools is defined }}"
        "{{ (messages|last).content[1:3] }}{{ {'a': [1, 2.5, none, true]}|tojson(indent=2) }}"
        "{% raw %}{{ raw }}{% endraw %}{{- ' x ' -}}{# c #}{{ 'a,b'.split(',')|join('-') }}"
        "{{ range(3)|list }}{{ '%s-%d'|format('a', 3) }}{{ messages[0].content.startswith('Y') }}")


def chat_render_seeds():
    # flags byte, then messages split by 0x00: role byte (bit 2: reasoning after 0x01,
    # bit 3: content NULL), then the text.
    put("chat_render", "qwen3_basic.bin", b"\x02" + b"\x02You are terse.\0\x00Hello!\0")
    put("chat_render", "qwen3_think.bin",
        b"\x06\x00What is 2+2?\0\x05The answer is 4.\x01Let me add.\0\x00And 3+3?\0")
    put("chat_render", "qwen3_tool.bin",
        b"\x0a\x00Weather?\0\x01<tool_call>\n{\"name\": \"w\"}\n</tool_call>\0\x03{\"t\": 21}\0\x03more\0")
    put("chat_render", "qwen25.bin", b"\x03\x00Hi \xf0\x9f\x98\x80\0\x01Hello.\0\x00<|im_end|> inject\0")
    put("chat_render", "qwen3_history.bin",
        b"\x02\x00q1\0\x01<think>\nr1\n</think>\n\na1\0\x00q2\0\x05a2\x01r2\0\x00q3\0\x09\0")


def image_decode_seeds():
    # The small test images (every PNG colour type, both JPEG kinds) and a few bad ones.
    vision = os.path.join(DATA, "vision")
    for sub in ("images", "bad"):
        for name in sorted(os.listdir(os.path.join(vision, sub))):
            data = read(vision, sub, name)
            if 0 < len(data) <= 6000:
                put("image_decode", f"{sub}_{name}", data)


def image_config_seeds():
    vision = os.path.join(DATA, "vision")
    for cfg in ("qwen3vl", "minmax", "normalize", "noresize"):
        put("image_config", f"{cfg}.json", read(vision, cfg, "preprocessor_config.json"))
    put("image_config", "nested.json", read(vision, "rescale", "processor_config.json"))
    put("image_config", "edges.json", json.dumps({
        "size": {"shortest_edge": 1, "longest_edge": 2}, "min_pixels": None, "image_mean": 0.5,
        "image_std": [1], "resample": 3, "do_convert_rgb": False, "rescale_factor": 2.5e-3}))


if __name__ == "__main__":
    for f in (config_seeds, safetensors_seeds, st_index_seeds, model_config_seeds,
              generation_config_seeds, tokenizer_json_seeds, tokenizer_encode_seeds,
              chat_template_seeds, chat_render_seeds, image_decode_seeds, image_config_seeds):
        f()
    for t in sorted(os.listdir(OUT)):
        files = os.listdir(os.path.join(OUT, t))
        size = sum(os.path.getsize(os.path.join(OUT, t, f)) for f in files)
        print(f"{t}: {len(files)} seeds, {size} bytes")
