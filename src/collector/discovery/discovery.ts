// The Discovery interface: where the collector's pod list comes from and how it hears of changes.
import type { PodSpec } from '../pods.js';

/** Source of the pod list. `onChange` receives the whole current list each time it changes. */
export interface Discovery {
  /** How long a pod that is not ready stays in the list (Kubernetes), for the logs. */
  readonly notReadyGraceMs?: number;
  /** false until the source has been read once (Kubernetes: a list succeeded); absent: always read. */
  readonly synced?: boolean;
  start(onChange: (pods: PodSpec[]) => void): Promise<void>;
  stop(): Promise<void>;
}
