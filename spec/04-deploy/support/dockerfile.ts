import { readText } from './repo.js';

/** One Dockerfile instruction, continuation lines joined, in the build stage it belongs to. */
export interface Instruction {
  keyword: string;
  args: string;
  stage: number;
  stageName: string | null;
  line: number;
}

/** Minimal Dockerfile reader: comments dropped, `\` continuations joined, stages counted by FROM. */
export function readDockerfile(rel: string): Instruction[] {
  const lines = readText(rel).split('\n');
  const out: Instruction[] = [];
  let stage = -1;
  let stageName: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let text = lines[i]!;
    if (/^\s*(#|$)/.test(text)) continue;
    while (/\\\s*$/.test(text) && i + 1 < lines.length) {
      i++;
      const next = lines[i]!;
      if (/^\s*#/.test(next)) continue;
      text = text.replace(/\\\s*$/, ' ') + next.trim();
    }
    const m = /^\s*([A-Za-z]+)\s+([\s\S]*)$/.exec(text);
    if (!m) throw new Error(`${rel}:${start + 1}: cannot read instruction: ${text}`);
    const keyword = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (keyword === 'FROM') {
      stage++;
      stageName = /\bAS\s+(\S+)$/i.exec(args)?.[1] ?? null;
    }
    out.push({ keyword, args, stage, stageName, line: start + 1 });
  }
  return out;
}

/** ARG defaults declared before the first FROM, for resolving `FROM ${X}`. */
export function globalArgs(instrs: Instruction[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const i of instrs) {
    if (i.keyword !== 'ARG' || i.stage !== -1) continue;
    const [k, v = ''] = i.args.split('=');
    out[k!] = v;
  }
  return out;
}

/** COPY/ADD sources and destination; `from` is the --from stage or image, null for the build context. */
export function copies(
  instrs: Instruction[],
): { from: string | null; sources: string[]; dest: string; stage: number }[] {
  return instrs
    .filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD')
    .map((i) => {
      const words = i.args.split(/\s+/);
      const flags = words.filter((w) => w.startsWith('--'));
      const paths = words.filter((w) => !w.startsWith('--'));
      const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length) ?? null;
      return { from, sources: paths.slice(0, -1), dest: paths[paths.length - 1]!, stage: i.stage };
    });
}
