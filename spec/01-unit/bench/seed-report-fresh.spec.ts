import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderReadme, renderReport } from '../../../scripts/gen-report.js';

const RESULTS = join(import.meta.dirname, '../../../bench/results');

/**
 * bench/results/seed.md and the README's results table are what the report code makes of seed.json, and the
 * report shows every chart it has.
 */
describe('the committed seed report', () => {
  it('is what bench/lib/report renders from seed.json (run `npm run gen:report` after changing it)', async () => {
    const { markdown, charts } = await renderReport('seed');
    expect(readFileSync(join(RESULTS, 'seed.md'), 'utf8')).toBe(markdown);
    for (const [file, svg] of charts)
      expect(readFileSync(join(RESULTS, 'charts', file), 'utf8'), file).toBe(svg);
  }, 60_000);

  it("gives the README's results table (bench-summary block; `npm run gen:report` rewrites it)", () => {
    const readme = readFileSync(join(RESULTS, '../../README.md'), 'utf8');
    expect(readme).toContain('<!-- bench-summary:start -->\n| workload | metric | random | kinference |');
    expect(renderReadme(readme)).toBe(readme);
  });

  it('shows its charts as images, the headline first, each a file that exists', () => {
    const md = readFileSync(join(RESULTS, 'seed.md'), 'utf8');
    const images = [...md.matchAll(/!\[[^\]]+\]\(([^)]+\.svg)\)/g)].map((m) => m[1]!);
    expect(images[0]).toBe('charts/seed-headline.svg');
    expect(images).toEqual(
      expect.arrayContaining([
        'charts/seed-goodput-vs-concurrency.svg',
        'charts/seed-ttft-cdf-shared-prefix.svg',
        'charts/seed-ttft-cdf-multiturn.svg',
      ]),
    );
    for (const img of images) expect(existsSync(join(RESULTS, img)), img).toBe(true);
  });
});
