#!/usr/bin/env python3
"""Reference renderings for orin's chat template interpreter (tests/chat).

Truth comes from Hugging Face transformers, offline:

* tests/data/chat/qwen_refs.json: conversations rendered with the real Qwen3
  and Qwen2.5-Instruct templates through tokenizer.apply_chat_template(...,
  tokenize=False), on tokenizers loaded from the repo's own files
  (tests/data/tokenizer/qwen3 and tests/data/chat/qwen2.5_tokenizer_config.json
  with the tiny Qwen2 model's tokenizer.json).
* tests/data/chat/jinja_refs.json: small templates exercising one Jinja
  feature each, rendered by transformers' render_jinja_template (the same
  sandboxed environment: trim_blocks, lstrip_blocks, tojson, namespace,
  raise_exception). Cases where jinja raises are recorded as errors.

Usage: python3 scripts/gen_chat_refs.py   (from anywhere; writes into the repo)
"""
import json
import lzma
import os
import shutil
import sys
import tempfile

import jinja2
import transformers
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import render_jinja_template

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
OUT = os.path.join(DATA, "chat")

# Template name -> (tokenizer_config.json relative to tests/data, tokenizer.json source)
TEMPLATES = {
    "qwen3": ("tokenizer/qwen3/tokenizer_config.json", "tokenizer/qwen3/tokenizer.json.xz"),
    "qwen2.5": ("chat/qwen2.5_tokenizer_config.json", "models/qwen2-tiny/tokenizer.json"),
}


def load_tokenizer(name, tmp):
    config, vocab = TEMPLATES[name]
    d = os.path.join(tmp, name)
    os.makedirs(d)
    shutil.copy(os.path.join(DATA, config), os.path.join(d, "tokenizer_config.json"))
    src = os.path.join(DATA, vocab)
    if src.endswith(".xz"):
        with lzma.open(src, "rb") as f, open(os.path.join(d, "tokenizer.json"), "wb") as g:
            shutil.copyfileobj(f, g)
    else:
        shutil.copy(src, os.path.join(d, "tokenizer.json"))
    tok = AutoTokenizer.from_pretrained(d)
    with open(os.path.join(DATA, config), encoding="utf-8") as f:
        assert tok.chat_template == json.load(f)["chat_template"]
    return tok


def U(content):
    return {"role": "user", "content": content}


def A(content, reasoning=None):
    m = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    return m


def S(content):
    return {"role": "system", "content": content}


UNICODE = "Héllo wörld — 你好，世界 🌍 ÷ ∑ \u00a0nbsp\u200bzwsp ﬁ Ω"
JINJA_LOOKING = "What does {{ x }} print? And {% if %}{% endif %}, {# not a comment #}, {%- raw -%} ?"
NEWLINES = "  \nline one\n\n\tline two  \r\n  indented\n\n"
QUOTES = "He said \"hi\" and 'bye' \\ back\\slash \\n not a newline"

# (name, messages, add_generation_prompt, enable_thinking or None)
COMMON = [
    ("single_user", [U("Hello!")], True, None),
    ("system_user", [S("You are a terse assistant."), U("What is 2+2?")], True, None),
    ("multi_turn", [U("Hi"), A("Hello! How can I help?"), U("Tell me a joke.")], True, None),
    ("multi_turn_system",
     [S("Be brief."), U("One"), A("1"), U("Two"), A("2"), U("Three")], True, None),
    ("system_not_first", [U("a"), S("late system"), U("b")], True, None),
    ("unicode", [S(UNICODE), U(UNICODE), A(UNICODE), U("ok " + UNICODE)], True, None),
    ("jinja_looking_text", [S(JINJA_LOOKING), U(JINJA_LOOKING), A(JINJA_LOOKING), U("{{")], True,
     None),
    ("empty_content", [U(""), A(""), U("")], True, None),
    ("empty_system", [S(""), U("hi")], True, None),
    ("newlines", [S(NEWLINES), U(NEWLINES), A(NEWLINES), U(NEWLINES)], True, None),
    ("quotes_backslashes", [U(QUOTES), A(QUOTES), U(QUOTES)], True, None),
    ("special_tokens_in_text", [U("<|im_end|>\n<|im_start|>assistant\nfake"), A("<|endoftext|>"),
                                U("x")], True, None),
    ("no_generation_prompt", [U("Hi"), A("Hello")], False, None),
    ("no_generation_prompt_user_last", [S("sys"), U("Hi")], False, None),
    ("tool_role", [U("What is the weather?"), A("Let me check."),
                   {"role": "tool", "content": "{\"temp\": 21}"},
                   {"role": "tool", "content": "sunny"}, U("Thanks")], True, None),
    ("long_conversation",
     [S("sys")] + [m for i in range(20) for m in (U(f"question {i}"), A(f"answer {i}"))]
     + [U("last")], True, None),
]

THINK = "<think>\nLet me think.\nStep 2.\n</think>\n\nThe answer is 4."
QWEN3 = [
    ("think_stripped_from_history", [U("2+2?"), A(THINK), U("And 3+3?")], True, None),
    ("think_stripped_two_turns",
     [S("sys"), U("q1"), A("<think>\nr1\n</think>\n\na1"), U("q2"),
      A("<think>\n\nr2\n\n</think>\n\n\na2"), U("q3")], True, None),
    ("think_kept_after_last_query", [U("2+2?"), A(THINK)], False, None),
    ("think_without_open_tag", [U("q"), A("just reasoning</think>answer"), U("q2")], True, None),
    ("think_unclosed", [U("q"), A("<think>never closed"), U("q2")], True, None),
    ("enable_thinking_false", [U("Hello!")], True, False),
    ("enable_thinking_true", [U("Hello!")], True, True),
    ("enable_thinking_false_multi", [S("sys"), U("q1"), A(THINK), U("q2")], True, False),
    ("enable_thinking_false_no_prompt", [U("q1")], False, False),
    ("reasoning_content_field",
     [U("q1"), A("a1", reasoning="hidden r1"), U("q2"), A("a2", reasoning="\nvisible r2\n")], False,
     None),
    ("reasoning_content_empty", [U("q1"), A("a1", reasoning="")], False, None),
    ("tool_response_as_user",
     [U("Find it"), A("<think>\nplan\n</think>\n\ncalling"),
      U("<tool_response>\nresult\n</tool_response>"), A("<think>\nnext\n</think>\n\ndone")],
     False, None),
    ("tool_messages_multi_step",
     [U("Find it"), A("<think>\nplan\n</think>\n\ncalling"), {"role": "tool", "content": "r1"},
      A("<think>\nmore\n</think>\n\nagain"), {"role": "tool", "content": "r2"}], True, None),
]

# Contexts only the JSON API can express: tools and tool calls.
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city — «unicode»",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer", "minimum": 1}},
                   "required": ["city"]}}}]
TOOL_CALLS = [{"type": "function", "function": {"name": "get_weather",
                                                "arguments": {"city": "Paris", "days": 2}}}]
JSON_ONLY = [
    ("tools_system", {"messages": [S("You help."), U("Weather in Paris?")], "tools": TOOLS,
                      "add_generation_prompt": True}),
    ("tools_default_system", {"messages": [U("Weather in Paris?")], "tools": TOOLS,
                              "add_generation_prompt": True}),
    ("tool_calls", {"messages": [U("Weather?"), {"role": "assistant", "content": "",
                                                 "tool_calls": TOOL_CALLS},
                                 {"role": "tool", "content": "{\"t\": 21.5}"}],
                    "tools": TOOLS, "add_generation_prompt": True}),
    ("tool_calls_with_content", {"messages": [U("Weather?"),
                                              {"role": "assistant", "content": "Checking.",
                                               "tool_calls": TOOL_CALLS + TOOL_CALLS}],
                                 "add_generation_prompt": False}),
    ("none_values_dropped", {"messages": [U("hi"), {"role": "assistant", "content": "yo",
                                                    "tool_calls": None,
                                                    "reasoning_content": None}],
                             "add_generation_prompt": True}),
]


def qwen_refs(tmp):
    cases = []
    for name in TEMPLATES:
        tok = load_tokenizer(name, tmp)
        convs = COMMON + (QWEN3 if name == "qwen3" else [])
        for case, msgs, agp, think in convs:
            kwargs = {} if think is None else {"enable_thinking": think}
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=agp,
                                           **kwargs)
            cases.append({"template": name, "name": case, "messages": msgs,
                          "add_generation_prompt": agp, "enable_thinking": think,
                          "expected": text})
        for case, ctx in JSON_ONLY:
            ctx = json.loads(json.dumps(ctx))
            msgs = ctx.pop("messages")
            text = tok.apply_chat_template(msgs, tokenize=False, **ctx)
            cases.append({"template": name, "name": case, "context": {"messages": msgs, **ctx},
                          "expected": text})
    return cases


# ---- single-feature templates ----

D = {"a": 1, "b": [1, 2, "x"], "c": {"k": "v", "n": None}, "s": "Hello World", "f": 1.5,
     "t": True, "e": "", "u": "ünï €", "neg": -7}

JINJA = [
    # whitespace control: trim_blocks, lstrip_blocks, -, +
    ("ws_trim_blocks", "a\n{% if true %}\nb\n{% endif %}\nc", {}),
    ("ws_lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc\n", {}),
    ("ws_lstrip_tabs", "x\n\t \t{% if true %}y{% endif %}\n\t{% set q = 1 %}\nz", {}),
    ("ws_lstrip_not_after_text", "x  {% if true %}y{% endif %}  z\n", {}),
    ("ws_lstrip_first_line", "   {% if true %}y{% endif %}", {}),
    ("ws_plus_disables_lstrip", "a\n    {%+ if true %}b{% endif %}\n", {}),
    ("ws_plus_end_keeps_newline", "{% if true +%}\nkept\n{% endif %}", {}),
    ("ws_minus", "a   \n\n  {%- if true -%}  \n\n  b  {%- endif -%}  \n c", {}),
    ("ws_var_minus", "a  {{- 1 -}}  b\n{{ 2 }}\n  {{ 3 }}\n", {}),
    ("ws_var_no_trim", "{{ 1 }}\n{{ 2 }}\n", {}),
    ("ws_comment", "a\n  {# comment #}\nb {#- c -#}   c\n{# x #}d", {}),
    ("ws_comment_multiline", "a{# line1\nline2 #}\nb", {}),
    ("ws_raw", "x\n  {% raw %}{{ not parsed }} {% if %}{% endraw %}\ny", {}),
    ("ws_raw_minus", "x  {%- raw -%}  a  {%- endraw -%}  y", {}),
    ("trailing_newline_dropped", "abc\n", {}),
    ("trailing_two_newlines", "abc\n\n", {}),
    ("crlf_source", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("cr_source", "a\r{{ 1 }}\rb", {}),
    ("ws_nested_blocks",
     "{%- for i in [1, 2] %}\n    {%- if i == 1 %}\n        one\n    {%- else %}\n        other\n"
     "    {%- endif %}\n{%- endfor %}\n", {}),
    ("ws_unicode_space_minus", "a\u3000\u00a0{%- if true %}b{% endif %}", {}),
    # literals and printing
    ("print_values", "{{ none }}|{{ true }}|{{ false }}|{{ 42 }}|{{ -3 }}|{{ [1, 'a', none] }}|"
     "{{ {'k': 'v', 'n': 1} }}|{{ (1,) }}|{{ (1, 'b') }}|{{ () }}|{{ [] }}", {}),
    ("print_floats", "{{ 1.0 }} {{ 0.1 }} {{ 1e-5 }} {{ 1e16 }} {{ 1e15 }} {{ 123456789.125 }} "
     "{{ 2.5e-3 }} {{ 1.5 * 2 }} {{ 10 / 4 }} {{ 1 / 3 }} {{ 0.1 + 0.2 }} {{ -0.0 }}", {}),
    ("print_context", "{{ a }} {{ b }} {{ c }} {{ s }} {{ f }} {{ t }} [{{ e }}] {{ u }} {{ neg }}",
     D),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\\\"f' }}|{{ \"q'\" }}|{{ '\\x41\\u00e9\\U0001F600' }}|"
     "{{ '\\101' }}|{{ '\\d' }}|{{ 'a' 'b' \"c\" }}", {}),
    ("repr_strings", "{{ ['it\\'s', 'say \"x\"', 'both \\' \"', 'tab\\t', 'uni é', '\\x00\\x7f'] }}",
     {}),
    ("integers", "{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }}", {}),
    # operators
    ("arith", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 7 // 2 }} "
     "{{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }} "
     "{{ true + 1 }} {{ 3 - 5 }}", {}),
    ("concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ undefined_name }}", {}),
    ("plus_strings_lists", "{{ 'ab' + 'cd' }} {{ [1] + [2, 3] }} {{ 'ab' * 3 }} {{ [0] * 2 }} "
     "{{ 2 * 'x' }}", {}),
    ("compare", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != '1' }} "
     "{{ [1, 2] == [1, 2] }} {{ none == none }} {{ 2 >= 2 }} {{ 'é' > 'z' }} {{ [1, 2] < [1, 3] }}",
     {}),
    ("in_operator", "{{ 'x' in 'xyz' }} {{ 'q' not in 'xyz' }} {{ 2 in [1, 2] }} {{ 'k' in c }} "
     "{{ 'zz' in c }} {{ '' in 'abc' }} {{ none in [none] }}", D),
    ("logic", "{{ 0 or 'b' }} {{ 'a' and 0 }} {{ not 1 == 2 }} {{ not none }} {{ [] or {} or 'x' }} "
     "{{ 1 and 2 and 3 }} {{ none or false }}", {}),
    ("inline_if", "{{ 'y' if t else 'n' }} {{ 'y' if e else 'n' }} [{{ 'y' if e }}] "
     "{{ 1 if false else 2 if false else 3 }}", D),
    ("unary", "{{ -a }} {{ +a }} {{ - -a }} {{ -f }} {{ -1 | abs }}", D),
    # undefined
    ("undefined_print", "[{{ nothing }}] [{{ c.missing }}] [{{ b[10] }}] [{{ c['zz'] }}]", D),
    ("undefined_tests", "{{ nothing is defined }} {{ nothing is undefined }} {{ c.n is none }} "
     "{{ c.missing is defined }} {{ nothing | length }} {{ nothing | default('dflt') }} "
     "{{ e | default('dflt') }} {{ e | default('dflt', true) }} {{ nothing == nothing }}", D),
    ("undefined_iterate", "{% for x in nothing %}x{% else %}empty{% endfor %}", {}),
    # control flow
    ("if_elif_else", "{% for i in range(4) %}{% if i == 0 %}zero{% elif i == 1 %}one"
     "{% elif i == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("loop_vars", "{% for x in ['a', 'b', 'c'] %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}"
     "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
     "{{ loop.previtem if not loop.first }}{{ loop.nextitem if not loop.last }}"
     "{{ loop.cycle('o', 'e') }};{% endfor %}", {}),
    ("loop_else", "{% for x in [] %}x{% else %}none{% endfor %}|{% for x in [1] %}{{ x }}"
     "{% else %}none{% endfor %}", {}),
    ("loop_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}"
     "{% endfor %}", {}),
    ("loop_unpack", "{% for k, v in c.items() %}{{ k }}={{ v }};{% endfor %}"
     "{% for (a, b) in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}", D),
    ("loop_dict_and_string", "{% for k in c %}{{ k }}{% endfor %}|{% for ch in 'héy' %}[{{ ch }}]"
     "{% endfor %}", D),
    ("loop_nested", "{% for i in [1, 2] %}{% for j in [1, 2] %}{{ loop.index }}{{ i * j }}"
     "{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("loop_scope", "{% set x = 1 %}{% for i in [1, 2, 3] %}{{ x }}{% set x = x + 10 %}{{ x }},"
     "{% endfor %}{{ x }}", {}),
    ("loop_scope_if", "{% for i in [1, 2] %}{% if i == 1 %}{% set y = 5 %}{% endif %}[{{ y }}]"
     "{% endfor %}", {}),
    ("if_scope_leaks", "{% if true %}{% set z = 3 %}{% endif %}{{ z }}", {}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for i in range(5) %}{% set ns.n = ns.n + i %}"
     "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }} {{ ns.missing is defined }}", {}),
    ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
     "{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("set_block", "{% set x %}\n  inner {{ 1 + 1 }}\n{% endset %}[{{ x }}]", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
     "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }} [{{ greet() }}]", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}"
     "{% endif %}{% endmacro %}{{ fact(4) }}", {}),
    ("with_block", "{% set x = 1 %}{% with x = 2, y = x %}{{ x }}{{ y }}{% endwith %}{{ x }}", {}),
    ("generation_block", "a{% generation %}b{{ 1 }}{% endgeneration %}c", {}),
    # subscripts and slices
    ("slices", "{{ b[::-1] }} {{ b[1:] }} {{ b[:-1] }} {{ b[::2] }} {{ b[-1] }} {{ b[-3] }} "
     "{{ b[5:1:-1] }} {{ b[-100:100] }} {{ s[::-1] }} {{ s[1:4] }} {{ u[1:3] }} {{ u[-1] }} "
     "{{ s[::3] }} {{ s[10:2:-3] }} {{ (1, 2, 3)[1:] }}", D),
    ("attr_and_item", "{{ c.k }} {{ c['k'] }} {{ b.0 }} {{ b[0] }} {{ c.get('k') }} "
     "{{ c.get('zz', 'dflt') }} {{ c.get('zz') }}", D),
    ("dict_methods", "{{ c.keys() | list }} {{ c.values() | list }} {{ c.items() | list }}", D),
    # string methods
    ("str_split", "{{ 'a,b,,c'.split(',') }} {{ '  a  b \\n c '.split() }} {{ 'a,b,c'.split(',', 1) }}"
     " {{ 'a,b,c'.rsplit(',', 1) }} {{ ''.split(',') }} {{ ''.split() }} {{ 'x</think>y</think>z'"
     ".split('</think>') }} {{ ' a b '.split(None, 1) }} {{ ' a b c '.rsplit(None, 1) }}", {}),
    ("str_strip", "[{{ '  x  '.strip() }}][{{ '\\n\\nx\\n'.lstrip('\\n') }}][{{ 'xxhixx'.strip('x') }}]"
     "[{{ 'abcba'.rstrip('ab') }}][{{ '\\u3000 x \\u00a0'.strip() }}][{{ ''.strip() }}]"
     "[{{ 'éaé'.strip('é') }}]", {}),
    ("str_affix", "{{ s.startswith('Hell') }} {{ s.endswith('World') }} {{ s.startswith(('x', 'H')) }}"
     " {{ s.endswith('') }} {{ s.startswith('World', 6) }} {{ 'ab'.startswith('abc') }}", D),
    ("str_case", "{{ s.upper() }} {{ s.lower() }} {{ 'hello wORLD'.title() }} "
     "{{ 'hELLO'.capitalize() }} {{ 'éa'.upper() }} {{ \"it's o'neil\".title() }}", D),
    ("str_find_count", "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('zz') }} {{ s.count('l') }} "
     "{{ u.find('€') }} {{ ''.count('') }}", D),
    ("str_replace_join", "{{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 2) }} {{ 'ab'.replace('', '-') }}"
     " {{ '-'.join(['a', 'b', 'c']) }} {{ ', '.join(c) }}", D),
    ("str_misc", "{{ 'a\\nb\\r\\nc\\n'.splitlines() }} {{ '123'.isdigit() }} {{ 'ab1'.isalpha() }} "
     "{{ 'ABC'.isupper() }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ '{} and {}'.format(1, 'b') }}"
     " {{ '{0}{0}{name}'.format('x', name='y') }}", {}),
    # filters
    ("filter_length", "{{ b | length }} {{ s | length }} {{ u | length }} {{ c | count }} "
     "{{ '' | length }}", D),
    ("filter_tojson", "{{ c | tojson }} {{ b | tojson }} {{ u | tojson }} {{ 'a\"b\\\\c\\n\\t\\x01' | tojson }}"
     " {{ f | tojson }} {{ none | tojson }} {{ {'z': 1, 'a': [1, {'b': none}]} | tojson }}", D),
    ("filter_tojson_args", "{{ {'z': 1, 'a': [1, 2], 'e': []} | tojson(indent=2) }}\n"
     "{{ {'z': 1, 'a': 2} | tojson(sort_keys=true) }}\n{{ 'é' | tojson(ensure_ascii=true) }}\n"
     "{{ {'a': [1, {}]} | tojson(separators=(',', ':')) }}", {}),
    ("filter_strings", "[{{ '  x ' | trim }}][{{ 'xxhixx' | trim('x') }}] {{ s | upper }} {{ s | lower }} "
     "{{ 'hello-world foo(bar' | title }} {{ 'hELLO' | capitalize }} {{ s | replace('o', '0') }} "
     "{{ 'a <b> & \"c\" \\'d\\'' | escape }} {{ 'one two  three' | wordcount }} {{ s | reverse }}", D),
    ("filter_lists", "{{ b | first }} {{ b | last }} {{ b | join('-') }} {{ b | reverse | list }} "
     "{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} "
     "{{ [1, 2, 3] | sum }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [1, 2, 1, 3] | unique | list }}"
     " {{ 'abc' | list }} {{ [] | first is defined }}", D),
    ("filter_select", "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 0, 2] | select | list }} "
     "{{ [1, 2, 3, 4] | reject('even') | list }} {{ [1, 5, 10] | select('gt', 3) | list }}", {}),
    ("filter_attr", "{% set ms = [{'role': 'user', 'n': 2}, {'role': 'sys', 'n': 1}, {'role': 'user', 'n': 3}] %}"
     "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='n') | list }} "
     "{{ ms | rejectattr('role', 'eq', 'user') | list | length }} {{ ms | map(attribute='role') | join(',') }}"
     " {{ ms | sort(attribute='n') | map(attribute='n') | list }} {{ ms | sum(attribute='n') }} "
     "{{ ms | selectattr('n') | list | length }} {{ ['a', 'b'] | map('upper') | list }}", {}),
    ("filter_numbers", "{{ '42' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '3.5' | float }}"
     " {{ 2 | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 2.1 | round(method='ceil') }}"
     " {{ '0x1f' | int(base=16) }}", {}),
    ("filter_dicts", "{{ c | items | list }} {{ {'b': 1, 'a': 2} | dictsort }} "
     "{{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }}", D),
    ("filter_indent", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|"
     "{{ 'a\\n\\nb' | indent(first=true, blank=true) }}|{{ 'x\\ny' | indent('> ') }}", {}),
    ("filter_string_safe", "{{ 12 | string }} {{ [1] | string }} {{ '<b>' | safe }}", {}),
    ("filter_chain_args", "{{ b | map('string') | join(', ') | upper }}", D),
    # tests
    ("tests", "{{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ 'a' is string }} "
     "{{ c is mapping }} {{ b is iterable }} {{ b is sequence }} {{ t is boolean }} {{ t is true }} "
     "{{ t is false }} {{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}"
     " {{ 2 is in [1, 2] }} {{ 'a' is eq 'a' }} {{ 2 is gt 1 }} {{ 'abc' is lower }} {{ none is none }}"
     " {{ 1 is not none }} {{ none is sameas none }} {{ range is callable }}", D),
    # globals
    ("globals", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} "
     "{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}", {}),
    # messages handling like apply_chat_template
    ("messages_normalized", "{% for m in messages %}{{ m | tojson }}\n{% endfor %}",
     {"messages": [{"role": "user", "content": "a", "tool_calls": None},
                   {"role": "assistant", "content": "b", "reasoning_content": "r"},
                   {"role": "assistant", "content": "c", "thinking": "t"}]}),
    ("add_generation_prompt_default", "{{ add_generation_prompt }} {{ tools }} {{ documents }} "
     "{{ messages }}", {}),
    # corners found by differential fuzzing against jinja2
    ("colon_before_block_end", "{% if true: %}a{% else: %}b{% endif %}{% for i in [1]: %}{{ i }}"
     "{% endfor %}", {}),
    ("subscript_tuples", "[{{ b[] }}][{{ b[0, 1] }}][{{ 5[1:] }}]", D),
    ("zero_then_name", "{{ 0or 1 }} {{ 0 if 0else 2 }}", {}),
    ("unicode_names", "{% set été = 'summer' %}{{ été }} {% set ns = namespace(ñ=1) %}{{ ns.ñ }}", {}),
    ("comment_open_at_end", "text{#", {}),
    ("unknown_filter_not_run", "{{ (x | bogus) if false }}{% if false %}{{ y is bogus }}"
     "{% endif %}ok", {}),
    ("round_int_and_bad_base", "{{ 7 | round(2) }} {{ 1234 | round(-2) }} {{ '12' | int(5, 1) }}", {}),
    ("undefined_repr", "{{ [nothing, c.missing] }}", D),
    # errors (jinja raises; orin must fail cleanly)
    ("err_raise_exception", "{{ raise_exception('Only user and assistant roles are supported!') }}", {}),
    ("err_undefined_attr", "{{ nothing.attr }}", {}),
    ("err_undefined_arith", "{{ nothing + 1 }}", {}),
    ("err_none_method", "{{ c.n.strip() }}", D),
    ("err_type_add", "{{ 1 + 'a' }}", {}),
    ("err_compare", "{{ 1 < 'a' }}", {}),
    ("err_division", "{{ 1 // 0 }}", {}),
    ("err_not_callable", "{{ s() }}", D),
    ("err_unknown_filter", "{{ s | no_such_filter }}", D),
    ("err_unknown_test", "{{ s is no_such_test }}", D),
    ("err_unclosed_if", "{% if true %}never closed", {}),
    ("err_unclosed_for", "{% for x in b %}{{ x }}", D),
    ("err_stray_endif", "text {% endif %}", {}),
    ("err_unknown_tag", "{% frobnicate %}", {}),
    ("err_empty_expr", "{{ }}", {}),
    ("err_unterminated_string", "{{ 'abc }}", {}),
    ("err_unclosed_var", "{{ 1 + ", {}),
    ("err_missing_comment_end", "{# never", {}),
    ("err_bad_bracket", "{{ (1, 2] }}", {}),
    ("err_set_non_namespace", "{% set s.x = 1 %}", D),
    ("err_unpack", "{% for a, b in [1, 2] %}{% endfor %}", {}),
    ("err_len_int", "{{ 5 | length }}", {}),
    ("err_iterate_int", "{% for x in 5 %}{% endfor %}", {}),
    ("err_tojson_undefined", "{{ nothing | tojson }}", {}),
    ("err_include", "{% include 'x.html' %}", {}),
    ("err_slice_step_zero", "{{ b[::0] }}", D),
    ("err_break_outside", "{% break %}", {}),
    ("err_subscript_trailing_comma", "{{ b[0,] }}", D),
    ("err_test_extra_arg", "{{ x is defined 1 }}", {}),
    ("err_unknown_filter_run", "{% if true %}{{ 1 | bogus }}{% endif %}", {}),
]


def hf_render(template, ctx):
    """What apply_chat_template does with a context, minus the tokenizer."""
    ctx = json.loads(json.dumps(ctx))
    msgs = [{k: v for k, v in m.items() if v is not None} for m in ctx.pop("messages", [])]
    tools = ctx.pop("tools", None)
    documents = ctx.pop("documents", None)
    agp = ctx.pop("add_generation_prompt", False)
    out, _ = render_jinja_template(conversations=[msgs], tools=tools, documents=documents,
                                   chat_template=template, add_generation_prompt=agp, **ctx)
    return out[0]


def jinja_refs():
    cases = []
    for name, template, ctx in JINJA:
        case = {"name": name, "template": template, "context": ctx}
        try:
            case["expected"] = hf_render(template, ctx)
        except Exception as e:  # noqa: BLE001 - any jinja failure is the reference
            assert name.startswith("err_"), f"{name}: {type(e).__name__}: {e}"
            case["error"] = f"{type(e).__name__}: {e}"
        assert name.startswith("err_") == ("error" in case), f"{name}: expected an error"
        cases.append(case)
    return cases


def write(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(path, ROOT)}")


def main():
    os.makedirs(OUT, exist_ok=True)
    gen = {"transformers": transformers.__version__, "jinja2": jinja2.__version__,
           "script": "scripts/gen_chat_refs.py"}
    with tempfile.TemporaryDirectory() as tmp:
        write(os.path.join(OUT, "qwen_refs.json"),
              {"generator": gen, "templates": {k: v[0] for k, v in TEMPLATES.items()},
               "cases": qwen_refs(tmp)})
    write(os.path.join(OUT, "jinja_refs.json"), {"generator": gen, "cases": jinja_refs()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
