import type { PgPubSub } from '../../src/database/pg-pubsub.service';

/**
 * A pubsub for unit specs: what was published, `deliver` to hand its listeners an event (as a NOTIFY would),
 * and `listening`, what a spec sets to false for a LISTEN connection that is down.
 */
export function fakePubSub() {
  const published: Array<Record<string, unknown>> = [];
  const listeners = new Set<(event: Record<string, unknown>) => void>();
  const pubsub = {
    listening: true,
    subscribe: (l: (event: Record<string, unknown>) => void) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    publish: (event: Record<string, unknown>) => {
      published.push(event);
      return Promise.resolve();
    },
  };
  return {
    pubsub: pubsub as unknown as PgPubSub,
    published,
    deliver: (event: Record<string, unknown>) => {
      for (const listener of listeners) listener(event);
    },
    setListening: (listening: boolean) => {
      pubsub.listening = listening;
    },
  };
}
