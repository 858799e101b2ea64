// kong.client.authenticate / load_consumer on the stand-in's config, with Enterprise's consumer groups.
import type { ConsumerEntity, DeclarativeConfig, KeyAuthCredential } from './declarative.js';
import type { RequestContext } from './request-context.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * kong.client.load_consumer (kong/pdk/client.lua): by id when it is a UUID, then by username when asked.
 * A non-UUID without search_by_username is a Lua error in Kong; the caller raises it.
 */
export function loadConsumer(
  cfg: DeclarativeConfig,
  idOrName: string,
  byUsername: boolean,
): ConsumerEntity | null {
  if (UUID.test(idOrName)) {
    const c = cfg.consumers.find((x) => x.id === idOrName);
    if (c) return c;
  }
  if (byUsername) return cfg.consumers.find((x) => x.username === idOrName) ?? null;
  return null;
}

export class AuthenticateError extends Error {}

/**
 * kong.client.authenticate(consumer, credential): at least one of them; Kong Gateway Enterprise (3.4+) also
 * sets the consumer's groups (authenticate_consumer_group_by_consumer_id: sorted by name, nil when the
 * consumer is in none, never overriding groups an earlier plugin set).
 */
export function authenticate(
  ctx: RequestContext,
  cfg: DeclarativeConfig,
  consumer: ConsumerEntity | null,
  credential: KeyAuthCredential | null,
): void {
  if (!consumer && !credential) throw new AuthenticateError('either credential or consumer must be provided');
  if (!ctx.consumerGroups && consumer) {
    const groups = cfg.consumerGroups
      .filter((g) => g.consumerIds.includes(consumer.id))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    ctx.consumerGroups = groups.length > 0 ? groups : null;
  }
  ctx.consumer = consumer;
  ctx.credential = credential;
}
