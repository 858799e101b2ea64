import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/collector/logger.js';
import { freePort } from '../../helpers/ports.js';

describe('collector logger: errors', () => {
  it("keeps a failed fetch's cause: the reason, not just 'fetch failed'", async () => {
    const port = await freePort(); // nothing listens there
    const err = await fetch(`http://127.0.0.1:${port}/metrics`).catch((e: unknown) => e);
    const lines: string[] = [];
    createLogger('info', (l) => lines.push(l)).warn('metrics scrape failed', { err });
    const rec = JSON.parse(lines[0]!) as { err: { message: string; cause?: { code?: string } } };
    expect(rec.err.message).toBe('fetch failed');
    expect(rec.err.cause?.code).toBe('ECONNREFUSED');
  });

  it('stops following causes after a few levels', () => {
    const loop = new Error('outer');
    (loop as { cause?: unknown }).cause = loop;
    const lines: string[] = [];
    createLogger('info', (l) => lines.push(l)).error('x', { err: loop });
    expect(lines[0]).toContain('"message":"outer"');
  });
});
