// The collector as a child process for the frame fuzz, with its /metrics, /healthz and memory.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * `kinference collector --config <file>` as a child process: built (dist/cli/main.js) when this file
 * runs from dist/, else from source through tsx. Its /metrics and /healthz, and its memory from /proc.
 */
export class CollectorProcess {
  readonly proc: ChildProcess;
  stderr = '';
  #exit: Promise<void>;

  constructor(
    configPath: string,
    readonly listen: string,
  ) {
    const here = fileURLToPath(new URL('../../../', import.meta.url));
    const built = /\/dist\/$/.test(here);
    const root = built ? here.replace(/dist\/$/, '') : here;
    const args = built
      ? [`${here}cli/main.js`, 'collector', '--config', configPath]
      : ['--import', 'tsx', `${root}cli/main.ts`, 'collector', '--config', configPath];
    this.proc = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc.stderr!.on('data', (d: Buffer) => {
      // Keep the tail only: a long fuzz logs a lot.
      this.stderr = (this.stderr + d.toString()).slice(-64_000);
    });
    this.#exit = new Promise((r) => this.proc.once('exit', () => r()));
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  get exit(): { code: number | null; signal: string | null } {
    return { code: this.proc.exitCode, signal: this.proc.signalCode };
  }

  /** VmHWM and VmRSS of the process, MiB (null once it has exited). */
  memory(): { peakRssMb: number; rssMb: number } | null {
    try {
      const s = readFileSync(`/proc/${this.proc.pid}/status`, 'utf8');
      const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN);
      return { peakRssMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024 };
    } catch {
      return null;
    }
  }

  async healthz(): Promise<number | null> {
    try {
      return (await fetch(`http://${this.listen}/healthz`)).status;
    } catch {
      return null;
    }
  }

  /** The collector's /metrics as `name{labels}` → value (null when it does not answer). */
  async metrics(): Promise<Metrics | null> {
    try {
      const r = await fetch(`http://${this.listen}/metrics`);
      if (r.status !== 200) return null;
      return new Metrics(await r.text());
    } catch {
      return null;
    }
  }

  async stop(): Promise<void> {
    if (this.alive) this.proc.kill('SIGTERM');
    const killer = setTimeout(() => this.alive && this.proc.kill('SIGKILL'), 10_000);
    await this.#exit;
    clearTimeout(killer);
  }
}

export class Metrics {
  readonly series = new Map<string, number>();
  constructor(text: string) {
    for (const line of text.split('\n')) {
      if (line.startsWith('#') || line === '') continue;
      const i = line.lastIndexOf(' ');
      this.series.set(line.slice(0, i), Number(line.slice(i + 1)));
    }
  }

  /** Sum over every series of `name` whose labels include each of `labels`. */
  sum(name: string, labels: Record<string, string> = {}): number {
    let n = 0;
    for (const [k, v] of this.series) {
      const brace = k.indexOf('{');
      if ((brace < 0 ? k : k.slice(0, brace)) !== name) continue;
      if (Object.entries(labels).every(([l, x]) => k.includes(`${l}="${x}"`))) n += v;
    }
    return n;
  }

  /** `name`'s series by the value of `label`, zeros left out. */
  by(name: string, label: string): Record<string, number> {
    const out: Record<string, number> = {};
    const re = new RegExp(`${label}="([^"]*)"`);
    for (const [k, v] of this.series)
      if (k.startsWith(`${name}{`) && v !== 0) {
        const l = re.exec(k)?.[1] ?? '';
        out[l] = (out[l] ?? 0) + v;
      }
    return out;
  }
}
