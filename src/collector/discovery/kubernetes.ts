// Pod discovery from Kubernetes: kubeconfig loading, list and watch of EndpointSlices, retries.
import { DiscoveryV1Api, KubeConfig, ListWatch, Watch, type V1EndpointSlice } from '@kubernetes/client-node';
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KinferenceError } from '../../core/errors.js';
import type { Logger } from '../logger.js';
import type { PodSpec } from '../pods.js';
import type { Discovery } from './discovery.js';
import { podsFromEndpointSlices, type KubernetesSection } from './endpoint-slices.js';
import { NotReadyGrace } from './not-ready-grace.js';

const SERVICE_LABEL = 'kubernetes.io/service-name';
const IN_CLUSTER_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * The credentials for `kubernetes:` discovery: `path`, else $KUBECONFIG, ~/.kube/config, in-cluster. A missing
 * or unusable kubeconfig is a config error: client-node would throw "No active cluster!" with a stack trace,
 * or, with no credentials at all, fall back to http://localhost:8080 and fail every 2 s with a TLS message.
 */
export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  const envKubeconfig = process.env.KUBECONFIG || undefined; // client-node ignores an empty one too
  const source = path ?? envKubeconfig ?? join(homedir(), '.kube', 'config');
  const inCluster = path === undefined && envKubeconfig === undefined && !existsSync(source);
  if (inCluster && !existsSync(IN_CLUSTER_TOKEN))
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      'kubernetes: no credentials: set collector.kubeconfig or KUBECONFIG, create ~/.kube/config, or run ' +
        `in a pod with a service account (${IN_CLUSTER_TOKEN})`,
    );
  const where = path !== undefined ? `collector.kubeconfig ${path}` : inCluster ? 'in-cluster' : source;
  try {
    if (path !== undefined) kc.loadFromFile(path);
    else kc.loadFromDefault();
  } catch (e) {
    throw new KinferenceError('KINF_ERR_CONFIG', `kubernetes: ${where}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (!kc.getCurrentCluster())
    throw new KinferenceError(
      'KINF_ERR_CONFIG',
      `kubernetes: ${where}: no current cluster (check current-context and its cluster)`,
    );
  return kc;
}

/** Pause before restarting a failed list or watch: doubled on each failure in a row, up to the max. */
export const K8S_RETRY_MIN_MS = 1000;
export const K8S_RETRY_MAX_MS = 30_000;
const backoffMs = (failuresBefore: number): number =>
  Math.min(K8S_RETRY_MAX_MS, K8S_RETRY_MIN_MS * 2 ** Math.min(failuresBefore, 16));
/** A watch the server closes sooner than this after it opened is reopened only after a pause. */
const QUICK_CLOSE_MS = 1000;
/** The API server is asked to end each watch within this (it reopens from the last resourceVersion). */
export const WATCH_TIMEOUT_S = 300;

/**
 * A Watch that asks the server to end it within `timeoutS` and aborts it if it is still open well after:
 * a connection dropped without a word (a NAT or load balancer that forgot it) sends no FIN, and client-node
 * would otherwise notice only through TCP keepalive, minutes later, missing every pod change meanwhile.
 */
class BoundedWatch extends Watch {
  constructor(
    kc: KubeConfig,
    readonly timeoutS: number,
  ) {
    super(kc);
  }

  override async watch(
    path: string,
    queryParams: Record<string, unknown>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    let timer: NodeJS.Timeout | null = null;
    let ended = false;
    const end = (err: unknown): void => {
      ended = true;
      if (timer) clearTimeout(timer);
      done(err);
    };
    const controller = await super.watch(
      path,
      { ...queryParams, timeoutSeconds: this.timeoutS },
      callback,
      end,
    );
    if (!ended) {
      const abortAfterMs = this.timeoutS * 1000 + Math.min(30_000, this.timeoutS * 1000);
      timer = setTimeout(() => controller.abort(), abortAfterMs);
      timer.unref();
    }
    return controller;
  }
}

/** What went wrong talking to the API server, with what to do about it when that is known. */
export function describeKubernetesError(
  err: unknown,
  k8s: Pick<KubernetesSection, 'namespace' | 'service'>,
): { status: number | null; message: string } {
  const e = err as { code?: unknown; statusCode?: unknown; body?: unknown; message?: unknown } | null;
  const status =
    typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : null;
  // client-node's ApiException message carries the whole response; the API's Status says it in one line.
  let reason: string | null = null;
  const body: unknown = typeof e?.body === 'string' ? parseJson(e.body) : e?.body;
  if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string')
    reason = (body as { message: string }).message;
  reason ??= typeof e?.message === 'string' ? e.message.split('\n')[0]! : String(err);
  const where = `EndpointSlices of Service ${k8s.service} in namespace ${k8s.namespace}`;
  if ((err as { name?: unknown } | null)?.name === 'AbortError')
    return {
      status,
      message: `the watch of the ${where} stayed open past its timeout with nothing from the API server (connection lost)`,
    };
  if (status === 401)
    return { status, message: `the API server refused the credentials (401) for the ${where}: ${reason}` };
  if (status === 403)
    return {
      status,
      message:
        `forbidden (403) to list and watch the ${where}: grant the collector's service account list and watch ` +
        `on endpointslices.discovery.k8s.io in namespace ${k8s.namespace} (deploy/kubernetes/collector/rbac.yaml): ${reason}`,
    };
  return {
    status,
    message: `cannot list or watch the ${where}${status ? ` (HTTP ${status})` : ''}: ${reason}`,
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * Follows the EndpointSlices of one Service with @kubernetes/client-node's informer (list, then watch
 * from the list's resourceVersion; a 410 relists). Changes are debounced: an endpoint moving between
 * slices shows up as delete + add, which must not look like a pod leaving. A pod failing its readiness
 * probe is handed on as not ready for `not_ready_grace_ms`, then dropped (NotReadyGrace).
 *
 * Nothing is handed on before a list has succeeded: a list refused (RBAC, API server down) must not read
 * as a Service with no pods, which would remove every pod from the index. Until then `synced` is false and
 * the collector's /healthz says not ready. A failed list or watch is retried with backoff, forever.
 */
export class KubernetesDiscovery implements Discovery {
  #informer: ListWatch<V1EndpointSlice> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #graceTimer: NodeJS.Timeout | null = null;
  #retryTimer: NodeJS.Timeout | null = null;
  /** Lists or watches failed in a row: the backoff and the "again" line follow from it. */
  #failures = 0;
  #stopped = false;
  #synced = false;
  #warnedEmpty = false;
  /** The informer's last restart threw (routed to `failed` by #guardRestarts). */
  #restartFailed = false;
  readonly #grace: NotReadyGrace;

  constructor(
    readonly k8s: KubernetesSection,
    readonly log: Logger,
    readonly kubeconfigPath?: string,
    readonly debounceMs = 200,
    readonly watchTimeoutS = WATCH_TIMEOUT_S,
  ) {
    this.#grace = new NotReadyGrace(k8s.not_ready_grace_ms);
  }

  get notReadyGraceMs(): number {
    return this.k8s.not_ready_grace_ms;
  }

  /** A list of the Service's EndpointSlices has succeeded since start. */
  get synced(): boolean {
    return this.#synced;
  }

  async start(onChange: (pods: PodSpec[]) => void): Promise<void> {
    const kc = loadKubeConfig(this.kubeconfigPath);
    const api = kc.makeApiClient(DiscoveryV1Api);
    const { namespace, service } = this.k8s;
    const labelSelector = `${SERVICE_LABEL}=${service}`;
    // makeInformer's own construction, kept as a ListWatch: latestResourceVersion says a list succeeded.
    const informer = new ListWatch<V1EndpointSlice>(
      `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/endpointslices`,
      new BoundedWatch(kc, this.watchTimeoutS),
      () => api.listNamespacedEndpointSlice({ namespace, labelSelector }),
      false,
      labelSelector,
    );
    this.#informer = informer;
    const publish = (): void => {
      if (!this.#synced || this.#stopped) return;
      if (this.#graceTimer) clearTimeout(this.#graceTimer);
      this.#graceTimer = null;
      const now = Date.now();
      const slices = informer.list(namespace);
      if (slices.length === 0 && !this.#warnedEmpty)
        this.log.warn(
          `kubernetes: no EndpointSlice labelled ${labelSelector} in namespace ${namespace}: no pod to follow ` +
            '(check kubernetes.namespace and kubernetes.service, and that the Service has a selector)',
        );
      this.#warnedEmpty = slices.length === 0;
      const { pods, recheckAtMs } = this.#grace.apply(podsFromEndpointSlices(slices, this.k8s), now);
      // A grace that ends drops its pod even if nothing else changes by then.
      if (recheckAtMs !== null) {
        this.#graceTimer = setTimeout(publish, recheckAtMs - now);
        this.#graceTimer.unref();
      }
      onChange(pods);
    };
    const emit = (): void => {
      if (this.#timer || this.#stopped) return;
      this.#timer = setTimeout(() => {
        this.#timer = null;
        publish();
      }, this.debounceMs);
    };
    // After each (re)start: the first list that succeeded starts the pods; a start that failed nowhere ends a
    // failure streak (a watch refused at once calls back, and a retry is pending, before start returns).
    const started = (): void => {
      if (this.#stopped || informer.latestResourceVersion() === '') return;
      if (!this.#synced) {
        this.#synced = true;
        publish();
      }
      if (this.#restartFailed || this.#retryTimer) return;
      if (this.#failures > 0) this.log.info('kubernetes: listing and watching EndpointSlices again');
      this.#failures = 0;
    };
    const failed = (err: unknown): void => {
      if (this.#stopped || this.#retryTimer) return; // stop() aborts the watch, which reports an error
      const { status, message } = describeKubernetesError(err, this.k8s);
      const delayMs = backoffMs(this.#failures++);
      // The informer stops on errors other than 410 and timeouts: restart it (it relists when it must).
      this.log.error(`kubernetes: ${message}; retrying in ${delayMs} ms`, {
        status,
        ...(this.#synced
          ? { keeping: 'the pods of the last list' }
          : { following: 'no pod until a list succeeds' }),
      });
      this.#retryTimer = setTimeout(() => {
        this.#retryTimer = null;
        if (this.#stopped) return;
        informer.start().then(started, failed);
      }, delayMs);
      this.#retryTimer.unref();
    };
    this.#guardRestarts(informer, failed);
    informer.on('add', emit);
    informer.on('update', emit);
    informer.on('delete', emit);
    informer.on('error', failed);
    await informer.start().then(started, failed);
  }

  /**
   * client-node 1.4 calls the informer's restart (`doneHandler`) from its watch without awaiting it, so a
   * failure there (an exec credential plugin that fails on a reconnect) would be an unhandled rejection
   * that kills the process; and it reopens a watch the server closed at once without a pause (a proxy
   * that closes every stream would spin). Route the first to `failed`, and pause before the second.
   */
  #guardRestarts(informer: object, failed: (err: unknown) => void): void {
    const lw = informer as { doneHandler: (err: unknown) => Promise<void> };
    const done = lw.doneHandler.bind(informer);
    let openedAtMs = 0;
    let quickCloses = 0;
    lw.doneHandler = async (err: unknown): Promise<void> => {
      try {
        if (!err && openedAtMs > 0 && Date.now() - openedAtMs < QUICK_CLOSE_MS) {
          await sleep(backoffMs(quickCloses++), undefined, { ref: false });
          if (this.#stopped) return;
        } else if (!err) quickCloses = 0;
        openedAtMs = Date.now();
        this.#restartFailed = false;
        await done(err);
      } catch (e) {
        this.#restartFailed = true;
        failed(e);
      }
    };
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#graceTimer) clearTimeout(this.#graceTimer);
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    await this.#informer?.stop();
  }
}
