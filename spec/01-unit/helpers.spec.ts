import { describe, expect, it } from 'vitest';
import { startRedis } from '../helpers/redis-server.js';

describe('test redis helper', () => {
  it('starts a private server, survives a kill and restart', async () => {
    const r = await startRedis();
    try {
      await r.client.set('k', 'v');
      expect(await r.client.get('k')).toBe('v');
      await r.restart();
      await expect(r.client.get('k')).resolves.toBeNull();
    } finally {
      await r.stop();
    }
  });
});
