// The fleet YAML's `collector:` section: its TypeBox schema and cross-field checks, owned by the collector.
import { Type, type Static } from '@sinclair/typebox';
import { LISTEN_PATTERN } from './addresses.js';

/** `collector:` section of the fleet YAML. Owned by the collector (docs/collector.md lists every field). */
export const CollectorSectionSchema = Type.Object(
  {
    listen: Type.String({
      default: '127.0.0.1:9090',
      pattern: LISTEN_PATTERN,
      description:
        'host:port for /metrics and /healthz (port 0–65535, 0 picks a free one; IPv6 as [::1]:9090; :9090 listens on every interface)',
    }),
    log_level: Type.Union(
      [Type.Literal('debug'), Type.Literal('info'), Type.Literal('warn'), Type.Literal('error')],
      {
        default: 'info',
        description: 'Structured logs (one JSON object per line on stderr) at this level and above.',
      },
    ),
    scrape_interval_ms: Type.Integer({ default: 1000, minimum: 50, maximum: 600000 }),
    scrape_timeout_ms: Type.Integer({
      default: 2000,
      minimum: 10,
      maximum: 60000,
      description: 'A /metrics scrape slower than this counts as a failure.',
    }),
    unhealthy_after_failures: Type.Integer({ default: 3, minimum: 1, maximum: 1000 }),
    models_interval_ms: Type.Integer({
      default: 60000,
      minimum: 0,
      maximum: 86400000,
      description:
        "How often each pod's /v1/models (on its /metrics URL's host and port) is read for its max_model_len, which the router respects as the model's context window where the plugin config gives none; at start, and again after a pod restart. Each read is bounded by scrape_timeout_ms and 1 MiB. 0: never read.",
    }),
    block_map_max_entries: Type.Integer({
      default: 1000000,
      minimum: 1000,
      description:
        'Per pod (per DP rank): vLLM block hashes remembered to chain parents and translate removals (LRU).',
    }),
    replay_timeout_ms: Type.Integer({
      default: 5000,
      minimum: 10,
      maximum: 600000,
      description:
        'Longest wait for the next replay reply before the replay is given up (the pod is then cleared).',
    }),
    live_buffer_batches: Type.Integer({
      default: 50000,
      minimum: 100,
      description:
        'Live batches held per stream while a replay runs; beyond it they are dropped and repaired later.',
    }),
    zmq_receive_hwm: Type.Integer({
      default: 10000,
      minimum: 0,
      description:
        'ZMQ receive high-water mark (messages) of each subscriber; 0 is unlimited. Bounds native memory when the collector falls behind: messages past it are dropped, and the gap is replayed.',
    }),
    zmq_max_frame_bytes: Type.Integer({
      default: 16777216,
      minimum: 65536,
      description:
        'Largest ZMQ frame (one message part) accepted from a pod, live or replayed (ZMQ maxMessageSize). A larger one is refused before it is buffered: ZMQ drops the connection, the collector counts it (frames_refused_total), reconnects and replays the gap.',
    }),
    max_queued_ops: Type.Integer({
      default: 2000000,
      minimum: 1000,
      description:
        'Per stream: block ops buffered while the index is slow or down. Past it the queue is dropped and the pod resyncs.',
    }),
    max_ops_per_apply: Type.Integer({
      default: 20000,
      minimum: 1,
      description: 'Block ops merged into one index write.',
    }),
    index_retry_min_ms: Type.Integer({
      default: 100,
      minimum: 1,
      maximum: 3600000,
      description: 'First backoff after a failed index write; doubles up to index_retry_max_ms.',
    }),
    index_retry_max_ms: Type.Integer({
      default: 5000,
      minimum: 1,
      maximum: 3600000,
      description: 'Longest backoff between index write retries; at least index_retry_min_ms.',
    }),
    calibration_window_ms: Type.Integer({
      default: 120000,
      minimum: 1000,
      description:
        'Sliding window of /metrics history used to calibrate prefill and decode costs; stretched back to calibration_min_requests prefills when a pod is quiet.',
    }),
    calibration_min_requests: Type.Integer({
      default: 20,
      minimum: 1,
      description: 'Prefills needed in the window before a pod gets its own calibration.',
    }),
    calibration_pool: Type.Boolean({
      default: true,
      description:
        'Pods of one model with the same KV geometry (num_gpu_blocks and block size: the same GPU and vLLM settings) share one calibration, the median of their own estimates. A pod the router avoided after a busy spell then does not keep looking slow. Off: each pod keeps its own.',
    }),
    shutdown_timeout_ms: Type.Integer({
      default: 10000,
      minimum: 0,
      description:
        'On SIGTERM, how long queued index writes may take to flush and handoffs to be saved (pods not saved by then are cleared by the next collector).',
    }),
    handoff: Type.Boolean({
      default: true,
      description:
        "On a clean stop, leave each pod's event-stream state in Redis (the vLLM hash map, the last batch applied) so that the next collector, a restart or a standby taking over, goes on from the pod's replay buffer instead of clearing the pod and rebuilding it. Used only if nothing wrote the pod since. Off: every start clears.",
    }),
    handoff_checkpoint_ms: Type.Integer({
      default: 30000,
      minimum: 0,
      description:
        'With handoff: a pod whose event stream has been quiet this long since it last changed gets a handoff saved then too, so that a collector that crashes or is killed still leaves one for every pod quiet that long. 0: only at a clean stop.',
    }),
    writer_lease_ms: Type.Integer({
      default: 15000,
      minimum: 1000,
      maximum: 600000,
      description:
        "TTL of the writer lease that makes this collector the one writer of its models' index (renewed every third of it). A second collector stands by; it takes over within about this long after the active one dies, and within a third of it after a clean stop.",
    }),
    shard_count: Type.Integer({
      default: 1,
      minimum: 1,
      maximum: 4096,
      description:
        'Pods of the fleet split into this many collector shards by a hash of the pod id; this collector follows only shard `shard_index`, under that shard\'s own writer lease (`<prefix>:{T}:writer:i/n`). 1: every pod. Every collector of a model must use the same count (docs/collector.md, "Sharding pods across collectors").',
    }),
    shard_index: Type.Integer({
      default: 0,
      minimum: 0,
      description:
        'Which shard (0 … shard_count − 1) this collector follows; a standby runs with the same index.',
    }),
    kubeconfig: Type.Optional(
      Type.String({
        description:
          'Kubeconfig for `kubernetes:` discovery; default: $KUBECONFIG, then ~/.kube/config, then in-cluster.',
      }),
    ),
  },
  { additionalProperties: false },
);

export type CollectorSection = Static<typeof CollectorSectionSchema>;

/** Cross-field rules of the section (min ≤ max pairs); one line per problem, fields named under `path`. */
export function checkCollectorSection(c: CollectorSection, path: string): string[] {
  const problems: string[] = [];
  if (c.index_retry_min_ms > c.index_retry_max_ms)
    problems.push(
      `  ${path}.index_retry_min_ms: ${c.index_retry_min_ms} is greater than index_retry_max_ms (${c.index_retry_max_ms})`,
    );
  if (c.shard_index >= c.shard_count)
    problems.push(`  ${path}.shard_index: ${c.shard_index} is not below shard_count (${c.shard_count})`);
  return problems;
}
