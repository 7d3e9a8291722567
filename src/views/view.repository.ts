import type { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { Kysely } from 'kysely';
import { MetadataDependents, type MetadataDependent } from '../metadata/metadata-dependents';

interface ViewDatabase {
  views: { name: string; object: string; uses: string };
}

/** Statements about `views` that the entity cannot say; answers metadata about the fields views name. */
@Injectable()
export class ViewRepository implements MetadataDependent {
  constructor(dependents: MetadataDependents) {
    dependents.register('view', this);
  }

  /** Names of the saved views (anyone's) that name the field, each once. */
  async usingField(em: EntityManager, objectName: string, fieldName: string): Promise<string[]> {
    const rows = await db(em)
      .selectFrom('views')
      .select('name')
      .distinct()
      .where('uses', '?', `${objectName}.${fieldName}`)
      .orderBy('name')
      .execute();
    return rows.map((row) => row.name);
  }

  /** A view only means something with its object: they go together. */
  async droppingObject(em: EntityManager, objectName: string): Promise<void> {
    await db(em).deleteFrom('views').where('object', '=', objectName).execute();
  }
}

function db(em: EntityManager): Kysely<ViewDatabase> {
  return em.getKysely<ViewDatabase>();
}
