import { describe, expect, it } from 'vitest';
import type { Json } from '../../../emulator/server/openai-protocol.js';
import { jsToPy } from '../../../emulator/server/py-json.js';
import { validateGenerationRequest } from '../../../emulator/server/vllm-request.js';

// Expected texts are pydantic 2.13's errors() as vLLM v0.26.1rc1's validation_exception_handler prints them
// (checked against pydantic itself with a model of the same field types and validators).

const BODY: Json = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const validate = (body: Json, chat = true) => validateGenerationRequest(body, chat, () => jsToPy(body));
const accepted = (body: Json, chat = true) => {
  const r = validate(body, chat);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
};
const refused = (body: Json, chat = true) => {
  const r = validate(body, chat);
  if (r.ok) throw new Error('accepted');
  return r.error;
};
const modeOf = (xargs: unknown, chat = true): string =>
  accepted({ ...BODY, vllm_xargs: xargs }, chat).kvCacheReportMode;

describe('vLLM request validation: vllm_xargs (dict[str, str | int | float | list[str | int | float]] | None)', () => {
  it('defaults kv_cache_report_mode to "incremental" when vllm_xargs is absent, null, or lacks the key', () => {
    expect(accepted(BODY).kvCacheReportMode).toBe('incremental');
    expect(modeOf(null)).toBe('incremental');
    expect(modeOf({})).toBe('incremental');
    expect(modeOf({ other: 'x', n: 3, l: ['a', 1, 2.5] })).toBe('incremental');
  });

  it('reads kv_cache_report_mode as given, for chat and completions', () => {
    expect(modeOf({ kv_cache_report_mode: 'full' })).toBe('full');
    expect(
      accepted({ prompt: 'p', vllm_xargs: { kv_cache_report_mode: 'full' } }, false).kvCacheReportMode,
    ).toBe('full');
    expect(modeOf({ kv_cache_report_mode: 'incremental' })).toBe('incremental');
    // vLLM does not validate the mode: any string is accepted and only "full" does anything.
    expect(modeOf({ kv_cache_report_mode: 'FULL' })).toBe('FULL');
  });

  it('accepts values pydantic accepts but never reads a non-string mode as "full"', () => {
    // Lax mode coerces booleans to int, so they pass validation.
    expect(modeOf({ flag: true, list: [false, 'x'] })).toBe('incremental');
    expect(modeOf({ kv_cache_report_mode: ['full'] })).not.toBe('full');
    expect(modeOf({ kv_cache_report_mode: 1 })).not.toBe('full');
  });

  it('refuses a vllm_xargs that is not an object with pydantic dict_type error, param body.vllm_xargs', () => {
    expect(refused({ ...BODY, vllm_xargs: 'full' })).toEqual({
      status: 400,
      type: 'Bad Request',
      param: 'body.vllm_xargs',
      message:
        "1 validation error:\n  {'type': 'dict_type', 'loc': ('body', 'vllm_xargs'), 'msg': 'Input should be a " +
        "valid dictionary', 'input': 'full'}",
    });
    expect(refused({ ...BODY, vllm_xargs: [] }).message).toContain("'input': []}");
  });

  it('reports each member of the union for a value none accepts, the list member per bad item', () => {
    const e = refused({ ...BODY, vllm_xargs: { kv_cache_report_mode: 'full', bad: { a: 1 } } });
    expect(e.param).toBe('body.vllm_xargs.bad');
    expect(e.message).toBe(
      '4 validation errors:\n' +
        "  {'type': 'string_type', 'loc': ('body', 'vllm_xargs', 'bad', 'str'), 'msg': 'Input should be a valid string', 'input': {'a': 1}}\n" +
        "  {'type': 'int_type', 'loc': ('body', 'vllm_xargs', 'bad', 'int'), 'msg': 'Input should be a valid integer', 'input': {'a': 1}}\n" +
        "  {'type': 'float_type', 'loc': ('body', 'vllm_xargs', 'bad', 'float'), 'msg': 'Input should be a valid number', 'input': {'a': 1}}\n" +
        "  {'type': 'list_type', 'loc': ('body', 'vllm_xargs', 'bad', 'list[union[str,int,float]]'), 'msg': 'Input should be a valid list', 'input': {'a': 1}}",
    );
    const nested = refused({ ...BODY, vllm_xargs: { c: [[1], null] } });
    expect(nested.message.split('\n')[0]).toBe('9 validation errors:');
    expect(nested.message).toContain(
      "{'type': 'string_type', 'loc': ('body', 'vllm_xargs', 'c', 'list[union[str,int,float]]', 1, 'str'), 'msg': 'Input should be a valid string', 'input': None}",
    );
  });
});

describe('vLLM request validation: the fields the emulator reads', () => {
  it('reads max_tokens as pydantic lax int does: "10", " 1_0 ", 10.0 and true pass; "1e3" and 1.5 do not', () => {
    expect(accepted({ ...BODY, max_tokens: '10' }).maxTokens).toBe(10n);
    expect(accepted({ ...BODY, max_tokens: ' 1_0 ' }).maxTokens).toBe(10n);
    expect(accepted({ ...BODY, max_tokens: '10.00' }).maxTokens).toBe(10n);
    expect(accepted({ ...BODY, max_tokens: true }).maxTokens).toBe(1n);
    expect(accepted({ ...BODY, max_completion_tokens: 7, max_tokens: 3 })).toMatchObject({
      maxTokens: 7n,
      maxTokensParam: 'max_completion_tokens',
    });
    expect(refused({ ...BODY, max_tokens: '1e3' })).toEqual({
      status: 400,
      type: 'Bad Request',
      param: 'body.max_tokens',
      message:
        "1 validation error:\n  {'type': 'int_parsing', 'loc': ('body', 'max_tokens'), 'msg': 'Input should be a " +
        "valid integer, unable to parse string as an integer', 'input': '1e3'}",
    });
    expect(refused({ ...BODY, max_tokens: 1.5, min_tokens: null }).message).toBe(
      '2 validation errors:\n' +
        "  {'type': 'int_from_float', 'loc': ('body', 'max_tokens'), 'msg': 'Input should be a valid integer, got a number with a fractional part', 'input': 1.5}\n" +
        "  {'type': 'int_type', 'loc': ('body', 'min_tokens'), 'msg': 'Input should be a valid integer', 'input': None}",
    );
  });

  it('completions: max_tokens defaults to 16, and normalize_null_max_tokens makes null 16 too', () => {
    expect(accepted({ prompt: 'p' }, false).maxTokens).toBe(16n);
    expect(accepted({ prompt: 'p', max_tokens: null }, false).maxTokens).toBe(16n);
    expect(accepted(BODY).maxTokens).toBeNull();
  });

  it('stream_options: only a truthy one needs stream; include_usage defaults to false (vLLM #36379)', () => {
    expect(accepted({ ...BODY, stream: true, stream_options: {} })).toMatchObject({ includeUsage: false });
    expect(accepted({ ...BODY, stream_options: {} })).toMatchObject({ stream: false, includeUsage: false });
    expect(accepted({ ...BODY, stream: 'true', stream_options: { include_usage: 'yes' } })).toMatchObject({
      stream: true,
      includeUsage: true,
      continuousUsage: false,
    });
    expect(refused({ ...BODY, stream_options: { include_usage: true } })).toEqual({
      status: 400,
      type: 'Bad Request',
      param: 'stream_options',
      message:
        "1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, Stream options can " +
        "only be defined when `stream=True`. (parameter=stream_options)', 'input': {'model': 'm', 'messages': " +
        "[{'role': 'user', 'content': 'hi'}], 'stream_options': {'include_usage': True}}, 'ctx': {'error': " +
        "VLLMValidationError('Stream options can only be defined when `stream=True`.')}}",
    });
    // check_tool_usage has put tool_choice in the body by the time validate_stream_options raises.
    expect(
      refused({ ...BODY, tools: [{ type: 'function', function: { name: 'f' } }], stream_options: { a: 1 } })
        .message,
    ).toContain("'stream_options': {'a': 1}, 'tool_choice': 'auto'}, 'ctx'");
    expect(refused({ ...BODY, stream: true, stream_options: [] }).message).toBe(
      "1 validation error:\n  {'type': 'model_attributes_type', 'loc': ('body', 'stream_options'), 'msg': 'Input " +
        "should be a valid dictionary or object to extract fields from', 'input': []}",
    );
  });

  it('cache_salt: any non-empty string (no length cap); anything else is check_cache_salt_support', () => {
    expect(accepted({ ...BODY, cache_salt: 'x'.repeat(5000) }).cacheSalt).toHaveLength(5000);
    expect(refused({ ...BODY, cache_salt: '' })).toEqual({
      status: 400,
      type: 'Bad Request',
      param: 'cache_salt',
      message:
        "1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': \"Value error, Parameter " +
        "'cache_salt' must be a non-empty string if provided. (parameter=cache_salt)\", 'input': {'model': 'm', " +
        "'messages': [{'role': 'user', 'content': 'hi'}], 'cache_salt': ''}, 'ctx': {'error': " +
        'VLLMValidationError("Parameter \'cache_salt\' must be a non-empty string if provided.")}}',
    });
  });

  it('messages: an empty list passes; a missing one is a missing field; a number is a TypeError (400)', () => {
    expect(accepted({ model: 'm', messages: [] }).chatBody).toMatchObject({ messages: [] });
    expect(refused({ model: 'm' })).toMatchObject({
      type: 'Bad Request',
      param: 'body.messages',
      message:
        "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required', " +
        "'input': {'model': 'm'}}",
    });
    expect(refused({ model: 'm', messages: 5 })).toEqual({
      status: 400,
      type: 'BadRequestError',
      param: null,
      message: "'int' object is not iterable",
    });
  });

  it('completions: an empty or missing prompt is validate_prompt_and_prompt_embeds, param prompt', () => {
    for (const body of [{ prompt: '' }, { model: 'm' }, { prompt: null }])
      expect(refused(body, false), JSON.stringify(body)).toMatchObject({
        status: 400,
        type: 'Bad Request',
        param: 'prompt',
        message: expect.stringMatching(
          /^1 validation error:\n {2}\{'type': 'value_error', 'loc': \('body',\), 'msg': 'Value error, Either prompt or prompt_embeds must be provided and non-empty. \(parameter=prompt\)', 'input': \{.*\}, 'ctx': \{'error': VLLMValidationError\('Either prompt or prompt_embeds must be provided and non-empty.'\)\}\}$/,
        ),
      });
    // The union picks the exact member: strings stay strings, ids are ids.
    expect(accepted({ prompt: ['1', '2'] }, false).prompts).toEqual([{ text: '1' }, { text: '2' }]);
    expect(accepted({ prompt: [1, '2'] }, false).prompts).toEqual([{ ids: [1, 2] }]);
    expect(refused({ prompt: [-1] }, false).message).toBe(
      '4 validation errors:\n' +
        "  {'type': 'greater_than_equal', 'loc': ('body', 'prompt', 'list[constrained-int]', 0), 'msg': 'Input should be greater than or equal to 0', 'input': -1, 'ctx': {'ge': 0}}\n" +
        "  {'type': 'list_type', 'loc': ('body', 'prompt', 'list[list[constrained-int]]', 0), 'msg': 'Input should be a valid list', 'input': -1}\n" +
        "  {'type': 'string_type', 'loc': ('body', 'prompt', 'str'), 'msg': 'Input should be a valid string', 'input': [-1]}\n" +
        "  {'type': 'string_type', 'loc': ('body', 'prompt', 'list[str]', 0), 'msg': 'Input should be a valid string', 'input': -1}",
    );
  });

  it('prompt_logprobs: check_logprobs’ text, its value printed as str()', () => {
    expect(refused({ ...BODY, prompt_logprobs: 'x' })).toMatchObject({
      param: 'prompt_logprobs',
      message: expect.stringContaining(
        "'msg': 'Value error, `prompt_logprobs` must be an integer. (parameter=prompt_logprobs, value=x)'",
      ),
    });
    expect(refused({ ...BODY, prompt_logprobs: 2, stream: true }).message).toContain(
      '`prompt_logprobs` are not available when `stream=True`. (parameter=prompt_logprobs)',
    );
    expect(accepted({ ...BODY, prompt_logprobs: 0, stream: true }).skipPrefixCache).toBe(true);
  });
});
