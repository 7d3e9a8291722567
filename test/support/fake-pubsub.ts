import type { PgPubSub } from '../../src/database/pg-pubsub.service';

/** A pubsub for unit specs: what was published, and `deliver` to hand its listener an event (as a NOTIFY would). */
export function fakePubSub() {
  const published: Array<Record<string, unknown>> = [];
  let listener: (event: Record<string, unknown>) => void = () => undefined;
  const pubsub = {
    subscribe: (l: typeof listener) => {
      listener = l;
      return () => undefined;
    },
    publish: (event: Record<string, unknown>) => {
      published.push(event);
      return Promise.resolve();
    },
  };
  return { pubsub: pubsub as unknown as PgPubSub, published, deliver: (event: Record<string, unknown>) => listener(event) };
}
