import type { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { Kysely } from 'kysely';
import { MetadataDependents, type MetadataDependent } from '../metadata/metadata-dependents';

interface AgentDatabase {
  agents: { name: string; allowed_objects: string };
}

/** Statements about `agents` that the entity cannot say; tells metadata which agents grant an object. */
@Injectable()
export class AgentRepository implements MetadataDependent {
  constructor(dependents: MetadataDependents) {
    dependents.register('agent', this);
  }

  /**
   * Agents whose allowedObjects name the object: an object cannot be dropped while an agent still grants
   * it (a re-created namesake would inherit it).
   */
  async usingObject(em: EntityManager, objectName: string): Promise<string[]> {
    const rows = await db(em)
      .selectFrom('agents')
      .select('name')
      .where('allowed_objects', '?', objectName)
      .orderBy('name')
      .execute();
    return rows.map((row) => row.name);
  }
}

function db(em: EntityManager): Kysely<AgentDatabase> {
  return em.getKysely<AgentDatabase>();
}
