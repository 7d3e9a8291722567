import type { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';

/** The kinds of definitions that name objects and fields (each is named in the error refusing a drop). */
export type DependentKind = 'agent' | 'metric' | 'view';

/**
 * A module whose definitions name objects or fields (agents' allowedObjects, metrics, saved views). It
 * registers with metadata, which asks it before dropping what they name. Every call runs in the
 * metadata write's transaction `em`: writes of those definitions take the same lock, so none can start
 * using the object or field meanwhile. Each module reads only its own tables.
 */
export interface MetadataDependent {
  /** Names of definitions that keep the object from being dropped. */
  usingObject?(em: EntityManager, objectName: string): Promise<string[]>;
  /** Names of definitions that keep the field from being dropped. */
  usingField?(em: EntityManager, objectName: string, fieldName: string): Promise<string[]>;
  /** The object is being dropped: drop the definitions that only mean something with it. */
  droppingObject?(em: EntityManager, objectName: string): Promise<void>;
}

/** The registered dependents; metadata asks them instead of reading other modules' tables. */
@Injectable()
export class MetadataDependents {
  private readonly dependents = new Map<DependentKind, MetadataDependent>();

  register(kind: DependentKind, dependent: MetadataDependent): void {
    this.dependents.set(kind, dependent);
  }

  async usingObject(kind: DependentKind, em: EntityManager, objectName: string): Promise<string[]> {
    return (await this.dependents.get(kind)?.usingObject?.(em, objectName)) ?? [];
  }

  async usingField(kind: DependentKind, em: EntityManager, objectName: string, fieldName: string): Promise<string[]> {
    return (await this.dependents.get(kind)?.usingField?.(em, objectName, fieldName)) ?? [];
  }

  async droppingObject(em: EntityManager, objectName: string): Promise<void> {
    for (const dependent of this.dependents.values()) await dependent.droppingObject?.(em, objectName);
  }
}
