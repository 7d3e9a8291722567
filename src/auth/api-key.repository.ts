import type { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { Kysely } from 'kysely';

/** The columns of `api_keys` read here with Kysely (the rest goes through ApiKeyEntity). */
interface ApiKeyDatabase {
  api_keys: { id: string; revoked: boolean; policies: string; role: 'admin' | 'member'; subject: string; owner: string };
}

/** Statements about `api_keys` that the entity cannot say. */
@Injectable()
export class ApiKeyRepository {
  /** Active keys that run under the policy, counted in the transaction `em`. */
  async countActiveWithPolicy(em: EntityManager, policy: string): Promise<number> {
    const row = await db(em)
      .selectFrom('api_keys')
      .select((eb) => eb.cast<number>(eb.fn.countAll(), 'integer').as('count'))
      .where('revoked', '=', false)
      .where('policies', '@>', JSON.stringify([policy]))
      .executeTakeFirstOrThrow();
    return row.count;
  }

  /**
   * The role, subject and owner of an active key: one plain statement (what turns check their key against,
   * so no entity is built for it).
   */
  activeIdentity(
    em: EntityManager,
    keyId: string,
  ): Promise<{ role: 'admin' | 'member'; subject: string; owner: string } | undefined> {
    return db(em)
      .selectFrom('api_keys')
      .select(['role', 'subject', 'owner'])
      .where('id', '=', keyId)
      .where('revoked', '=', false)
      .executeTakeFirst();
  }
}

function db(em: EntityManager): Kysely<ApiKeyDatabase> {
  return em.getKysely<ApiKeyDatabase>();
}
