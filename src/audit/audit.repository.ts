import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { ColumnType, CompiledQuery, Kysely } from 'kysely';
import { givenFilters, recordsetInsert } from '../database/kysely-helpers';
import type { AuditKind } from './audit.dto';

/** `audit_log` as its migration created it; rows are only ever inserted (a trigger refuses the rest). */
export interface AuditDatabase {
  audit_log: {
    id: ColumnType<string, never, never>;
    at: ColumnType<Date | string, string | undefined, never>;
    kind: AuditKind;
    key_id: string | null;
    agent: ColumnType<string | null, string | null | undefined, never>;
    chat_id: ColumnType<string | null, string | null | undefined, never>;
    tool_call_id: ColumnType<string | null, string | null | undefined, never>;
    tool: ColumnType<string | null, string | null | undefined, never>;
    action: ColumnType<string | null, string | null | undefined, never>;
    target: ColumnType<string | null, string | null | undefined, never>;
    arguments: ColumnType<unknown, unknown, never>;
    row_count: ColumnType<number | null, number | null | undefined, never>;
    duration_ms: ColumnType<number | null, number | null | undefined, never>;
    outcome: string;
  };
}

export interface AuditRow {
  id: string;
  at: Date | string;
  kind: AuditKind;
  keyId: string | null;
  agent: string | null;
  chatId: string | null;
  toolCallId: string | null;
  tool: string | null;
  action: string | null;
  target: string | null;
  arguments: unknown;
  rowCount: number | null;
  durationMs: number | null;
  outcome: string;
}

/** A tool call as it is stored. */
export interface ToolCallRow {
  at: string;
  key_id: string | null;
  agent: string | null;
  chat_id: string | null;
  tool_call_id: string | null;
  tool: string;
  action: string | null;
  target: string | null;
  arguments: unknown;
  row_count: number | null;
  duration_ms: number;
  outcome: string;
}

/** What GET /audit filters on; undefined: no filter. */
export interface AuditFilter {
  kind?: AuditKind;
  keyId?: string;
  agent?: string;
  chatId?: string;
  from?: Date;
  to?: Date;
  /** Entries older than this id (keyset paging, newest first). */
  before?: string;
}

/** Every statement about `audit_log`. */
@Injectable()
export class AuditRepository {
  constructor(private readonly em: EntityManager) {}

  /** An admin change, inside the caller's transaction `em`. */
  async insertAdmin(em: EntityManager, entry: { keyId: string | null; action: string; target: string }): Promise<void> {
    await db(em)
      .insertInto('audit_log')
      .values({ kind: 'admin', key_id: entry.keyId, action: entry.action, target: entry.target, outcome: 'ok' })
      .execute();
  }

  /** Tool calls, in one statement. */
  async insertToolCalls(rows: ToolCallRow[]): Promise<void> {
    await db(this.em.fork()).executeQuery(toolCallsInsert(rows));
  }

  /** Newest first, at most `limit` entries. */
  async list(filter: AuditFilter, limit: number): Promise<AuditRow[]> {
    return (
      db(this.em.fork())
        .selectFrom('audit_log')
        .select((eb) => [
          eb.cast<string>('id', 'text').as('id'),
          'at',
          'kind',
          'key_id as keyId',
          'agent',
          'chat_id as chatId',
          'tool_call_id as toolCallId',
          'tool',
          'action',
          'target',
          'arguments',
          'row_count as rowCount',
          'duration_ms as durationMs',
          'outcome',
        ])
        .where((eb) =>
          givenFilters(eb, [
            ['kind', '=', filter.kind],
            ['key_id', '=', filter.keyId],
            ['agent', '=', filter.agent],
            ['chat_id', '=', filter.chatId],
            ['at', '>=', filter.from],
            ['at', '<', filter.to],
            ['id', '<', filter.before],
          ]),
        )
        // The table's id, not the text one selected under the same name.
        .orderBy('audit_log.id', 'desc')
        .limit(limit)
        .execute()
    );
  }
}

/** The INSERT of tool calls (one statement for many), to run on any connection: a data transaction's too. */
export function toolCallsInsert(rows: readonly ToolCallRow[]): CompiledQuery {
  return recordsetInsert<AuditDatabase, 'audit_log'>(
    'audit_log',
    {
      at: 'timestamptz',
      kind: 'text',
      key_id: 'uuid',
      agent: 'text',
      chat_id: 'uuid',
      tool_call_id: 'text',
      tool: 'text',
      action: 'text',
      target: 'text',
      arguments: 'jsonb',
      row_count: 'integer',
      duration_ms: 'integer',
      outcome: 'text',
    },
    rows.map((row) => ({ ...row, kind: 'tool' })),
  );
}

function db(em: EntityManager): Kysely<AuditDatabase> {
  return em.getKysely<AuditDatabase>();
}
