import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, OnModuleInit } from '@nestjs/common';
import { PgPubSub } from '../database/pg-pubsub.service';
import { ObjectMeta } from './object-metadata.types';

/** Event telling every replica to drop its cached definitions. */
const METADATA_CHANGED = 'metadata_changed';

/**
 * Object definitions by name, shared by every request of this replica. Every metadata write
 * clears it here and, through NOTIFY, on every other replica; `generation` keeps a load that
 * raced with a write from storing what it read before the write.
 */
@Injectable()
export class MetadataCache implements OnModuleInit {
  private readonly objects = new Map<string, ObjectMeta>();
  private generation = 0;

  constructor(private readonly pubsub: PgPubSub) {}

  onModuleInit(): void {
    this.pubsub.subscribe((event) => {
      if (event.type === METADATA_CHANGED || event.type === 'resync') this.invalidate();
    });
  }

  /** The cached definition, or the one `load` reads (cached, frozen, unless a write raced with it). */
  async get(name: string, load: () => Promise<ObjectMeta>): Promise<ObjectMeta> {
    const cached = this.objects.get(name);
    if (cached) return cached;
    const generation = this.generation;
    const object = await load();
    if (generation === this.generation) this.objects.set(name, deepFreeze(object));
    return object;
  }

  /** Forgets every cached definition on this replica. */
  invalidate(): void {
    this.generation++;
    this.objects.clear();
  }

  /** Tells every replica (this one too) to forget its definitions; inside `em`'s transaction it goes out on commit. */
  publishChange(em: EntityManager): Promise<void> {
    return this.pubsub.publish({ type: METADATA_CHANGED }, em);
  }
}

/** Cached definitions are shared by concurrent requests: freezing makes an accidental mutation throw. */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
