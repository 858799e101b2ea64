import type { IncomingMessage, ServerResponse } from 'node:http';
import { withPythonNumbers } from '../../src/core/request.js';
import { errorJson, type ErrorType, type Json } from './openai-protocol.js';

export const MAX_BODY_BYTES = 64 * 1024 * 1024;

export type BodyResult = { ok: true; json: Json } | { ok: false; status: number; message: string };

/** Reads and parses a JSON object body; failures are values (answered 400/413 in vLLM's error shape). */
export async function readJsonBody(req: IncomingMessage): Promise<BodyResult> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    const b = c as Buffer;
    size += b.length;
    if (size > MAX_BODY_BYTES) return { ok: false, status: 413, message: 'request body too large' };
    chunks.push(b);
  }
  let v: unknown;
  try {
    const text = Buffer.concat(chunks).toString('utf8');
    // json.loads, as vLLM: the template prints tool numbers back as Python does (core/python-json.ts).
    v = withPythonNumbers(JSON.parse(text), text);
  } catch (e) {
    return { ok: false, status: 400, message: `invalid JSON body: ${(e as Error).message}` };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return { ok: false, status: 400, message: 'the request body must be a JSON object' };
  return { ok: true, json: v as Json };
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const TYPE_BY_STATUS: Record<number, ErrorType> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  413: 'BadRequestError',
  500: 'InternalServerError',
  503: 'ServiceUnavailableError',
};

export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  param: string | null = null,
): void {
  sendJson(res, status, errorJson(message, TYPE_BY_STATUS[status] ?? 'BadRequestError', status, param));
}
