// bench:gateways' markdown: the cell at every N side by side, each against N = 1 and #29's goal.

/** One cell (workload × Kong node count) of bench:gateways, measure window only. */
export interface GatewayCell {
  workload: string;
  nodes: number;
  /** Successful requests overlapping the measure window (GuideLLM's rule). */
  requests: number;
  errored: number;
  /** Σ cached prompt tokens / Σ prompt tokens, as vLLM's usage reports them. */
  hitRate: number;
  ttftP50Ms: number;
  ttftP95Ms: number;
  goodputPerMin: number;
  /** Requests each node took (the client deals them in turn). */
  perNode: number[];
  perPod: Record<string, number>;
  /** Requests a node routed on load alone, by x-kinference-fallback. */
  fallbacks: Record<string, number>;
  loadAvg: { before: number[]; after: number[] };
  /** The cell with its resets before it. */
  wallS: number;
}

/** #29's goal against N = 1: prefix hit rate within 2 points, TTFT p95 within 10%. */
export const HIT_RATE_POINTS = 2;
export const P95_RATIO = 0.1;

export function meetsGoal(cell: GatewayCell, one: GatewayCell): { hit: boolean; p95: boolean } {
  return {
    hit: Math.abs(cell.hitRate - one.hitRate) * 100 <= HIT_RATE_POINTS,
    p95: cell.ttftP95Ms <= one.ttftP95Ms * (1 + P95_RATIO),
  };
}

export function gatewaysMarkdown(
  meta: {
    command: string;
    startedAt: string;
    date: string;
    timeScale: number;
    trial: number;
    seed: number;
    windows: { warmupS: number; measureS: number; cooldownS: number };
    rates: Record<string, number>;
    pods: number;
    pluginSettings: Record<string, unknown>;
  },
  cells: GatewayCell[],
): string {
  const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;
  const sign = (x: number, d = 1): string => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(d)}`;
  const L = [
    '# Active-active Kong nodes, live (issue #29 item 1)',
    '',
    `Command: \`${meta.command}\` (${meta.startedAt} – ${meta.date}).  `,
    `One stack for every row: Redis, ${meta.pods} \`kinference emulator\` pods at time_scale ${meta.timeScale}, ` +
      `\`kinference collector\`, ${Math.max(...cells.map((c) => c.nodes))} \`kinference gateway\` stand-in nodes on one declarative config, each with ` +
      `its own plugin server (each warmed until it routes with its tokenizer, then one request through its ` +
      `chat route). Before each row the collector restarts without calibration and every pod's prefix cache ` +
      `is reset; row N sends through the first N nodes (the others idle). The client deals request k to ` +
      `node k mod N, so consecutive turns of a conversation and the requests of one shared prefix reach ` +
      `different nodes. Poisson ${Object.entries(meta.rates)
        .map(([w, r]) => `${w} ${r}/s`)
        .join(
          ', ',
        )} (virtual), windows ${meta.windows.warmupS}/${meta.windows.measureS}/${meta.windows.cooldownS} s, ` +
      `seed ${meta.seed}, trial ${meta.trial}: the same arrivals and prompts at every N. Plugin settings ` +
      `beside the defaults: \`${JSON.stringify(meta.pluginSettings)}\`. Hit rate = Σ cached prompt tokens / ` +
      `Σ prompt tokens of vLLM's usage; TTFT from the client, × time scale; requests overlapping the measure window.`,
    '',
    `Goal (#29): hit rate within ${HIT_RATE_POINTS} points of N = 1 and TTFT p95 within ${P95_RATIO * 100}%, at every N.`,
    '',
    '| workload | N | requests | hit rate | vs N=1 | TTFT p50 | TTFT p95 | vs N=1 | goodput/min | per node | per pod | routed on load | errors | load avg before → after | goal |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const c of cells) {
    const one = cells.find((x) => x.workload === c.workload && x.nodes === 1);
    const g = one ? meetsGoal(c, one) : null;
    const fb = Object.entries(c.fallbacks)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    L.push(
      `| ${c.workload} | ${c.nodes} | ${c.requests} | ${pct(c.hitRate)} | ${one ? `${sign((c.hitRate - one.hitRate) * 100)} pt` : ''} | ` +
        `${(c.ttftP50Ms / 1000).toFixed(2)} s | ${(c.ttftP95Ms / 1000).toFixed(2)} s | ${one ? `${sign((c.ttftP95Ms / one.ttftP95Ms - 1) * 100)}%` : ''} | ` +
        `${c.goodputPerMin.toFixed(1)} | ${c.perNode.join('/')} | ${Object.entries(c.perPod)
          .sort()
          .map(([, v]) => v)
          .join(
            '/',
          )} | ${fb || '0'} | ${c.errored} | ${c.loadAvg.before[0]!.toFixed(1)} → ${c.loadAvg.after[0]!.toFixed(1)} | ` +
        `${g ? (g.hit && g.p95 ? 'met' : `**missed** (${[g.hit ? '' : 'hit rate', g.p95 ? '' : 'p95'].filter(Boolean).join(', ')})`) : ''} |`,
    );
  }
  return L.join('\n');
}
