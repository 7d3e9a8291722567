import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { sql, type ColumnType, type Kysely } from 'kysely';
import { givenFilters, insertRecordset } from '../database/kysely-helpers';

/** `usage` as its migration created it: one row per model call, only ever inserted. */
export interface UsageDatabase {
  usage: {
    id: ColumnType<string, never, never>;
    at: ColumnType<Date | string, string, never>;
    key_id: string | null;
    agent: string | null;
    chat_id: string | null;
    model: string;
    prompt_tokens: number;
    completion_tokens: number;
    total_tokens: number;
    duration_ms: number;
    outcome: string;
  };
}

/** A model call as it is stored. */
export type UsageRow = {
  [Column in Exclude<keyof UsageDatabase['usage'], 'id'>]: Column extends 'at' ? string : UsageDatabase['usage'][Column];
};

export type UsageGroup = 'key' | 'agent' | 'day';

/** What GET /usage filters on; undefined: no filter. */
export interface UsageFilter {
  keyId?: string | null;
  agent?: string;
  from?: Date;
  to?: Date;
}

export interface UsageTotals {
  keyId?: string | null;
  agent?: string | null;
  day?: string | null;
  calls: string;
  promptTokens: string;
  completionTokens: string;
  totalTokens: string;
}

/** The UTC day of a call, as a date. */
const UTC_DAY = sql<string>`("at" at time zone 'UTC')::date`;

/** Every statement about `usage`. */
@Injectable()
export class UsageRepository {
  constructor(private readonly em: EntityManager) {}

  async insert(rows: UsageRow[]): Promise<void> {
    await insertRecordset(
      this.db(),
      'usage',
      {
        at: 'timestamptz',
        key_id: 'uuid',
        agent: 'text',
        chat_id: 'uuid',
        model: 'text',
        prompt_tokens: 'integer',
        completion_tokens: 'integer',
        total_tokens: 'integer',
        duration_ms: 'integer',
        outcome: 'text',
      },
      rows,
    );
  }

  /**
   * Tokens used since `since` by the key and by the agent, in one statement on their indexes; a side
   * that is not asked for (null) reads 0 without touching the table.
   */
  async tokensSince(since: Date, keyId: string | null, agent: string | null): Promise<{ keyUsed: string; agentUsed: string }> {
    const used = (column: 'key_id' | 'agent', value: string) =>
      this.db()
        .selectFrom('usage')
        .select((eb) => eb.fn.coalesce(eb.fn.sum<string>('total_tokens'), eb.lit(0)).as('used'))
        .where(column, '=', value)
        .where('at', '>=', since);
    const row = await this.db()
      .selectNoFrom((eb) => [
        keyId === null ? eb.lit(0).as('keyUsed') : used('key_id', keyId).as('keyUsed'),
        agent === null ? eb.lit(0).as('agentUsed') : used('agent', agent).as('agentUsed'),
      ])
      .executeTakeFirstOrThrow();
    return { keyUsed: String(row.keyUsed), agentUsed: String(row.agentUsed) };
  }

  /** Totals per key, agent or UTC day, largest (or latest) first. */
  async totals(group: UsageGroup, filter: UsageFilter, limit: number): Promise<UsageTotals[]> {
    const query = this.db()
      .selectFrom('usage')
      .select((eb) => [
        eb.fn.countAll<string>().as('calls'),
        eb.fn.sum<string>('prompt_tokens').as('promptTokens'),
        eb.fn.sum<string>('completion_tokens').as('completionTokens'),
        eb.fn.sum<string>('total_tokens').as('totalTokens'),
      ])
      .where((eb) =>
        givenFilters(eb, [
          ['key_id', '=', filter.keyId],
          ['agent', '=', filter.agent],
          ['at', '>=', filter.from],
          ['at', '<', filter.to],
        ]),
      )
      .limit(limit);
    if (group === 'day') {
      return query
        .select(sql<string>`to_char(${UTC_DAY}, 'YYYY-MM-DD')`.as('day'))
        .groupBy(UTC_DAY)
        .orderBy(UTC_DAY, 'desc')
        .execute();
    }
    const column = group === 'key' ? 'key_id' : 'agent';
    return query
      .select(group === 'key' ? 'key_id as keyId' : 'agent')
      .groupBy(column)
      .orderBy((eb) => eb.fn.sum('total_tokens'), 'desc')
      .orderBy(column)
      .execute();
  }

  private db(): Kysely<UsageDatabase> {
    return this.em.fork().getKysely<UsageDatabase>();
  }
}
