// What the plugin server spends, read from /proc: RSS, CPU of all its threads and of its event loop alone.
import { existsSync, readFileSync, readdirSync } from 'node:fs';

const MiB = 1024 * 1024;
export const mib = (b: number): number => Math.round((b / MiB) * 10) / 10;

export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** CPU time of every thread of the process (ns, from schedstat: the decision workers' threads count too). */
export function cpuNsOf(pid: number): number {
  if (!existsSync(`/proc/${pid}`)) throw new Error(`process ${pid} is gone`);
  let ns = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns;
}

/** CPU time of the main thread alone (ns): the event loop every request of the plugin server waits on. */
export function loopCpuNsOf(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

/**
 * Waits until the process spends under `idleMs` of CPU per second (its decision workers load and warm the
 * tokenizer in the background for seconds after start: measured here, ~4 s of CPU over ~10 s). Without this
 * wait that background work is billed to the first slow requests (a 10 MB body the plugin never reads showed
 * 2-3 s). Returns the seconds waited; throws past `timeoutMs`.
 */
export async function quiesce(pid: number, idleMs = 30, timeoutMs = 120_000): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const c0 = cpuNsOf(pid);
    await new Promise((r) => setTimeout(r, 1000));
    if ((cpuNsOf(pid) - c0) / 1e6 < idleMs) return Math.round((Date.now() - t0) / 100) / 10;
    if (Date.now() - t0 > timeoutMs)
      throw new Error(`the plugin server did not go idle within ${timeoutMs} ms`);
  }
}
