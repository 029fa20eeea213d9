#!/usr/bin/env python3
"""Tokenizer test corpus and its Hugging Face reference ids.

Generates a deterministic (seeded) corpus covering what the tokenizer must get
right -- prose and code in many scripts, emoji sequences, combining marks in NFC
and NFD, numbers of every length, whitespace runs, contractions in every case,
special-token strings, URLs, invalid UTF-8 -- encodes every line with Hugging
Face `tokenizers` and decodes it with `transformers`, and writes:

  tests/data/tokenizer/corpus.jsonl.xz  one JSON object per line:
      {"cat": category, "text": str}  or  {"cat": ..., "hex": bytes as hex}
      (hex for lines that are not valid UTF-8; Hugging Face encodes
      bytes.decode("utf-8", errors="replace") of them),
      "ids": tokenizers' Tokenizer.encode(text, add_special_tokens=False).ids,
      "replaced": for hex lines, the text Hugging Face was given,
      "decoded": transformers' decode(ids, skip_special_tokens=False), only
                 where it differs from the text (always for hex lines),
      "decoded_skip": the same with skip_special_tokens=True, only where it
                 differs from "decoded".
  tests/data/tokenizer/cases.json  {"cases": edge cases (empty, 100k spaces,
      only special tokens, a 1 MB text built from the corpus, ...) with their
      ids, or for long ones the count and an FNV-1a 64 hash of the ids;
      "api": vocabulary size, role ids and token <-> id pairs from Hugging Face;
      "tiny": texts, ids and decodes for the two small tokenizers below}.
  tests/data/tokenizer/tiny/tokenizer.json and tiny-ignore-merges/tokenizer.json:
      small byte-level BPE files (merges in the older "a b" form) whose added
      tokens use every option (single_word, lstrip, rstrip, normalized,
      special) and, in the second, ignore_merges.

Run from the repository root (needs tokenizers and transformers):
    python3 scripts/gen_tokenizer_refs.py
The benchmark (bench/tokenizer_bench.py) imports make_text() from here.
"""
import argparse
import json
import lzma
import os
import random
import shutil
import sys
import tempfile
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
SEED = 20240531

# ---------------------------------------------------------------- word lists

EN_NOUNS = """time person year way day thing man world life hand part child eye woman place work week case
point government company number group problem fact river mountain computer language engine kernel
buffer table window garden teacher student question answer market village island library museum
theory experiment signal network memory processor ocean forest winter summer morning evening
story letter friend family doctor music picture history science doctor station bridge castle""".split()
EN_VERBS = """be have do say get make go know take see come think look want give use find tell ask work seem
feel try leave call build write read run compile parse encode decode measure carry open close
follow explain remember believe bring happen stand lose pay meet include continue learn change lead""".split()
EN_ADJS = """good new first last long great little own other old right big high different small large next
early young important few public bad same able quiet bright dark careful strange simple quick
slow heavy light ancient modern curious patient gentle brave""".split()
EN_ADVS = "quickly slowly carefully often never always sometimes rarely quietly suddenly finally nearly".split()
EN_NAMES = "Alice Bob Carol Dave Eve Mallory Oscar Peggy Trent Victor Walter Zoë Chloé José Søren Łukasz".split()
EN_CONTR = ["I'm", "you're", "he's", "she's", "it's", "we're", "they're", "I've", "you've", "we've",
            "they've", "I'll", "you'll", "he'll", "we'll", "they'll", "I'd", "you'd", "she'd", "we'd",
            "don't", "doesn't", "didn't", "can't", "won't", "isn't", "aren't", "wasn't", "shouldn't",
            "couldn't", "wouldn't", "let's", "that's", "what's", "there's", "who'd", "y'all", "o'clock",
            "rock 'n' roll", "'90s", "the dog's bone", "James' book"]

ZH_WORDS = """我们 你们 他们 今天 明天 昨天 时间 世界 中国 北京 上海 学习 工作 生活 朋友 老师 学生 电脑 手机
网络 数据 模型 语言 文字 问题 答案 发展 经济 社会 文化 历史 科学 技术 研究 方法 系统 程序 代码 计算
天气 春天 夏天 秋天 冬天 山水 城市 农村 医院 学校 图书馆 博物馆 火车站 飞机 汽车 自行车 喜欢 认为
知道 觉得 希望 需要 可以 应该 已经 正在 非常 特别 一起 因为 所以 但是 如果 虽然 而且 还是 或者 的 了
是 在 有 和 就 不 也 都 很 到 说 要 去 会 着 没有 看 好 自己 这 那 一个 什么 怎么 为什么 人工智能 机器学习
深度学习 自然语言处理 分词器 编码 解码""".split()
ZH_PUNCT = ["，", "。", "！", "？", "、", "；", "：", "“", "”", "《", "》", "（", "）", "……", "——"]

JA_WORDS = """私 あなた 彼 彼女 今日 明日 昨日 時間 世界 日本 東京 大阪 学校 先生 学生 仕事 電車 会社 天気
コンピューター プログラム データ ネットワーク ソフトウェア トークナイザー ラーメン コーヒー テレビ
ありがとう こんにちは さようなら おはよう すみません 食べる 飲む 行く 来る 見る 書く 読む 話す 聞く
美しい 新しい 古い 大きい 小さい 静か 元気 便利 桜 富士山 東京タワー 漢字 ひらがな カタカナ""".split()
JA_PARTICLES = ["は", "が", "を", "に", "で", "と", "も", "の", "から", "まで", "へ", "や"]
JA_ENDS = ["です。", "ます。", "でした。", "ました。", "だ。", "ですか？", "ません。", "！", "。"]

KO_WORDS = """안녕하세요 감사합니다 사랑 한국 서울 부산 학교 선생님 학생 회사 컴퓨터 프로그램 데이터 언어 세계
오늘 내일 어제 시간 사람 친구 가족 음식 김치 비빔밥 날씨 봄 여름 가을 겨울 책 영화 음악 바다 산""".split()
KO_PARTICLES = ["은", "는", "이", "가", "을", "를", "에", "에서", "와", "과", "도", "의", "로"]
KO_ENDS = ["입니다.", "합니다.", "해요.", "했어요.", "있어요.", "없어요?", "좋아요!", "이다."]

AR_WORDS = """السلام عليكم مرحبا كتاب مدرسة معلم طالب لغة عربية حاسوب برنامج بيانات شبكة عالم يوم ليلة
شمس قمر بحر جبل مدينة قرية بيت سيارة طعام ماء قهوة شكرا جميل كبير صغير جديد قديم الذكاء الاصطناعي""".split()
AR_VOWELED = ["كَتَبَ", "العَرَبِيَّةُ", "مُحَمَّدٌ", "السَّلَامُ", "عَلَيْكُمْ", "قُرْآن", "مَدْرَسَةٌ", "آمِن", "إِنْسَان"]

RU_WORDS = """привет мир человек время год день работа жизнь рука часть ребёнок глаз женщина место слово дом
город страна язык компьютер программа данные сеть модель наука история музыка книга учитель ученик
хороший новый большой маленький старый русский Москва Санкт-Петербург Ёжик съешь ещё этих мягких
французских булок Київ Україна їжак ґанок єдність Београд ћирилица џем""".split()

EMOJI_BASE = ["😀", "😂", "🥲", "😍", "🤔", "🙃", "😭", "👍", "👋", "🙏", "💪", "🎉", "🔥", "✨", "🚀",
              "🌍", "🍕", "☕", "⚽", "🐱", "🐶", "🦊", "🌸", "💻", "📱", "❤", "⭐", "✅", "❌", "⚠"]
EMOJI_TONEABLE = ["👍", "👋", "🙏", "💪", "👏", "🤝", "✌", "👌", "🧑", "👩", "👨", "🧒", "👶"]
SKIN = ["\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"]
ZWJ = "\u200d"
EMOJI_ZWJ = ["👨‍👩‍👧‍👦", "👩‍❤️‍👨", "👩‍💻", "🧑‍🚀", "🏳️‍🌈", "🏴‍☠️", "👁️‍🗨️", "🐕‍🦺", "❤️‍🔥", "🧑‍🤝‍🧑",
             "👩🏽‍💻", "👨🏿‍🍳", "🧑🏻‍🎓", "👩🏾‍🤝‍👩🏼", "🤦🏻‍♂️", "🏃🏽‍♀️"]
EMOJI_FLAGS = ["🇯🇵", "🇺🇸", "🇩🇪", "🇫🇷", "🇨🇳", "🇰🇷", "🇧🇷", "🇺🇦", "🇪🇺", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
EMOJI_KEYCAPS = ["1️⃣", "2️⃣", "#️⃣", "*️⃣", "0⃣", "©️", "®️", "™️", "☺️", "☺︎"]

NFC_WORDS = ["café", "naïve", "résumé", "coöperate", "jalapeño", "Ångström", "façade", "Dvořák",
             "Łódź", "Ærø", "São Paulo", "Bogotá", "Zürich", "Kraków", "Crème brûlée", "Ελληνικά",
             "ἀρχὴ", "Tiếng Việt", "Nguyễn", "phở", "đường", "Hà Nội", "ǅemal", "Ǖǘǚǜ", "ḍḥḷṃṇṛṣṭ"]
DEVANAGARI = ["नमस्ते", "हिन्दी", "क़लम", "ज़रूर", "फ़ोन", "संस्कृत", "भारत", "कृष्ण"]
OTHER_SCRIPTS = ["שלום עולם", "עִבְרִית", "ไทย ภาษาไทย สวัสดีครับ", "ქართული ენა", "Հայերեն լեզու",
                 "ગુજરાતી", "தமிழ் மொழி", "ಕನ್ನಡ", "മലയാളം", "සිංහල", "ລາວ", "မြန်မာ", "ខ្មែរ",
                 "አማርኛ", "ᏣᎳᎩ", "ᚠᚢᚦᚨᚱᚲ", "𐌰𐌱𐌲", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝕳𝖊𝖑𝖑𝖔", "ℌ𝔢𝔩𝔩𝔬"]

SPECIAL_FALLBACK = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

URL_HOSTS = ["example.com", "www.example.org", "docs.python.org", "github.com", "en.wikipedia.org",
             "例え.jp", "xn--fsqu00a.xn--0zwm56d", "localhost:8080", "127.0.0.1", "[::1]:443"]
URL_PATHS = ["", "/", "/index.html", "/wiki/Byte_pair_encoding", "/a/b/c.tar.gz", "/search",
             "/用户/资料", "/%E4%BD%A0%E5%A5%BD", "/path with spaces/"]


# ---------------------------------------------------------------- generators

def pick(rng, seq, k):
    return [rng.choice(seq) for _ in range(k)]


def en_sentence(rng):
    subj = rng.choice(EN_NAMES + ["The " + rng.choice(EN_ADJS) + " " + rng.choice(EN_NOUNS),
                                  rng.choice(EN_CONTR).capitalize()])
    words = [subj, rng.choice(EN_VERBS) + rng.choice(["s", "ed", "", "ing"]), "the",
             rng.choice(EN_ADJS), rng.choice(EN_NOUNS)]
    if rng.random() < 0.5:
        words += [rng.choice(["and", "but", "because", "while", "so"]), rng.choice(EN_CONTR),
                  rng.choice(EN_ADVS), rng.choice(EN_VERBS)]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), str(rng.randint(0, 10 ** rng.randint(1, 7))))
    s = " ".join(words) + rng.choice([".", "!", "?", "...", ";", ":", ",", " -", "."])
    r = rng.random()
    if r < 0.1:
        s = s.upper()
    elif r < 0.15:
        s = s.title()
    elif r < 0.2:
        s = s.lower()
    return s


def gen_english(rng):
    n = rng.randint(1, 6)
    sents = [en_sentence(rng) for _ in range(n)]
    if rng.random() < 0.2:
        sents.insert(0, '"' + sents.pop(0) + '"')
    return rng.choice([" ", "  ", "\n", " "]).join(sents)


def ident(rng):
    parts = pick(rng, ["user", "id", "count", "data", "buf", "len", "node", "tree", "value", "i", "x",
                       "tmp", "result", "token", "cache"], rng.randint(1, 3))
    return rng.choice(["_".join(parts), "".join(p.capitalize() for p in parts),
                       parts[0] + "".join(p.capitalize() for p in parts[1:])])


def gen_code(rng):
    a, b, c = ident(rng), ident(rng), ident(rng)
    n = rng.randint(0, 100000)
    ind = rng.choice(["    ", "  ", "\t", "        "])
    snippets = [
        f"def {a}({b}, {c}=None):\n{ind}\"\"\"Return the {b}.\"\"\"\n{ind}if {c} is None:\n{ind}{ind}return {n}\n"
        f"{ind}return [{b}[i] ** 2 for i in range({c}) if i % 3 != 0]\n",
        f"int {a}(const char *{b}, size_t {c})\n{{\n{ind}for (size_t i = 0; i < {c}; i++)\n{ind}{ind}"
        f"if ({b}[i] == '\\n') return -1;\n{ind}return 0x{n:X};\n}}\n",
        f"const {a} = async ({b}) => {{\n{ind}const res = await fetch(`/api/${{{b}}}`);\n{ind}"
        f"return res.json() ?? {{ {c}: {n} }};\n}};\n",
        f"fn {a}(&mut self, {b}: &[u8]) -> Result<usize, Error> {{\n{ind}let {c} = {b}.len();\n{ind}"
        f"Ok({c} + {n}_usize)\n}}\n",
        f"SELECT {a}, COUNT(*) AS n FROM {b} WHERE {c} >= {n} GROUP BY {a} ORDER BY n DESC;",
        f"<div class=\"{a}\" id='{b}'>\n{ind}<a href=\"/{c}?q={n}&amp;x=1\">{a} &lt;{n}&gt;</a>\n</div>",
        f"{{\"{a}\": {n}, \"{b}\": [1, 2.5, -3e-7, true, null], \"{c}\": \"\\u00e9\\n\"}}",
        f"#!/bin/sh\nset -eu\nfor f in *.{a}; do\n{ind}echo \"$f\" | grep -E '^[0-9]{{{rng.randint(1, 9)}}}$' "
        f"> /dev/null && rm -f \"$f\"\ndone\n",
        f"{a}:\n  {b}: {n}\n  {c}:\n    - \"x\"\n    - 'y'\n",
        f"    // TODO({a}): handle {b} >= {n} && {c} <= -1 || !{a}\n",
        f"x = {n} ; y = x<<2 ; z = (x|y)&~0xFF ; w = x!=y ; v = x==y ; u = x->y ; t = x=>y",
        f"#include <stdio.h>\n#define {a.upper()} {n}\nstatic int {b}[{rng.randint(1, 64)}] = {{0}};",
        f"{a}  =  {b}   +   {c}    \n{ind}\n\n\n{ind}pass  ",
    ]
    code = rng.choice(snippets)
    if rng.random() < 0.25:
        code = code.replace("\n", "\r\n")
    if rng.random() < 0.2:
        code = code.replace("\n", "   \n")
    return code


def gen_chinese(rng):
    out = []
    for _ in range(rng.randint(1, 4)):
        words = pick(rng, ZH_WORDS, rng.randint(3, 18))
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), rng.choice([str(rng.randint(1, 2025)), "AI", "GPU", "Python"]))
        out.append("".join(words) + rng.choice(ZH_PUNCT))
    sep = rng.choice(["", "", " ", "\n"])
    return sep.join(out)


def gen_japanese(rng):
    out = []
    for _ in range(rng.randint(1, 3)):
        s = ""
        for _ in range(rng.randint(1, 5)):
            s += rng.choice(JA_WORDS) + rng.choice(JA_PARTICLES)
        s += rng.choice(JA_WORDS) + rng.choice(JA_ENDS)
        if rng.random() < 0.2:
            s = "「" + s + "」"
        out.append(s)
    return rng.choice(["", "\n", "　"]).join(out)


def gen_korean(rng):
    out = []
    for _ in range(rng.randint(1, 3)):
        words = [rng.choice(KO_WORDS) + rng.choice(KO_PARTICLES) for _ in range(rng.randint(1, 5))]
        out.append(" ".join(words) + " " + rng.choice(KO_WORDS) + rng.choice(KO_ENDS))
    s = " ".join(out)
    if rng.random() < 0.25:
        s = unicodedata.normalize("NFD", s)  # conjoining jamo, recomposed by NFC
    return s


def gen_arabic(rng):
    words = pick(rng, AR_WORDS, rng.randint(3, 12))
    if rng.random() < 0.4:
        words.insert(rng.randrange(len(words)), rng.choice(AR_VOWELED))
    if rng.random() < 0.3:
        digits = "٠١٢٣٤٥٦٧٨٩"
        words.append("".join(rng.choice(digits) for _ in range(rng.randint(1, 6))))
    if rng.random() < 0.2:
        words.append(str(rng.randint(1, 9999)))
    s = " ".join(words) + rng.choice(["،", "؟", ".", "!", "؛"])
    if rng.random() < 0.2:
        s = unicodedata.normalize("NFD", s)
    return s


def gen_cyrillic(rng):
    words = pick(rng, RU_WORDS, rng.randint(3, 14))
    s = " ".join(words).capitalize() + rng.choice([".", "!", "?", "…", ","])
    r = rng.random()
    if r < 0.15:
        s = s.upper()
    elif r < 0.25:
        s = unicodedata.normalize("NFD", s)  # й, ё, ї decomposed
    return s


def gen_emoji(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if r < 0.25:
            parts.append(rng.choice(EMOJI_BASE))
        elif r < 0.45:
            parts.append(rng.choice(EMOJI_TONEABLE) + rng.choice(SKIN))
        elif r < 0.7:
            parts.append(rng.choice(EMOJI_ZWJ))
        elif r < 0.85:
            parts.append(rng.choice(EMOJI_FLAGS))
        else:
            parts.append(rng.choice(EMOJI_KEYCAPS))
        if rng.random() < 0.4:
            parts.append(rng.choice([" ", "", " " + rng.choice(EN_NOUNS) + " ", "!", "\n", "。"]))
    return "".join(parts)


def gen_combining(rng):
    r = rng.random()
    words = pick(rng, NFC_WORDS, rng.randint(1, 6))
    s = " ".join(words)
    if r < 0.35:
        return unicodedata.normalize("NFD", s)
    if r < 0.55:
        return s
    if r < 0.65:
        return " ".join(pick(rng, DEVANAGARI, rng.randint(1, 5)))
    if r < 0.75:
        return " ".join(pick(rng, OTHER_SCRIPTS, rng.randint(1, 3)))
    if r < 0.85:
        # Marks in non-canonical order (NFC reorders them), stacked marks, a lone mark.
        base = rng.choice("aeiouAEIOUnsz")
        marks = "".join(rng.choice("\u0301\u0300\u0308\u0323\u0327\u030c\u0304\u0331\u20d7\u0338")
                        for _ in range(rng.randint(1, 4)))
        return rng.choice(["", "\u0301", " \u0308"]) + base + marks + " x" + marks + " =\u0338 >\u0338"
    # Singletons and compatibility characters (NFC maps the first, keeps the second).
    return rng.choice(["\u212b \u2126 \u212a", "\ufb01le \ufb02ow", "x\u00b2 + y\u00b3", "\uff21\uff22\uff23",
                       "\u2460\u2461", "\u00bd \u2153", "\u1e9b\u0323", "\u0958\u0959", "\u2000\u2001 x"]) + \
        " " + rng.choice(words)


def gen_number(rng):
    r = rng.random()
    if r < 0.35:
        length = rng.randint(1, 60)
        return "".join(rng.choice("0123456789") for _ in range(length))
    if r < 0.5:
        return f"{rng.randint(-10**9, 10**9):,}" + rng.choice(["", ".00", " USD", "%", "€"])
    if r < 0.6:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 12)}f} {rng.uniform(0, 1):.3e} {rng.random()}"
    if r < 0.7:
        return rng.choice([f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                           f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
                           f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}",
                           f"+1 ({rng.randint(200, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
                           f"0x{rng.getrandbits(64):016x}", f"{rng.randint(1, 99)}/{rng.randint(1, 99)}"])
    if r < 0.85:
        digits = rng.choice(["٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "⁰¹²³⁴⁵⁶⁷⁸⁹", "๐๑๒๓๔๕๖๗๘๙",
                             "ⅠⅡⅢⅣⅤⅥⅦⅧⅨⅩ", "①②③④⑤⑥⑦⑧⑨⑩", "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗", "〇一二三四五六七八九"])
        return "".join(rng.choice(digits) for _ in range(rng.randint(1, 20)))
    words = []
    for _ in range(rng.randint(2, 8)):
        words.append(rng.choice([str(rng.randint(0, 10 ** rng.randint(1, 25))), rng.choice(EN_NOUNS),
                                 "x" + str(rng.randint(0, 999)), str(rng.randint(0, 99)) + "th"]))
    return " ".join(words)


WS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r", "\r\n", "\r\n\r\n", " \n", "\n ", " \t ",
      "\u00a0", "\u3000", "\u2009", "\u2028", "\u2029", "\u0085", "\u000b", "\u000c", "\u180e", "\u200b",
      "\u202f", "\u205f", "\u1680", " " * 17, "\t" * 5, "\n" * 7, " \r\n \r\n"]


def gen_whitespace(rng):
    parts = []
    for _ in range(rng.randint(1, 10)):
        parts.append(rng.choice(WS))
        if rng.random() < 0.7:
            parts.append(rng.choice(EN_NOUNS + ZH_WORDS[:20] + ["!", "1", "'s", "'ll", "-", "x"]))
    s = "".join(parts)
    r = rng.random()
    if r < 0.2:
        s += " " * rng.randint(1, 8)  # trailing spaces
    elif r < 0.3:
        s = " " * rng.randint(1, 8) + s
    elif r < 0.35:
        s = "".join(rng.choice(WS) for _ in range(rng.randint(1, 6)))  # only whitespace
    return s


def case_variants(s):
    out = [""]
    for ch in s:
        out = [o + c for o in out for c in {ch.lower(), ch.upper()}]
    return sorted(out)


CONTRACTION_FORMS = [v for suf in ["s", "t", "re", "ve", "m", "ll", "d"] for v in case_variants(suf)]


def gen_contraction(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        word = rng.choice(["I", "you", "HE", "She", "it", "WE", "They", "that", "what", "x", "1", "", " ",
                           "\u0441\u043b\u043e\u0432\u043e", "日本", "é"])
        apos = rng.choice(["'", "'", "'", "\u2019", "''", "`"])
        parts.append(word + apos + rng.choice(CONTRACTION_FORMS + ["\u017f", "S\u0301", "lL", "Lx"]))
    return rng.choice([" ", "", "\n", " - "]).join(parts)


def gen_special(rng, specials):
    r = rng.random()
    if r < 0.3:
        turns = []
        for _ in range(rng.randint(1, 3)):
            role = rng.choice(["system", "user", "assistant"])
            body = rng.choice([en_sentence(rng), gen_chinese(rng), "<think>\n" + en_sentence(rng) + "\n</think>\n\n"
                               + en_sentence(rng)])
            turns.append(f"<|im_start|>{role}\n{body}<|im_end|>")
        return "\n".join(turns) + rng.choice(["", "\n", "\n<|im_start|>assistant\n"])
    if r < 0.6:
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(specials))
            parts.append(rng.choice(["", " ", "  ", "\n", "x", "abc", "日本", "'s", "😀", "\u0301"]))
        return "".join(parts)
    tok = rng.choice(specials)
    mangled = rng.choice([tok[:-1], tok[1:], tok.upper(), tok.replace("|", "| "), "<" + tok + ">",
                          tok + tok[:-2], tok[:len(tok) // 2] + " " + tok[len(tok) // 2:]])
    return rng.choice([en_sentence(rng) + mangled, mangled + en_sentence(rng),
                       "word" + tok + "word", " " + tok + " ", tok + "\n" + mangled])


def gen_url(rng):
    scheme = rng.choice(["https://", "http://", "ftp://", "file:///", "", "mailto:"])
    host = rng.choice(URL_HOSTS)
    path = rng.choice(URL_PATHS)
    q = rng.choice(["", f"?q={rng.choice(EN_NOUNS)}&page={rng.randint(1, 99)}", "#section-2",
                    f"?utm_source=x&id={rng.getrandbits(32):x}"])
    url = scheme + host + path + q
    return rng.choice([url, f"See {url} for details.", f"[{rng.choice(EN_NOUNS)}]({url})", f"<{url}>",
                       f"user.name+tag{rng.randint(1, 99)}@{host.split(':')[0]}",
                       f"C:\\Users\\{rng.choice(EN_NAMES)}\\Documents\\file ({rng.randint(1, 9)}).txt",
                       f"/usr/local/lib/python3.{rng.randint(6, 13)}/site-packages/{ident(rng)}.py:{rng.randint(1, 999)}"])


# Letters and numbers that Unicode assigned after 14.0 (the orin regex shim),
# White_Space edge cases, private use, noncharacters and unassigned points.
NEW_UNICODE = ["\u1c89\u1c8a", "\ua7cb\ua7cd", "\U000105c0\U000105c1 \U000105f3", "\U00010d4a\U00010d50",
               "\U00010d40\U00010d49", "\U00011390\U00011391", "\U000116d0\U000116e3", "\U00011f04\U00011f05",
               "\U00011f50\U00011f59", "\U00013460\U00013461", "\U00016100\U00016101", "\U00016130\U00016139",
               "\U00016d40\U00016d41", "\U00016d70\U00016d79", "\U0001ccf0\U0001ccf9", "\U0001d2c0\U0001d2d3",
               "\U0001e030\U0001e031", "\U0001e4d0\U0001e4f0", "\U0001e5d0\U0001e5f1", "\U0002ebf0\U0002ee5d",
               "\U00031350\U000323af", "\U0002b739", "\ue000\uf8ff", "\ufffe\uffff", "\U0010ffff",
               "\U000e0001", "\u0378\u0379", "\u180e", "\u0085", "\u00ad", "\ufeff", "\u2066\u2069"]


def gen_new_unicode(rng):
    parts = []
    for _ in range(rng.randint(1, 5)):
        parts.append(rng.choice(NEW_UNICODE))
        parts.append(rng.choice(["", " ", "a", "1", " x", "'s", "\n", "  "]))
    return "".join(parts)


INVALID = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2", b"\xdf", b"\xe0\x80\x80", b"\xe0\xa0",
           b"\xe4\xbd", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xef\xbf", b"\xf0\x80\x80\x80", b"\xf0\x9f\x98",
           b"\xf0\x9f", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff",
           b"\xfe\xff", b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xe2\x82\x28", b"\xf0\x28\x8c\xbc"]


def gen_invalid(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.5:
            parts.append(rng.choice(INVALID))
        else:
            parts.append(rng.choice([en_sentence(rng), gen_chinese(rng), "é", "😀", "<|im_end|>", " ",
                                     "\n", "'s"]).encode("utf-8"))
    return b"".join(parts)


def gen_mixed(rng):
    gens = [gen_english, gen_code, gen_chinese, gen_japanese, gen_korean, gen_arabic, gen_cyrillic,
            gen_emoji, gen_combining, gen_number, gen_whitespace, gen_contraction, gen_url]
    return rng.choice(["", " ", "\n", "\r\n", "\t"]).join(rng.choice(gens)(rng) for _ in range(rng.randint(2, 4)))


def gen_long(rng, i):
    kind = i % 6
    if kind == 0:
        return "".join(pick(rng, [w for w in ZH_WORDS if len(w) > 1], 3000))  # one \p{L}+ run
    if kind == 1:
        return "".join(rng.choice("0123456789") for _ in range(4000))
    if kind == 2:
        return " " * rng.randint(3000, 9000) + "end" + "\t \n" * 500
    if kind == 3:
        return "\n\n".join(" ".join(en_sentence(rng) for _ in range(40)) for _ in range(5))
    if kind == 4:
        return "".join(rng.choice(EMOJI_ZWJ + EMOJI_FLAGS) for _ in range(2000))
    return rng.choice("abcdefghijklmnopqrstuvwxyz") * rng.randint(2000, 8000)


CATEGORIES = [  # (name, generator, lines)
    ("english", gen_english, 330), ("code", gen_code, 250), ("chinese", gen_chinese, 200),
    ("japanese", gen_japanese, 150), ("korean", gen_korean, 120), ("arabic", gen_arabic, 120),
    ("cyrillic", gen_cyrillic, 150), ("emoji", gen_emoji, 150), ("combining", gen_combining, 170),
    ("numbers", gen_number, 200), ("whitespace", gen_whitespace, 170), ("contractions", gen_contraction, 110),
    ("special", None, 160), ("urls", gen_url, 100), ("mixed", gen_mixed, 220), ("new_unicode", gen_new_unicode, 40),
    ("invalid_utf8", gen_invalid, 120), ("long", None, 12),
]


def make_records(specials, seed=SEED):
    """The corpus: a list of (category, bytes, is_valid_utf8)."""
    rng = random.Random(seed)
    records = []
    # Exhaustive small cases first: every contraction spelling, every added token alone.
    for form in CONTRACTION_FORMS:
        records.append(("contractions", f"it'{form} IT'{form} x '{form}".encode()))
    for tok in specials:
        records.append(("special", tok.encode()))
    for n in range(1, 41):
        records.append(("numbers", "".join(str((i * 7 + n) % 10) for i in range(n)).encode()))
    for name, gen, count in CATEGORIES:
        for i in range(count):
            if name == "special":
                text = gen_special(rng, specials)
            elif name == "long":
                text = gen_long(rng, i)
            else:
                text = gen(rng)
            data = text if isinstance(text, bytes) else text.encode("utf-8")
            records.append((name, data))
    return [(cat, data, is_valid(data)) for cat, data in records]


def is_valid(data):
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def make_text(target_bytes, seed):
    """A mixed-language text of about target_bytes (valid UTF-8, for the benchmark)."""
    rng = random.Random(seed)
    weights = [(gen_english, 8), (gen_code, 4), (gen_chinese, 4), (gen_japanese, 2), (gen_korean, 1),
               (gen_arabic, 1), (gen_cyrillic, 2), (gen_emoji, 1), (gen_combining, 1), (gen_number, 2),
               (gen_whitespace, 1), (gen_url, 1), (gen_mixed, 2)]
    gens = [g for g, w in weights for _ in range(w)]
    out, size = [], 0
    while size < target_bytes:
        line = rng.choice(gens)(rng)
        out.append(line)
        size += len(line.encode("utf-8")) + 1
    return "\n".join(out)


# ---------------------------------------------------------------- tiny tokenizers

def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


TINY_MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n"),
               ("Ġ", "w"), ("o", "r"), ("Ġw", "or"), ("Ġwor", "d"), ("l", "l"), ("Ġ", "Ġ"), ("ĠĠ", "ĠĠ"),
               ("w", "or"), ("wor", "d"), ("Ã", "©"), ("c", "a"), ("ca", "f"), ("caf", "Ã©"), ("1", "2"),
               ("Ġ", "c"), ("Ġc", "a"), ("a", "b"), ("e", "l"), ("el", "l"), ("ell", "o"), ("h", "ello")]

TINY_ADDED = [  # content, special, single_word, lstrip, rstrip, normalized
    ("<mask>", True, False, True, False, False),
    ("[R]", False, False, False, True, False),
    ("<both>", True, False, True, True, False),
    ("wd", False, True, False, False, False),
    ("café", False, False, False, False, True),
    ("\u2126hm", False, False, False, False, True),
    ("<sp>", True, False, False, False, False),
    ("<sp>x", True, False, False, False, False),
    ("ab c", False, False, False, False, False),
    ("\n\n", False, False, False, False, False),
]

TINY_TEXTS = ["hello world", "a <mask> b", "a    <mask>b", "<mask>", "x[R]   y", "x [R]\t\n y", "a <both>  b",
              "  <both>  ", "wd", "a wd b", "swd", "wds", "wd!", "(wd)", "wdwd", "wd wd", "a\u3000wd\u00a0b",
              "café", "cafe\u0301", "un café\u0301", "\u2126hm \u03a9hm", "<sp>", "<sp>x", "<sp>xy", "<sp> x",
              "ab c", "ab cd", "x\n\ny", "\n\n\n", "é", "e\u0301", "the world 12 ab", "",
              "<mask><mask>", "[R][R] [R]", " <mask> [R] <both> word café <sp>x ab c\n\n",
              "日本 語", "naïve café résumé", "xwd wd.", "_wd", "wd_", "1wd", "wd1", "éwd", "wdé", "e\u0301wd",
              "\u0301wd", "wd\u200d", "Ⓐwd", "a\u3000<mask>", "[R]\u2028\u3000x", "the word café"]


def tiny_tokenizer(pattern, ignore_merges=False):
    b2u = bytes_to_unicode()
    vocab = {}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    for a, b in TINY_MERGES:
        vocab.setdefault(a + b, len(vocab))
    if ignore_merges:
        # Whole words that the merges cannot reach: found only through ignore_merges.
        for word in [" world", " the", "hello", " café", "日本"]:
            vocab.setdefault("".join(b2u[x] for x in word.encode("utf-8")), len(vocab))
    added = []
    next_id = len(vocab)
    for content, special, single_word, lstrip, rstrip, normalized in TINY_ADDED:
        # Hugging Face gives an added token that is already in the vocabulary that
        # token's id, and the others the next free ids: the file must agree.
        if content in vocab:
            token_id = vocab[content]
        else:
            token_id, next_id = next_id, next_id + 1
        added.append({"id": token_id, "content": content, "single_word": single_word,
                      "lstrip": lstrip, "rstrip": rstrip, "normalized": normalized, "special": special})
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab,
                  "merges": [a + " " + b for a, b in TINY_MERGES]},
    }


def write_tiny(out_dir, pattern):
    import tokenizers
    results = {}
    for name, ignore in [("tiny", False), ("tiny-ignore-merges", True)]:
        spec = tiny_tokenizer(pattern, ignore)
        text = json.dumps(spec, ensure_ascii=False, indent=1)
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        with open(os.path.join(out_dir, name, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
        tk = tokenizers.Tokenizer.from_str(text)
        rows = []
        for t in TINY_TEXTS:
            ids = tk.encode(t, add_special_tokens=False).ids
            rows.append({"text": t, "ids": ids, "decoded": tk.decode(ids, skip_special_tokens=False),
                         "decoded_skip": tk.decode(ids, skip_special_tokens=True)})
        contents = [a["content"] for a in spec["added_tokens"]]
        probes = contents + [unicodedata.normalize("NFC", c) for c in contents] + ["Ġt", "wor", "zz"]
        results[name] = {
            "rows": rows,
            "token_to_id": [{"token": t, "id": tk.token_to_id(t)} for t in dict.fromkeys(probes)],
            "id_to_token": [{"id": a["id"], "token": tk.id_to_token(a["id"])} for a in spec["added_tokens"]],
        }
    return results


def api_facts(tk, hf):
    probe = ["<|im_end|>", "<|endoftext|>", "<think>", "</think>", "Ġthe", "hello", "Hello", "ĠĠĠĠ", "!",
             "Ċ", "ä½łå¥½", "<tool_call>", "no-such-token-xyz"]
    template = hf.chat_template.encode("utf-8")
    return {
        "vocab_size": tk.get_vocab_size(with_added_tokens=True),
        "bos_id": hf.bos_token_id, "eos_id": hf.eos_token_id, "pad_id": hf.pad_token_id,
        "unk_id": hf.unk_token_id, "eos_token": hf.eos_token, "pad_token": hf.pad_token,
        "chat_template_bytes": len(template), "chat_template_fnv1a64": fnv1a64_bytes(template),
        "tokens": [{"token": t, "id": tk.token_to_id(t)} for t in probe],
        "ids": [{"id": i, "token": tk.id_to_token(i)} for i in [0, 1, 220, 198, 151643, 151645, 151668]],
        "added": [{"content": t.content, "special": t.special, "single_word": t.single_word,
                   "lstrip": t.lstrip, "rstrip": t.rstrip, "normalized": t.normalized}
                  for _, t in sorted(tk.get_added_tokens_decoder().items())],
    }


# ---------------------------------------------------------------- references

def fnv1a64_bytes(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def fnv1a64_ids(ids):
    """FNV-1a 64 over the ids as little-endian int32."""
    return fnv1a64_bytes(b"".join(int(i).to_bytes(4, "little", signed=True) for i in ids))


def corpus_text(records, target):
    """The 1 MB case: valid corpus texts in order, cycling, joined by \\n, until >= target bytes."""
    out = bytearray()
    while len(out) < target:
        for _, data, valid in records:
            if not valid:
                continue
            if out:
                out += b"\n"
            out += data
            if len(out) >= target:
                break
    return out.decode("utf-8")


def make_cases(tk, specials, records):
    cases = [
        {"name": "empty", "text": ""},
        {"name": "spaces_100k", "repeat": " ", "times": 100000},
        {"name": "space_tab_40k", "repeat": " \t", "times": 20000},
        {"name": "newlines_50k", "repeat": "\n", "times": 50000},
        {"name": "crlf_20k", "repeat": "\r\n", "times": 20000},
        {"name": "letters_100k", "repeat": "a", "times": 100000},
        {"name": "digits_50k", "repeat": "7", "times": 50000},
        {"name": "cjk_126k", "repeat": "中文字符测试", "times": 7000},
        {"name": "emoji_zwj_5k", "repeat": "👩🏽‍💻", "times": 5000},
        {"name": "only_special", "text": "".join(specials)},
        {"name": "only_special_spaced", "text": " ".join(specials)},
        {"name": "special_repeat_10k", "repeat": "<|im_start|><|im_end|>", "times": 10000},
        {"name": "corpus_1mb", "corpus_bytes": 1000000},
    ]
    for c in cases:
        if "text" in c:
            text = c["text"]
        elif "repeat" in c:
            text = c["repeat"] * c["times"]
        else:
            text = corpus_text(records, c["corpus_bytes"])
            c["bytes"] = len(text.encode("utf-8"))
        ids = tk.encode(text, add_special_tokens=False).ids
        if len(ids) <= 4000:
            c["ids"] = ids
        else:
            c["count"] = len(ids)
            c["fnv1a64"] = fnv1a64_ids(ids)
    return cases


def load_tokenizers(tok_dir):
    import tokenizers
    from transformers import AutoTokenizer
    tmp = tempfile.mkdtemp(prefix="orin-tok-")
    xz = os.path.join(tok_dir, "tokenizer.json.xz")
    if os.path.exists(xz):
        with lzma.open(xz) as f, open(os.path.join(tmp, "tokenizer.json"), "wb") as g:
            shutil.copyfileobj(f, g)
    else:
        shutil.copy(os.path.join(tok_dir, "tokenizer.json"), tmp)
    shutil.copy(os.path.join(tok_dir, "tokenizer_config.json"), tmp)
    tk = tokenizers.Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(tmp)
    with open(os.path.join(tmp, "tokenizer.json"), encoding="utf-8") as f:
        spec = json.load(f)
    specials = [t["content"] for t in spec["added_tokens"]]
    pattern = spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    shutil.rmtree(tmp)
    return tk, hf, specials, pattern


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default=os.path.join(DATA, "qwen3"))
    ap.add_argument("--out", default=DATA)
    args = ap.parse_args()

    tk, hf, specials, pattern = load_tokenizers(args.tokenizer)
    from tokenizers.normalizers import NFC
    nfc = NFC()
    records = make_records(specials)
    lines = []
    for cat, data, valid in records:
        text = data.decode("utf-8", errors="replace")
        ids = tk.encode(text, add_special_tokens=False).ids
        decoded = hf.decode(ids, skip_special_tokens=False)
        decoded_skip = hf.decode(ids, skip_special_tokens=True)
        assert decoded == tk.decode(ids, skip_special_tokens=False)
        if not any(s in text for s in specials):
            assert decoded == nfc.normalize_str(text), (cat, text)
        rec = {"cat": cat}
        rec["text" if valid else "hex"] = text if valid else data.hex()
        if not valid:
            rec["replaced"] = text
        rec["ids"] = ids
        if decoded != text or not valid:
            rec["decoded"] = decoded
        if decoded_skip != decoded:
            rec["decoded_skip"] = decoded_skip
        lines.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
    body = ("\n".join(lines) + "\n").encode("utf-8")
    with open(os.path.join(args.out, "corpus.jsonl.xz"), "wb") as f:
        f.write(lzma.compress(body, preset=9 | lzma.PRESET_EXTREME))
    cases = {"cases": make_cases(tk, specials, records), "api": api_facts(tk, hf),
             "tiny": write_tiny(args.out, pattern)}
    with open(os.path.join(args.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_bytes = sum(len(d) for _, d, _ in records)
    print(f"{len(records)} lines, {n_bytes} bytes of text, {sum(1 for r in records if not r[2])} invalid; "
          f"corpus.jsonl.xz and cases.json written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
