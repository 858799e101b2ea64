import {
  DiscoveryV1Api,
  KubeConfig,
  makeInformer,
  type Informer,
  type V1EndpointSlice,
} from '@kubernetes/client-node';
import type { ObjectCache } from '@kubernetes/client-node';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KinferenceError } from '../../core/errors.js';
import type { Logger } from '../logger.js';
import type { PodSpec } from '../pods.js';
import type { Discovery } from './discovery.js';
import { podsFromEndpointSlices, type KubernetesSection } from './endpoint-slices.js';

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

/**
 * Follows the EndpointSlices of one Service with @kubernetes/client-node's informer (list, then watch
 * from the list's resourceVersion; a 410 relists). Changes are debounced: an endpoint moving between
 * slices shows up as delete + add, which must not look like a pod leaving.
 */
export class KubernetesDiscovery implements Discovery {
  #informer: (Informer<V1EndpointSlice> & ObjectCache<V1EndpointSlice>) | null = null;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;

  constructor(
    readonly k8s: KubernetesSection,
    readonly log: Logger,
    readonly kubeconfigPath?: string,
    readonly debounceMs = 200,
  ) {}

  async start(onChange: (pods: PodSpec[]) => void): Promise<void> {
    const kc = loadKubeConfig(this.kubeconfigPath);
    const api = kc.makeApiClient(DiscoveryV1Api);
    const { namespace, service } = this.k8s;
    const labelSelector = `${SERVICE_LABEL}=${service}`;
    const informer = makeInformer<V1EndpointSlice>(
      kc,
      `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/endpointslices`,
      () => api.listNamespacedEndpointSlice({ namespace, labelSelector }),
      labelSelector,
    );
    this.#informer = informer;
    const emit = (): void => {
      if (this.#timer || this.#stopped) return;
      this.#timer = setTimeout(() => {
        this.#timer = null;
        if (!this.#stopped) onChange(podsFromEndpointSlices(informer.list(namespace), this.k8s));
      }, this.debounceMs);
    };
    informer.on('add', emit);
    informer.on('update', emit);
    informer.on('delete', emit);
    informer.on('error', (err: unknown) => {
      if (this.#stopped) return; // stop() aborts the watch, which reports an error
      // The informer stops on errors other than 410/timeouts; restart it after a pause.
      this.log.warn('kubernetes watch failed; restarting', { err });
      setTimeout(() => {
        if (!this.#stopped)
          informer.start().catch((e: unknown) => this.log.error('kubernetes list failed', { err: e }));
      }, 2000).unref();
    });
    await informer.start();
    onChange(podsFromEndpointSlices(informer.list(namespace), this.k8s));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#informer?.stop();
  }
}
