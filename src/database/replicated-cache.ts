import type { EntityManager } from '@mikro-orm/postgresql';
import { PgPubSub } from './pg-pubsub.service';

/**
 * A replica's cache of values read from the database, cleared on every replica by one pubsub event
 * (and by a `resync` after the LISTEN connection was lost). `generation` keeps a load that raced with
 * a change from storing what it read before the change. Past `maxEntries` it starts over, so keys a
 * caller chooses cannot grow it without bound.
 */
export class ReplicatedCache<V> {
  private readonly entries = new Map<string, V>();
  /** Loads under way, each shared by the reads of its key that miss meanwhile (in the same generation). */
  private readonly loading = new Map<string, { generation: number; value: Promise<V> }>();
  private generation = 0;

  constructor(
    private readonly pubsub: PgPubSub,
    private readonly changeEvent: string,
    private readonly maxEntries = 10_000,
  ) {
    pubsub.subscribe((event) => {
      if (event.type === changeEvent || event.type === 'resync') this.invalidate();
    });
  }

  /**
   * The cached value, or the one `load` reads (cached unless a change raced with it, or `keep` refuses it).
   * Reads that miss while a load of their key is under way, started since the last change, share it: a burst
   * of requests for a key not cached yet makes one read, not one each.
   */
  async get(key: string, load: () => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    if (this.entries.has(key)) return this.entries.get(key) as V;
    const generation = this.generation;
    const shared = this.loading.get(key);
    if (shared?.generation === generation) return shared.value;
    const value = load()
      .then((loaded) => {
        if (generation === this.generation && keep(loaded)) {
          if (this.entries.size >= this.maxEntries) this.entries.clear();
          this.entries.set(key, loaded);
        }
        return loaded;
      })
      .finally(() => {
        if (this.loading.get(key)?.value === value) this.loading.delete(key);
      });
    this.loading.set(key, { generation, value });
    return value;
  }

  /** Forgets every cached value on this replica. */
  invalidate(): void {
    this.generation++;
    this.entries.clear();
  }

  /**
   * Tells every replica (this one too) to forget its values; inside `em`'s transaction it goes out on
   * commit (a writer calls invalidate() once committed, not to wait for the notification's round trip).
   */
  async publishChange(em?: EntityManager): Promise<void> {
    await this.pubsub.publish({ type: this.changeEvent }, em);
  }
}

/** Cached values are shared by concurrent requests: freezing makes an accidental mutation throw. */
export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
