import type { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { sql, type Kysely } from 'kysely';
import type { IdentityMapping } from './identity-mapping';

interface IdentityDatabase {
  identity_mapping: { id: number; mapping: IdentityMapping; updated_at: Date };
}

/** The one row of `identity_mapping`. */
@Injectable()
export class IdentityMappingRepository {
  async get(em: EntityManager): Promise<IdentityMapping | undefined> {
    const row = await db(em).selectFrom('identity_mapping').select('mapping').where('id', '=', 1).executeTakeFirst();
    return row?.mapping;
  }

  async put(em: EntityManager, mapping: IdentityMapping): Promise<void> {
    const json = sql<IdentityMapping>`${JSON.stringify(mapping)}::jsonb`;
    await db(em)
      .insertInto('identity_mapping')
      .values({ id: 1, mapping: json, updated_at: sql<Date>`now()` })
      .onConflict((oc) => oc.column('id').doUpdateSet({ mapping: json, updated_at: sql<Date>`now()` }))
      .execute();
  }
}

function db(em: EntityManager): Kysely<IdentityDatabase> {
  return em.getKysely<IdentityDatabase>();
}
