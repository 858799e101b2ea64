// The benchmark's routing-arm interface: what an arm sees of pods and requests, and what it decides.
import type { CallerFacts } from '../../../src/policies/index.js';
import type { ArmName } from '../types.js';

/** What every arm may know about a pod: the gateway's own view, plus scraped metrics where an arm uses them. */
export interface PodView {
  id: string;
  /** Requests this gateway sent to the pod that have not finished (what least-connections counts). */
  inFlight: number;
  /** Last scraped vllm:num_requests_waiting / kv_cache_usage_perc (null before the first scrape). */
  waiting: number | null;
  kvUsage: number | null;
}

/** A request as an arm sees it before sending it. */
export interface ArmRequest {
  key: string;
  /** The OpenAI chat body as sent (the kinference arm routes on exactly this). */
  body: string;
  /** Prompt token ids after the chat template (what vLLM computes; hashing arms use them). */
  promptTokenIds: readonly number[];
  /** Tokens of the first message (the shared system prompt, or the first user turn): what a prefix hash keys on. */
  firstMessageText: string;
  /** The client process sending it (GuideLLM worker): its own HTTP connection pool (kube-proxy routes per connection). */
  client: number;
  /** Who sent it as Kong knows it (the mixed-tenant run): the consumer, its groups; absent: nobody. */
  caller?: CallerFacts | null;
}

export interface ArmDecision {
  podId: string;
  /**
   * The gateway answered itself instead of sending the request (kinference's opt-in shedding: 429 with
   * Retry-After); the client honours the Retry-After before its next request.
   */
  rejected?: { retryAfterMs: number; by?: 'class' | 'limit' | 'request-limit' | 'shed' };
  /**
   * Class admission held the request in the gateway (kinference with policies, a class with max_wait_ms): no
   * pod now; the run re-decides it (`Arm.redecide`) when capacity frees, and for good at `untilMs`.
   */
  wait?: { untilMs: number; priority: number };
  /** Why the arm decided so, for per-request traces (the kinference arm: class admission, predicted TTFT). */
  trace?: { admission: string | null; predictedTtftMs: number | null; detail: string | null };
  /** Opaque per-arm data handed back in the feedback calls (e.g. the router's outcome). */
  token?: unknown;
  /** Prompt tokens a gateway arm tokenized for this request (the rest came from its segment cache). */
  tokenizedTokens?: number;
  /** The request carries vllm_xargs.kv_cache_report_mode=full (kinference's kv_reuse_reports_ms). */
  kvReuseReport?: boolean;
}

/** A routing policy. Pure over its inputs plus its own memory; time and randomness come from outside. */
export interface Arm {
  readonly name: ArmName;
  choose(req: ArmRequest, pods: readonly PodView[], nowMs: number): ArmDecision | Promise<ArmDecision>;
  /** Decides again for a request it held (`decision.wait`), `waitedMs` after it was sent. */
  redecide?(req: ArmRequest, decision: ArmDecision, nowMs: number, waitedMs: number): Promise<ArmDecision>;
  /** The response finished (Kong's log phase): total response time and TTFT as the gateway measured them. */
  onComplete?(
    decision: ArmDecision,
    req: ArmRequest,
    nowMs: number,
    responseMs: number,
    ttftMs: number,
  ): void;
}
