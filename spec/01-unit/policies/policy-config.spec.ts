import { describe, expect, it } from 'vitest';
import { PluginConfigSchema, pluginConfigProblems } from '../../../src/config/plugin-config.js';
import { validateConfig } from '../../../src/config/validate.js';

const load = (policies: unknown) =>
  validateConfig(PluginConfigSchema, { policies }, 'kinference plugin config');

describe('the policies section of the plugin config', () => {
  it('is absent unless given, and fills its defaults when given', () => {
    expect(validateConfig(PluginConfigSchema, {}, 'c').policies).toBeUndefined();
    const c = load({});
    expect(c.policies?.tenant_from).toEqual(['consumer', 'consumer_group']);
    expect(c.policies?.classes.map((x) => x.name)).toEqual(['interactive', 'standard', 'batch']);
    expect(c.policies?.default_class).toBe('standard');
    expect(pluginConfigProblems(c)).toEqual([]);
  });

  it('refuses a misspelled field, naming it', () => {
    expect(() => load({ rate_limit: [] })).toThrow(/policies\.rate_limit/);
    expect(() => load({ classes: [{ name: 'a', priority: 1, ttft_objective: 5 }] })).toThrow(
      /policies\.classes\.0/,
    );
  });

  it('says which names are unknown or repeated, and which policies name nothing', () => {
    const c = load({
      classes: [
        { name: 'gold', priority: 10, ttft_objective_ms: 500 },
        { name: 'gold', priority: 1, ttft_objective_ms: 900 },
      ],
      default_class: 'silver',
      tenant_from: ['header', 'header'],
      tenants: [{ match: {}, class: 'platinum', daily_budget: 5 }],
      rate_limits: [
        {
          match: { model: 'm' },
          limits: [
            { tokens: 'prompt', window: 'minute', limit: 10 },
            { tokens: 'prompt', window: 'minute', limit: 20 },
          ],
        },
      ],
    });
    const problems = pluginConfigProblems(c).join('\n');
    expect(problems).toContain('policies.classes.1.name: "gold" is defined twice');
    expect(problems).toContain('policies.default_class: "silver" is not a class');
    expect(problems).toContain('policies.tenant_from.1: "header" is listed twice');
    expect(problems).toContain('policies.tenants.0.match: names nothing');
    expect(problems).toContain('policies.tenants.0.class: "platinum" is not a class');
    expect(problems).toContain('policies.tenants.0.daily_budget: a budget needs policies.prices');
    expect(problems).toContain('policies.rate_limits.0.limits.1: a second prompt-token limit per minute');
  });

  it('refuses a price that prices nothing', () => {
    const c = load({ prices: { 'gpt-oss-20b': { gpus_per_pod: 2 } } });
    expect(pluginConfigProblems(c)).toEqual([
      'policies.prices.gpt-oss-20b: prices nothing (give input/cached_input/output_per_million, or gpu_hour)',
    ]);
  });
});
