// The simple arms: random, Kong's round-robin and least-connections.
import type { Rng } from '../rng.js';
import type { Arm, ArmDecision, PodView } from './types.js';

/** kube-proxy (iptables mode): a uniformly random endpoint per connection; one request per connection here. */
export function randomArm(rng: Rng): Arm {
  return { name: 'random', choose: (_r, pods) => ({ podId: rng.pick(pods).id }) };
}

/** Kong's default upstream algorithm: round-robin over equal-weight targets. */
export function roundRobinArm(): Arm {
  let next = 0;
  return {
    name: 'round-robin',
    choose: (_r, pods) => ({ podId: pods[next++ % pods.length]!.id }),
  };
}

/** Kong's least-connections: fewest in-flight requests from this gateway; ties go round-robin. */
export function leastConnectionsArm(): Arm {
  let rr = 0;
  return {
    name: 'least-connections',
    choose: (_r, pods): ArmDecision => {
      const min = Math.min(...pods.map((p) => p.inFlight));
      const tied: PodView[] = pods.filter((p) => p.inFlight === min);
      return { podId: tied[rr++ % tied.length]!.id };
    },
  };
}
