import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The pages a reader meets: the README, every docs page, and the benchmark report it links for results. */
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  'bench/results/seed.md',
];

interface Link {
  line: number;
  target: string;
  image: boolean;
}

const DEST = String.raw`\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`;
const IMAGE = new RegExp(String.raw`!\[[^\]]*\]` + DEST, 'g');
const LINK = new RegExp(String.raw`\[[^\]]*\]` + DEST, 'g');

/** Markdown links and images outside code (fenced blocks and `inline code`), with their line numbers. */
function linksOf(md: string): Link[] {
  const out: Link[] = [];
  let fence: string | null = null;
  md.split('\n').forEach((raw, i) => {
    const f = /^\s*(`{3,}|~{3,})/.exec(raw);
    if (f) {
      if (fence === null) fence = f[1]![0]!;
      else if (f[1]![0] === fence) fence = null;
      return;
    }
    if (fence !== null) return;
    const line = raw.replace(/`[^`]*`/g, '``');
    // Images first: a linked image is an image inside a link's text.
    for (const m of line.matchAll(IMAGE)) out.push({ line: i + 1, target: m[1]!, image: true });
    for (const m of line.replace(IMAGE, 'image').matchAll(LINK))
      out.push({ line: i + 1, target: m[1]!, image: false });
    const ref = /^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(line);
    if (ref) out.push({ line: i + 1, target: ref[1]!, image: false });
  });
  return out;
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(md: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let fence: string | null = null;
  for (const raw of md.split('\n')) {
    const f = /^\s*(`{3,}|~{3,})/.exec(raw);
    if (f) {
      if (fence === null) fence = f[1]![0]!;
      else if (f[1]![0] === fence) fence = null;
      continue;
    }
    if (fence !== null) continue;
    for (const m of raw.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(m[1]!);
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(raw);
    if (!h) continue;
    const text = h[1]!
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .toLowerCase();
    const base = text.replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** What keeps an SVG from showing as an image on GitHub (an <img> sandbox: no external fetches, no scripts). */
function svgProblems(svg: string): string[] {
  const root = /<svg\b[^>]*>/.exec(svg)?.[0];
  if (root === undefined) return ['no <svg> element'];
  const problems: string[] = [];
  if (!root.includes('xmlns="http://www.w3.org/2000/svg"')) problems.push('no xmlns on <svg>');
  for (const a of ['width', 'height', 'viewBox'])
    if (!new RegExp(`\\s${a}="[^"]+"`).test(root)) problems.push(`no ${a} on <svg>`);
  if (/@import|@font-face|url\(\s*['"]?https?:/i.test(svg)) problems.push('external font or stylesheet');
  if (/(?:xlink:)?href="https?:/i.test(svg)) problems.push('external reference');
  if (/<script\b/i.test(svg)) problems.push('script');
  return problems;
}

function broken(page: string): string[] {
  const path = join(ROOT, page);
  const md = readFileSync(path, 'utf8');
  const problems: string[] = [];
  for (const { line, target, image } of linksOf(md)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
    const at = `${page}:${line}: ${target}`;
    const [file, anchor] = target.split('#', 2) as [string, string | undefined];
    const dest = file === '' ? path : resolve(dirname(path), decodeURIComponent(file));
    if (!existsSync(dest)) {
      problems.push(`${at}: no such file`);
      continue;
    }
    if (relative(ROOT, dest).startsWith('..')) problems.push(`${at}: outside the repository`);
    if (image) {
      if (!dest.endsWith('.svg') && !/\.(png|jpe?g|gif|webp)$/i.test(dest))
        problems.push(`${at}: not an image`);
      if (dest.endsWith('.svg'))
        for (const p of svgProblems(readFileSync(dest, 'utf8'))) problems.push(`${at}: ${p}`);
    }
    if (anchor !== undefined && anchor !== '' && dest.endsWith('.md') && statSync(dest).isFile())
      if (!anchorsOf(readFileSync(dest, 'utf8')).has(anchor)) problems.push(`${at}: no heading #${anchor}`);
  }
  return problems;
}

describe('links in the README and docs/', () => {
  it('find their file, heading and image, and every image renders on its own', () => {
    expect(PAGES.flatMap(broken)).toEqual([]);
  });

  it('the README shows the benchmark chart and links the full report', () => {
    const links = linksOf(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(links.filter((l) => l.image && l.target.endsWith('.svg')).length).toBeGreaterThan(0);
    expect(links.map((l) => l.target)).toContain('bench/results/seed.md');
  });

  it('parse as GitHub does: code is not a link, headings get its anchors', () => {
    const md = [
      '# What it costs (`npm run bench:overhead`, 2 cores)',
      '## Notes',
      '## Notes',
      'see [a](docs/a.md#x) and ![b](c.svg "t") but not `[d](e.md)`',
      '```',
      '[f](g.md)',
      '```',
      '[h]: i.md',
    ].join('\n');
    expect(linksOf(md).map((l) => [l.line, l.target, l.image])).toEqual([
      [4, 'c.svg', true],
      [4, 'docs/a.md#x', false],
      [8, 'i.md', false],
    ]);
    expect([...anchorsOf(md)]).toEqual(['what-it-costs-npm-run-benchoverhead-2-cores', 'notes', 'notes-1']);
    expect(svgProblems('<svg width="1" height="1" viewBox="0 0 1 1"></svg>')).toEqual(['no xmlns on <svg>']);
  });
});
