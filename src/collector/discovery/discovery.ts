import type { PodSpec } from '../pods.js';

/** Source of the pod list. `onChange` receives the whole current list each time it changes. */
export interface Discovery {
  start(onChange: (pods: PodSpec[]) => void): Promise<void>;
  stop(): Promise<void>;
}
