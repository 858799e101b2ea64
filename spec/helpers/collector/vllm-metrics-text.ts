// vLLM /metrics text for the collector specs, as prometheus_client exposes it.
/** As prometheus_client exposes vLLM's metrics: sorted labels, _total counters, histograms (docs/emulator.md). */
export function vllmExposition(e: Record<string, Partial<Record<string, number>>>, extra = ''): string {
  const lines: string[] = [];
  for (const [engine, v] of Object.entries(e)) {
    const l = `engine="${engine}",model_name="qwen"`;
    // A histogram with only its _count and _sum (what the collector reads of it).
    const histogram = (name: string, count: number, sum: number): string[] => [
      `# TYPE ${name} histogram`,
      `${name}_count{${l}} ${count}`,
      `${name}_sum{${l}} ${sum}`,
    ];
    lines.push(
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      '# TYPE vllm:num_requests_running gauge',
      `vllm:num_requests_running{${l}} ${v.running ?? 0}`,
      '# TYPE vllm:num_requests_waiting gauge',
      `vllm:num_requests_waiting{${l}} ${v.waiting ?? 0}`,
      '# TYPE vllm:kv_cache_usage_perc gauge',
      `vllm:kv_cache_usage_perc{${l}} ${v.kv ?? 0}`,
      '# TYPE vllm:prefix_cache_queries_total counter',
      `vllm:prefix_cache_queries_total{${l}} ${v.queries ?? 0}`,
      '# TYPE vllm:prefix_cache_hits_total counter',
      `vllm:prefix_cache_hits_total{${l}} ${v.hits ?? 0}`,
      '# TYPE vllm:prompt_tokens_total counter',
      `vllm:prompt_tokens_total{${l}} ${v.prompt ?? 0}`,
      '# TYPE vllm:request_prefill_time_seconds histogram',
      `vllm:request_prefill_time_seconds_bucket{${l.replace('model_name', 'le="0.3",model_name')}} 0.0`,
      `vllm:request_prefill_time_seconds_bucket{${l.replace('model_name', 'le="+Inf",model_name')}} ${v.prefillN ?? 0}`,
      `vllm:request_prefill_time_seconds_count{${l}} ${v.prefillN ?? 0}`,
      `vllm:request_prefill_time_seconds_sum{${l}} ${v.prefillS ?? 0}`,
      ...(v.computedN === undefined
        ? []
        : histogram('vllm:request_prefill_kv_computed_tokens', v.computedN, v.computedSum ?? 0)),
      ...(v.iterN === undefined ? [] : histogram('vllm:iteration_tokens_total', v.iterN, v.iterSum ?? 0)),
      ...(v.finishedN === undefined
        ? []
        : [
            ...histogram('vllm:request_prompt_tokens', v.finishedN, v.finishedPrompt ?? 0),
            ...histogram('vllm:request_generation_tokens', v.finishedN, v.finishedGeneration ?? 0),
          ]),
      ...histogram('vllm:inter_token_latency_seconds', v.itlN ?? 0, v.itlS ?? 0),
    );
  }
  return `${lines.join('\n')}\n${extra}`;
}
