import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { type RawBuilder, type Selectable, sql } from 'kysely';
import { ADVISORY_LOCK } from '../../database/advisory-locks';
import type { LlmUsage } from '../../llm/llm.types';
import type { DynamicTool } from '../../runtime/client-tools';
import { loggedEvents } from './chat-events.repository';
import { ChatEvents } from './chat-events.service';
import type { ChatsTable } from './chat.tables';
import {
  CHAT_COLUMNS,
  CHAT_CREATED_COLUMNS,
  db,
  json,
  MESSAGE_COLUMNS,
  messagesJson,
  now,
  statusSet,
  toChat,
  toMessageRow,
  type StatusChange,
} from './chat.rows';
import { CHAT_STATUSES, ChatMessageRow, ChatPart, ChatRole, ChatEvent, ChatRow, ChatStatus, StepMetadata } from './chat.types';

/** A message to append: what insertMessage takes. */
export interface NewMessage {
  role: ChatRole;
  parts: ChatPart[];
  usage?: LlmUsage;
  clientId?: string | null;
  metadata?: StepMetadata;
  /** The key that posted it, or whose turn produced it. */
  keyId?: string | null;
  /** Of tool results the server produced: the fingerprint of the access they were produced under. */
  access?: string | null;
}

/** A new chat's row (pending, its turn run as the key that created it): what insertChat inserts. */
export interface NewChatRow {
  id: string;
  clientId?: string | null;
  owner: string;
  ownerRole: ChatRow['ownerRole'];
  ownerKeyId: string;
  agent: string;
  title: string | null;
  context: Record<string, string> | null;
  dynamicTools: DynamicTool[];
}

/**
 * One write of a chat, done by `write` in a single statement: new messages, then the chat's row
 * (a status change and/or the turn's progress), then the events, in this order on commit:
 * `before`, one `message` event per new message, `after`.
 */
export interface ChatWrite {
  chatId: string;
  owner: string;
  /** Only while this claim still holds the running chat (checked under its row lock); otherwise nothing is written. */
  claim?: { workerId: string; claimToken: string | null };
  /** Only while the chat (of `owner`) is in one of these statuses (checked under its row lock); otherwise nothing is written. */
  from?: readonly ChatStatus[];
  /** Only while the chat still has this agent and these client tools (what its turn was admitted for); otherwise nothing is written. */
  setup?: { agent: string; dynamicTools: DynamicTool[] };
  /**
   * Only while the owner has fewer than `limit` chats pending or running; otherwise nothing is written.
   * Counted in this statement after the chat's row lock, under the owner's admission lock, held until
   * commit: concurrent turn starts of one owner are counted one at a time, each seeing the chats the
   * previous ones committed (see admits).
   */
  admit?: { limit: number };
  messages?: NewMessage[];
  status?: StatusChange;
  /** With a status change: the key the turn now runs as (the one that posted what made the chat pending). */
  turnKeyId?: string;
  /** The turn's iterations and tokens so far; with no status change, the heartbeat too. */
  progress?: { iterations: number; tokens: number };
  before?: ChatEvent[];
  after?: ChatEvent[];
}

/**
 * Every SQL statement about chats, on typed Kysely bound to the caller's EntityManager (and so to
 * its transaction). State changes that workers race on (claims, heartbeats, ownership checks,
 * status transitions) are single statements or run under the chat's row lock.
 */
@Injectable()
export class ChatRepository {
  constructor(private readonly events: ChatEvents) {}

  /**
   * A new chat, pending for a worker, written with `change` (its first messages and events) in one
   * statement, as `write` writes an existing chat's: nothing is written unless the owner is admitted
   * (`change.admit`, counted under the owner's admission lock). Returns the chat and its messages' ids, or
   * undefined when the owner was not admitted. A client id the owner already uses fails the statement
   * (unique violation).
   */
  async insertChat(
    em: EntityManager,
    chat: NewChatRow,
    change: Pick<ChatWrite, 'admit' | 'messages' | 'before' | 'after'>,
  ): Promise<{ chat: ChatRow; messageIds: number[] } | undefined> {
    const kysely = db(em);
    // The values as a SELECT, so the admission can decide whether the row goes in (a WHERE, which VALUES has not).
    const values = kysely
      .selectNoFrom([
        sql<string>`${chat.id}::uuid`.as('id'),
        sql<string | null>`${chat.clientId ?? null}::text`.as('client_id'),
        sql<string>`${chat.owner}::text`.as('owner'),
        sql<ChatRow['ownerRole']>`${chat.ownerRole}::text`.as('owner_role'),
        sql<string>`${chat.ownerKeyId}::uuid`.as('owner_key_id'),
        sql<string>`${chat.ownerKeyId}::uuid`.as('turn_key_id'),
        sql<string>`${chat.agent}::text`.as('agent'),
        sql<string | null>`${chat.title}::text`.as('title'),
        sql<ChatStatus>`'pending'`.as('status'),
        sql<string | null>`${json(chat.context)}::jsonb`.as('context'),
        sql<string>`${json(chat.dynamicTools)}::jsonb`.as('dynamic_tools'),
      ])
      .$if(change.admit !== undefined, (qb) => qb.where(admits(chat.owner, change.admit!.limit)));
    const insert = kysely.insertInto('chats').columns(CHAT_CREATED_COLUMNS).expression(values).returning(CHAT_COLUMNS);
    const written = await this.writeStatement(
      em,
      { ...change, chatId: chat.id, owner: chat.owner },
      sql`created as (${insert}), target as (select id from created)`,
      sql`(select to_jsonb(c) from created c)`,
    );
    return written && { chat: toChat(written.row as Selectable<ChatsTable>), messageIds: written.messageIds };
  }

  /** The chat (only if `owner` owns it, when given); `lock` takes its row lock for the caller's transaction. */
  async find(em: EntityManager, id: string, owner?: string, options: { lock?: boolean } = {}): Promise<ChatRow | undefined> {
    const row = await db(em)
      .selectFrom('chats')
      .select(CHAT_COLUMNS)
      .where('id', '=', id)
      .$if(owner !== undefined, (qb) => qb.where('owner', '=', owner!))
      .$if(options.lock === true, (qb) => qb.forUpdate())
      .executeTakeFirst();
    return row ? toChat(row) : undefined;
  }

  /**
   * The owner's chat with its messages after `afterId` (the first `limit` of them), read by one snapshot:
   * where a stream of the chat starts from. Undefined when the owner has no such chat.
   */
  async findWithMessages(
    em: EntityManager,
    id: string,
    owner: string,
    afterId: number,
    limit: number,
  ): Promise<{ chat: ChatRow; messages: ChatMessageRow[]; lastEventId: number } | undefined> {
    const page = sql`(select * from chat_messages where chat_id = ${id} and id > ${afterId} order by id limit ${limit}) m`;
    const row = await db(em)
      .selectFrom('chats')
      .select(CHAT_COLUMNS)
      .select(messagesJson(page).as('messages'))
      // In the same snapshot: the chat's events up to this one are what the row and the messages show.
      .select(sql<string | null>`(select max(e.id) from chat_events e where e.chat_id = chats.id)`.as('last_event_id'))
      .where('id', '=', id)
      .where('owner', '=', owner)
      .executeTakeFirst();
    return row && { chat: toChat(row), messages: row.messages.map(toMessageRow), lastEventId: Number(row.last_event_id ?? 0) };
  }

  /** The owner's chat with this client id (an AI SDK chat id); `lock` as for find. */
  async findByClientId(
    em: EntityManager,
    owner: string,
    clientId: string,
    options: { lock?: boolean } = {},
  ): Promise<ChatRow | undefined> {
    const row = await db(em)
      .selectFrom('chats')
      .select(CHAT_COLUMNS)
      .where('owner', '=', owner)
      .where('client_id', '=', clientId)
      .$if(options.lock === true, (qb) => qb.forUpdate())
      .executeTakeFirst();
    return row ? toChat(row) : undefined;
  }

  /** What the next turn runs with: the client's tools and context, as a client sends them again with a message. */
  async updateSetup(
    em: EntityManager,
    id: string,
    setup: { dynamicTools?: DynamicTool[]; context?: Record<string, string> | null },
  ): Promise<void> {
    if (setup.dynamicTools === undefined && setup.context === undefined) return;
    await db(em)
      .updateTable('chats')
      .set({
        dynamic_tools: setup.dynamicTools === undefined ? undefined : json(setup.dynamicTools),
        context: setup.context === undefined ? undefined : json(setup.context),
      })
      .where('id', '=', id)
      .execute();
  }

  /** The owner's chats, most recently updated first. */
  async listOwned(em: EntityManager, owner: string, limit: number, offset: number): Promise<ChatRow[]> {
    const rows = await db(em)
      .selectFrom('chats')
      .select(CHAT_COLUMNS)
      .where('owner', '=', owner)
      .orderBy('updated_at', 'desc')
      .orderBy('id')
      .limit(limit)
      .offset(offset)
      .execute();
    return rows.map(toChat);
  }

  /** Deletes the chat; its messages go with it (on delete cascade). */
  async deleteChat(em: EntityManager, id: string): Promise<void> {
    await db(em).deleteFrom('chats').where('id', '=', id).execute();
  }

  /** Appends a message; returns its id, the stream cursor. */
  async insertMessage(
    em: EntityManager,
    chatId: string,
    role: ChatRole,
    parts: ChatPart[],
    extra: { usage?: LlmUsage; clientId?: string | null; metadata?: StepMetadata } = {},
  ): Promise<number> {
    const row = await db(em)
      .insertInto('chat_messages')
      .values({
        chat_id: chatId,
        role,
        parts: json(parts),
        usage: extra.usage ? json(extra.usage) : null,
        client_id: extra.clientId ?? null,
        metadata: extra.metadata ? json(extra.metadata) : null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  /** Id of the chat's latest user message at or before `beforeOrAt` (where its current turn starts), or 0. */
  async lastUserMessageId(em: EntityManager, chatId: string, beforeOrAt = Number.MAX_SAFE_INTEGER): Promise<number> {
    const row = await db(em)
      .selectFrom('chat_messages')
      .select('id')
      .where('chat_id', '=', chatId)
      .where('role', '=', 'user')
      .where('id', '<=', beforeOrAt)
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row ? Number(row.id) : 0;
  }

  /** Messages after `afterId` in order; `limit` null = all of them (the model needs the whole history). */
  async messages(em: EntityManager, chatId: string, afterId: number, limit: number | null): Promise<ChatMessageRow[]> {
    const rows = await this.selectMessages(em, chatId)
      .where('id', '>', afterId)
      .orderBy('id')
      .$if(limit !== null, (qb) => qb.limit(limit!))
      .execute();
    return rows.map(toMessageRow);
  }

  /** The messages holding a result of this tool call id, in order (a model may reuse an id in another turn). */
  async messagesWithResult(em: EntityManager, chatId: string, toolCallId: string): Promise<ChatMessageRow[]> {
    const rows = await this.selectMessages(em, chatId)
      .where(sql<boolean>`parts @> ${JSON.stringify([{ type: 'tool-result', toolCallId }])}::jsonb`)
      .orderBy('id')
      .execute();
    return rows.map(toMessageRow);
  }

  /**
   * The messages of a chat that hold a tool call, its result or a receipt of a figure taken from it (in an answer's
   * grounding), oldest first.
   */
  async messagesAboutCall(em: EntityManager, chatId: string, toolCallId: string): Promise<ChatMessageRow[]> {
    const rows = await this.selectMessages(em, chatId)
      .where((eb) =>
        eb.or([
          sql<boolean>`parts @> ${JSON.stringify([{ type: 'tool-result', toolCallId }])}::jsonb`,
          sql<boolean>`parts @> ${JSON.stringify([{ type: 'tool-call', toolCallId }])}::jsonb`,
          sql<boolean>`metadata @> ${JSON.stringify({ grounding: { receipts: [{ toolCallId }] } })}::jsonb`,
        ]),
      )
      .orderBy('id')
      .execute();
    return rows.map(toMessageRow);
  }

  private selectMessages(em: EntityManager, chatId: string) {
    return db(em).selectFrom('chat_messages').select(MESSAGE_COLUMNS).where('chat_id', '=', chatId);
  }

  /** Moves a chat to another status (under the caller's row lock); see StatusChange. */
  async setStatus(em: EntityManager, id: string, change: StatusChange): Promise<void> {
    await db(em).updateTable('chats').set(statusSet(change)).where('id', '=', id).execute();
  }

  /**
   * Does a ChatWrite in one statement (one round trip, atomic on its own or part of the caller's
   * transaction): locks the chat's row (checking the claim when given), appends the messages,
   * updates the row and appends the events to chat_events in order, delivered once the write commits
   * (ChatEvents). Returns the new messages' ids in order, or undefined when the claim no longer holds
   * (or the owner was not admitted).
   */
  async write(em: EntityManager, change: ChatWrite): Promise<number[] | undefined> {
    const claim = change.claim;
    const locked = sql`
        select id from chats
         where id = ${change.chatId}
           ${claim ? sql`and status = 'running' and worker_id = ${claim.workerId} and claim_token = ${claim.claimToken}` : sql``}
           ${change.from ? sql`and owner = ${change.owner} and status = any(${[...change.from]}::text[])` : sql``}
           ${change.setup ? sql`and agent = ${change.setup.agent} and dynamic_tools = ${json(change.setup.dynamicTools)}::jsonb` : sql``}
           for update`;
    // Admission reads `locked`, so the row lock comes first, then the owner's lock (the order every turn start takes them in).
    const target = change.admit
      ? sql`locked as (${locked}), target as (select id from locked where ${admits(change.owner, change.admit.limit)})`
      : sql`target as (${locked})`;
    return (await this.writeStatement(em, change, target))?.messageIds;
  }

  /**
   * The statement of a ChatWrite, after `target`: CTEs ending in `target`, the chat's id when it is to be
   * written (no row: nothing is). `returning`, when given, is a value of the statement's result, returned
   * as `row`. Undefined when nothing was written.
   */
  private async writeStatement(
    em: EntityManager,
    change: ChatWrite,
    target: RawBuilder<unknown>,
    returning?: RawBuilder<unknown>,
  ): Promise<{ messageIds: number[]; row: unknown } | undefined> {
    const kysely = db(em);
    const messages = (change.messages ?? []).map((m) => ({
      role: m.role,
      parts: m.parts,
      usage: m.usage ?? null,
      client_id: m.clientId ?? null,
      metadata: m.metadata ?? null,
      key_id: m.keyId ?? null,
      access_fingerprint: m.access ?? null,
    }));
    const set = change.status
      ? {
          ...statusSet(change.status),
          ...(change.turnKeyId ? { turn_key_id: change.turnKeyId } : {}),
          ...(change.progress ? { turn_iterations: change.progress.iterations, turn_tokens: change.progress.tokens } : {}),
        }
      : change.progress
        ? {
            turn_iterations: change.progress.iterations,
            turn_tokens: change.progress.tokens,
            heartbeat_at: now(),
            updated_at: now(),
          }
        : undefined;
    // The row is updated only when it was found (and still claimed): `target` is empty otherwise.
    const update = set
      ? sql`, updated as (${kysely
          .updateTable('chats')
          .set(set)
          .where('id', '=', sql<string>`(select id from target)`)})`
      : sql``;
    const { rows } = await sql<{
      messages: Array<{ id: string; created_at: string }>;
      events: Array<{ id: string; prev: string | null; event: ChatEvent; message_id: string | null }>;
      row: unknown;
    }>`
      with ${target},
      inserted as (
        insert into chat_messages (chat_id, role, parts, usage, client_id, metadata, key_id, access_fingerprint)
        select t.id, m.value->>'role', m.value->'parts', nullif(m.value->'usage', 'null'),
               m.value->>'client_id', nullif(m.value->'metadata', 'null'), (m.value->>'key_id')::uuid,
               m.value->>'access_fingerprint'
          from target t cross join jsonb_array_elements(${JSON.stringify(messages)}::jsonb) with ordinality as m(value, n)
         order by m.n
        returning id, created_at
      )${update},
      pending as (
        select e.value as event, null::bigint as message_id, e.n as n
          from jsonb_array_elements(${JSON.stringify(change.before ?? [])}::jsonb) with ordinality as e(value, n)
        union all
        select jsonb_build_object('type', 'message', 'chatId', ${change.chatId}::text, 'owner', ${change.owner}::text,
                                  'messageId', i.id), i.id, 1000000 + i.id
          from inserted i
        union all
        select e.value, null, 9000000000000000000 + e.n
          from jsonb_array_elements(${JSON.stringify(change.after ?? [])}::jsonb) with ordinality as e(value, n)
      ),
      logged as (
        insert into chat_events (chat_id, event, message_id, prev)
        select t.id, p.event, p.message_id, chat_event_prev(t.id)
          from target t cross join pending p
         order by p.n
        returning id, event, message_id, prev
      )
      -- What was written comes back as ids and times only: the writer has the rest in hand.
      select (select coalesce(jsonb_agg(jsonb_build_object('id', id, 'created_at', created_at) order by id), '[]') from inserted) as messages,
             (select jsonb_agg(jsonb_build_object('id', id, 'prev', prev, 'message_id', message_id,
                                                  'event', case when message_id is null then event end) order by id)
                from logged) as events,
             ${returning ?? sql`null`} as row
        from target`.execute(kysely);
    if (!rows[0]) return undefined;
    const written = rows[0].messages;
    // Each message event carries its message as the API shows it (from what was written), so streams need not read it back.
    const byId = new Map(
      written.map((row, i) => {
        const m = messages[i];
        const message = {
          id: Number(row.id),
          role: m.role,
          parts: m.parts,
          usage: m.usage,
          metadata: m.metadata,
          access: m.access_fingerprint,
          createdAt: row.created_at,
        };
        return [row.id.toString(), message];
      }),
    );
    this.events.record(
      em,
      loggedEvents(
        (rows[0].events ?? []).map((row) => {
          if (row.message_id === null) return row;
          const message = byId.get(row.message_id.toString())!;
          const event: ChatEvent = {
            type: 'message',
            chatId: change.chatId,
            owner: change.owner,
            messageId: message.id,
            message,
          };
          return { ...row, event };
        }),
      ),
    );
    return { messageIds: written.map((row) => Number(row.id)), row: rows[0].row };
  }

  /** Progress of the turn, written with each persisted step. */
  async recordProgress(em: EntityManager, id: string, iterations: number, tokens: number): Promise<void> {
    await db(em)
      .updateTable('chats')
      .set({ turn_iterations: iterations, turn_tokens: tokens, heartbeat_at: now(), updated_at: now() })
      .where('id', '=', id)
      .execute();
  }

  /** The owner's chats that hold or wait for a worker: pending or running. */
  async countInFlight(em: EntityManager, owner: string): Promise<number> {
    const row = await db(em)
      .selectFrom('chats')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('owner', '=', owner)
      .where('status', 'in', ['pending', 'running'])
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * How many chats each status holds (every status, zeros included), for the metrics: one GROUP BY
   * in a transaction of its own under a short statement_timeout, so a scrape never waits long.
   */
  async countByStatus(em: EntityManager, timeoutMs: number): Promise<Record<ChatStatus, number>> {
    return em.transactional(async (tx) => {
      await sql`select set_config('statement_timeout', ${String(timeoutMs)}, true)`.execute(db(tx));
      const rows = await db(tx)
        .selectFrom('chats')
        .select((eb) => ['status', eb.fn.countAll<string>().as('count')])
        .groupBy('status')
        .execute();
      const counts = Object.fromEntries(CHAT_STATUSES.map((status) => [status, 0])) as Record<ChatStatus, number>;
      for (const row of rows) counts[row.status] = Number(row.count);
      return counts;
    });
  }

  /**
   * Chats whose client did not answer in time (or, with `requires_approval`, whose earliest write proposal
   * expired unanswered), locked for the caller's transaction.
   */
  async lockExpiredActions(
    em: EntityManager,
    limit: number,
    status: 'requires_action' | 'requires_approval' = 'requires_action',
  ): Promise<ChatRow[]> {
    const rows = await db(em)
      .selectFrom('chats')
      .select(CHAT_COLUMNS)
      .where('status', '=', status)
      .where('action_expires_at', '<', now())
      .orderBy('action_expires_at')
      .limit(limit)
      .forUpdate()
      .skipLocked()
      .execute();
    return rows.map(toChat);
  }
}

/** The admission check of a turn start (the function chat_owner_admits, made by a migration). */
function admits(owner: string, limit: number) {
  return sql<boolean>`chat_owner_admits(${ADVISORY_LOCK.chatOwner}, ${owner}, ${limit})`;
}
