import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { PgPubSub } from '../database/pg-pubsub.service';
import { deepFreeze, ReplicatedCache } from '../database/replicated-cache';
import { ObjectMeta } from './object-metadata.types';

/** Event telling every replica to drop its cached definitions. */
const METADATA_CHANGED = 'metadata_changed';

/**
 * Object definitions by name, shared by every request of this replica. Every metadata write
 * clears it here and, through NOTIFY, on every other replica.
 */
@Injectable()
export class MetadataCache {
  private readonly objects: ReplicatedCache<ObjectMeta>;

  constructor(pubsub: PgPubSub) {
    this.objects = new ReplicatedCache(pubsub, METADATA_CHANGED);
  }

  /** The cached definition, or the one `load` reads (cached, frozen, unless a write raced with it). */
  get(name: string, load: () => Promise<ObjectMeta>): Promise<ObjectMeta> {
    return this.objects.get(name, async () => deepFreeze(await load()));
  }

  /** Forgets every cached definition on this replica. */
  invalidate(): void {
    this.objects.invalidate();
  }

  /** Tells every replica (this one too) to forget its definitions; inside `em`'s transaction it goes out on commit. */
  publishChange(em: EntityManager): Promise<void> {
    return this.objects.publishChange(em);
  }
}
