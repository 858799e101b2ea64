/**
 * `npm run bench:usage`: the usage records' error against the truth over a run. Three tenants one after the
 * other through the live stack (Kong stand-in, the plugin with a policies section, collector, emulated pods,
 * Redis): each phase's usage record delta is that tenant's (the records themselves are per tenant once the
 * tenant is resolved; this run does not depend on it). Output tokens: the plugin's estimate from
 * response.size, and the same estimator on the bytes the client's socket read (what nginx's $bytes_sent
 * counts), both against the client's count of content chunks (one per token). Cached prompt tokens: the
 * router's prediction (the record) against vLLM's usage.prompt_tokens_details.cached_tokens (the client reads
 * it; the plugin cannot).
 */
import './lib/usage/usage.js'; // first: --help before the heavy imports
import { request } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startLiveStack } from './lib/live/stack.js';
import { SEED_SCHEDULE } from './lib/schedule.js';
import { loadModelSetup } from './lib/setup.js';
import { Sfc32, splitmixWords } from '../harness/sfc32.js';
import {
  addTotals,
  createUsageRedis,
  estimateOutputTokens,
  readUsage,
  zeroTotals,
  type UsageTotals,
} from '../src/usage/index.js';

const PER_TENANT = Number(process.env.KINF_BENCH_REQUESTS ?? 40);
const TIME_SCALE = Number(process.env.KINF_BENCH_TIME_SCALE ?? 0.25);
const CONCURRENCY = 4;

interface Tenant {
  name: string;
  streamed: (i: number) => boolean;
  maxTokens: (r: () => number) => number;
  messages: (i: number) => { role: string; content: string }[];
}

const RAG_CONTEXT = Array.from(
  { length: 60 },
  (_, i) => `Passage ${i}: the tide tables of harbour ${i} list two high waters a day.`,
).join(' ');
const TENANTS: Tenant[] = [
  {
    name: 'chat',
    streamed: () => true,
    maxTokens: (r) => 16 + Math.floor(r() * 48),
    messages: (i) => [
      { role: 'user', content: `Conversation ${i % 7}: tell me something short about rivers, turn ${i}.` },
    ],
  },
  {
    name: 'batch',
    streamed: () => true,
    maxTokens: (r) => 200 + Math.floor(r() * 200),
    messages: (i) => [
      { role: 'system', content: 'Summarise the document in detail. '.repeat(20) },
      {
        role: 'user',
        content: `Document ${i}: ${'a long report on water levels and green rivers. '.repeat(10)}`,
      },
    ],
  },
  {
    name: 'rag',
    streamed: () => false,
    maxTokens: (r) => 32 + Math.floor(r() * 96),
    messages: (i) => [
      { role: 'system', content: RAG_CONTEXT },
      { role: 'user', content: `Question ${i}: which harbour has the earliest high water?` },
    ],
  },
];

interface Answer {
  status: number;
  bytesRead: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request on a connection of its own: the socket's bytesRead is the bytes the gateway sent for it. */
function post(url: URL, body: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const sock = res.socket;
          // 'end' fires once the body is in; the socket has read every byte of this response by then.
          resolve({
            status: res.statusCode ?? 0,
            bytesRead: sock?.bytesRead ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

function contentChunks(sse: string): number {
  let n = 0;
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const d = (JSON.parse(line.slice(6)) as { choices: { delta?: { content?: string; role?: string } }[] })
      .choices[0]?.delta;
    if (d && d.content !== undefined && d.role === undefined) n++;
  }
  return n;
}

/** The headers as kong.log.serialize() holds them: without those nginx adds on the wire. */
function loggedHeaders(h: Answer['headers']): Record<string, string | string[] | undefined> {
  const out = { ...h };
  for (const k of ['date', 'connection', 'transfer-encoding', 'keep-alive']) delete out[k];
  return out;
}

interface PhaseResult {
  tenant: string;
  requests: number;
  streamed: number;
  trueOutput: number;
  wireEstimate: number;
  recorded: UsageTotals;
  reportedCached: number | null;
}

const model = await loadModelSetup();
const prng = new Sfc32(splitmixWords(SEED_SCHEDULE.seed));
const rng = (): number => prng.float();
const PRICES = { '*': { input_per_million: 0.6, cached_input_per_million: 0.06, output_per_million: 2.4 } };
const stack = await startLiveStack({
  pods: 2,
  profile: SEED_SCHEDULE.emulatorProfile,
  kvCapacityTokens: SEED_SCHEDULE.kvCapacityTokens,
  timeScale: TIME_SCALE,
  seed: SEED_SCHEDULE.seed,
  scrapeIntervalMs: SEED_SCHEDULE.latency.scrapeIntervalMs,
  model,
  cli: fileURLToPath(new URL('../../bin/kinference.js', import.meta.url)),
  pluginExtra: { policies: { tenant_from: ['header', 'consumer'], prices: PRICES } },
  emulatorExtra: { prompt_tokens_details: true },
});
const client = createUsageRedis({ url: stack.redis.url });
const url = new URL(`http://${stack.gateway.host}:${stack.gateway.port}/v1/chat/completions`);
const totals = async (): Promise<UsageTotals> => {
  const rows = await readUsage(client, stack.keyPrefix, Date.now() - 7_200_000, Date.now() + 3_600_000);
  return rows.reduce((a, r) => addTotals(a, r.totals), zeroTotals());
};

const results: PhaseResult[] = [];
try {
  await client.connect();
  for (const t of TENANTS) {
    const before = await totals();
    const r: PhaseResult = {
      tenant: t.name,
      requests: 0,
      streamed: 0,
      trueOutput: 0,
      wireEstimate: 0,
      recorded: zeroTotals(),
      reportedCached: t.streamed(0) ? null : 0,
    };
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < PER_TENANT) {
        const i = next++;
        const stream = t.streamed(i);
        const a = await post(url, {
          model: model.model,
          messages: t.messages(i),
          stream,
          max_tokens: t.maxTokens(rng),
          user: t.name,
        });
        if (a.status !== 200)
          throw new Error(`${t.name} request ${i}: status ${a.status}: ${a.body.slice(0, 200)}`);
        r.requests++;
        const est = estimateOutputTokens({
          status: a.status,
          bytesSent: a.bytesRead,
          headers: loggedHeaders(a.headers),
          model: model.model,
        });
        r.wireEstimate += est?.tokens ?? 0;
        if (stream) {
          r.streamed++;
          r.trueOutput += contentChunks(a.body);
        } else {
          const u = (
            JSON.parse(a.body) as {
              usage: { completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null };
            }
          ).usage;
          r.trueOutput += u.completion_tokens;
          r.reportedCached = (r.reportedCached ?? 0) + (u.prompt_tokens_details?.cached_tokens ?? 0);
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    // The log phase writes after the answer: wait for this phase's records.
    const deadline = Date.now() + 30_000;
    let after = await totals();
    while (after.requests - before.requests < r.requests && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 200));
      after = await totals();
    }
    for (const k of Object.keys(after) as (keyof UsageTotals)[]) r.recorded[k] = after[k] - before[k];
    results.push(r);
    console.log(`bench:usage: ${t.name} done (${r.requests} requests)`);
  }
} finally {
  client.disconnect();
  await stack.stop();
}

const pct = (est: number, truth: number): number =>
  truth === 0 ? 0 : Math.round(((est - truth) / truth) * 10000) / 100;
const rows = results.map((r) => {
  const recordedOutput = r.recorded.output_tokens_estimated + r.recorded.output_tokens_exact;
  return {
    tenant: r.tenant,
    requests: r.requests,
    streamed: r.streamed,
    recorded_requests: r.recorded.requests,
    true_output_tokens: r.trueOutput,
    plugin_estimate: recordedOutput,
    plugin_error_pct: pct(recordedOutput, r.trueOutput),
    wire_bytes_estimate: r.wireEstimate,
    wire_bytes_error_pct: pct(r.wireEstimate, r.trueOutput),
    prompt_tokens: r.recorded.prompt_tokens,
    predicted_cached_tokens: r.recorded.cached_tokens,
    reported_cached_tokens: r.reportedCached,
    cached_error_pct: r.reportedCached === null ? null : pct(r.recorded.cached_tokens, r.reportedCached),
    cost: Number(r.recorded.cost.toPrecision(6)),
  };
});
const command = 'npm run bench:usage';
const out = {
  command,
  date: new Date().toISOString(),
  per_tenant_requests: PER_TENANT,
  time_scale: TIME_SCALE,
  model: model.model,
  rows,
};
const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
mkdirSync(dir, { recursive: true });
writeFileSync(`${dir}usage-estimate.json`, `${JSON.stringify(out, null, 2)}\n`);
const md = [
  `# Usage records against the truth (\`${command}\`, ${out.date.slice(0, 10)})`,
  '',
  `${PER_TENANT} requests per tenant, tenants one after the other, 2 emulated pods at time scale ${TIME_SCALE}, model ${model.model}.`,
  'Output: the plugin estimate is the usage record (from kong.log.serialize() response.size); the wire estimate is',
  "the same estimator on the bytes the client's socket read (nginx's $bytes_sent); truth: the client's count.",
  "Cached: the router's predicted cached prompt tokens (record) against vLLM's prompt_tokens_details.cached_tokens.",
  '',
  '| tenant | requests (streamed) | true output | plugin estimate | error | wire-bytes estimate | error | predicted cached | reported cached | error |',
  '|---|---|---|---|---|---|---|---|---|---|',
  ...rows.map(
    (r) =>
      `| ${r.tenant} | ${r.requests} (${r.streamed}) | ${r.true_output_tokens} | ${r.plugin_estimate} | ${r.plugin_error_pct}% | ${r.wire_bytes_estimate} | ${r.wire_bytes_error_pct}% | ${r.predicted_cached_tokens} | ${r.reported_cached_tokens ?? '(stream)'} | ${r.cached_error_pct === null ? '' : `${r.cached_error_pct}%`} |`,
  ),
  '',
].join('\n');
writeFileSync(`${dir}usage-estimate.md`, md);
console.log(md);
process.exit(0);
