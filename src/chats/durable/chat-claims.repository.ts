import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { Selectable, sql } from 'kysely';
import { loggedEvents } from './chat-events.repository';
import { ChatEvents } from './chat-events.service';
import {
  CHAT_COLUMNS,
  db,
  json,
  messagesJson,
  msFromNow,
  NO_CLAIM,
  now,
  statusSet,
  toChat,
  toMessageRow,
  uuids,
} from './chat.rows';
import { ChatMessagesTable, ChatsTable } from './chat.tables';
import type { ApiKeyRole } from '../../auth/api-key.entity';
import { ChatEvent, ChatRow, ChatStatus, ClaimedChat } from './chat.types';

const WORKER_LOST = { code: 'worker_lost', message: 'The replica running this chat stopped responding too many times' };

/**
 * The worker's half of the chats table: claims of pending chats, heartbeats of running ones, recovery of
 * claims whose replica stopped, release on shutdown, and the end of turns whose key was revoked. Each
 * is one statement, so replicas racing on the same rows never see half of one.
 */
@Injectable()
export class ChatClaimsRepository {
  constructor(private readonly events: ChatEvents) {}

  /**
   * Claims up to `limit` pending chats for a worker (each with a fresh claim token) in one
   * statement, which also publishes their `running` status; concurrent workers skip each other's
   * rows, and a worker skips chats it is still unwinding (`busy`).
   *
   * Fair across owners, so one owner's backlog never holds back another owner's chat by more than a
   * free slot: a pending chat's turn is its rank among its owner's pending chats plus the owner's
   * chats running on any replica; lower turns go first, and among equal turns the owner served least
   * recently (latest claimed or finished chat), then the oldest chat.
   *
   * Like stopTurnsOfRevokedKeys it reads auth's `api_keys`: the key a claimed turn runs as, read in the
   * claim itself rather than in a statement of its own per turn.
   */
  async claim(em: EntityManager, workerId: string, limit: number, busy: string[] = []): Promise<ClaimedChat[]> {
    const kysely = db(em);
    // Owners with chats in flight: how many run, and when a chat of theirs last left pending (once per owner).
    const inFlight = kysely
      .selectFrom('chats')
      .select((eb) => ['owner', eb.fn.countAll<string>().filterWhere('status', '=', 'running').as('running')])
      .where('status', 'in', ['pending', 'running', 'requires_action', 'requires_approval'])
      .groupBy('owner');
    const owners = kysely
      .selectFrom(inFlight.as('f'))
      .leftJoinLateral(
        (eb) =>
          eb
            .selectFrom('chats as s')
            .select('s.updated_at as served_at')
            .whereRef('s.owner', '=', 'f.owner')
            .where('s.status', '<>', 'pending')
            .orderBy('s.updated_at', 'desc')
            .limit(1)
            .as('s'),
        (join) => join.onTrue(),
      )
      .select(['f.owner', 'f.running', 's.served_at']);
    const queued = kysely
      .selectFrom('chats as p')
      .innerJoin(owners.as('o'), 'o.owner', 'p.owner')
      .select((eb) => [
        'p.id',
        sql<string>`p.xmin`.as('version'),
        'o.served_at',
        sql<string>`${eb.ref('o.running')} + ${eb.fn
          .agg<string>('row_number')
          .over((ob) => ob.partitionBy('p.owner').orderBy('p.available_at').orderBy('p.id'))}`.as('turn'),
      ])
      .where('p.status', '=', 'pending')
      .where('p.available_at', '<=', now())
      .where((eb) => eb.not(eb('p.id', '=', eb.fn.any(uuids(busy)))));
    // Window functions cannot be locked: they rank in a derived table, and only `chats` rows are locked.
    const claimable = kysely
      .selectFrom('chats')
      .innerJoin(queued.as('q'), 'q.id', 'chats.id')
      .select('chats.id')
      // Checked again on the locked row version: another replica may have claimed it meanwhile. Only the
      // version this statement's snapshot read is claimed (one written since waits for the next claim, which
      // its `pending` event starts): the history read with the claim is then that version's.
      .where('chats.status', '=', 'pending')
      .where(sql<boolean>`chats.xmin = q.version`)
      .orderBy('q.turn')
      .orderBy('q.served_at', (ob) => ob.asc().nullsFirst())
      .orderBy('chats.available_at')
      .orderBy('chats.id')
      .limit(limit)
      .forUpdate('chats')
      .skipLocked();
    const claimed = kysely
      .updateTable('chats')
      .set({
        status: 'running',
        worker_id: workerId,
        claim_token: sql<string>`gen_random_uuid()`,
        heartbeat_at: now(),
        updated_at: now(),
      })
      // array(...) evaluates the locking subquery once, before the update, so each locked row is claimed exactly once.
      .where((eb) => eb('id', '=', eb.fn.any(sql<string[]>`array(${claimable})`)))
      .returning(CHAT_COLUMNS);
    // The `running` status event of each claimed chat is appended with the claim, in the same statement, which
    // also reads what the turn's key runs as now (see ClaimedChat): a key revoked before the claim, even
    // behind the server's back, is seen here; one revoked after it is stopped by stopTurnsOfRevokedKeys.
    // And the chat's history: every message is written with a change of the chat's row, so the messages this
    // snapshot reads are those of the row version claimed.
    const { rows } = await sql<
      Selectable<ChatsTable> & {
        event_id: string;
        event_prev: string | null;
        event: ChatEvent;
        key_role: ApiKeyRole | null;
        key_subject: string | null;
        key_owner: string | null;
        history: Array<Selectable<ChatMessagesTable>>;
      }
    >`
      with claimed as (${claimed}),
      logged as (
        insert into chat_events (chat_id, event, prev)
        select id, jsonb_build_object('type', 'status', 'chatId', id, 'owner', owner, 'status', 'running'), chat_event_prev(id)
          from claimed order by id
        returning id, chat_id, event, prev
      )
      select claimed.*, l.id as event_id, l.prev as event_prev, l.event, k.role as key_role, k.subject as key_subject, k.owner as key_owner,
             ${messagesJson(sql`chat_messages m where m.chat_id = claimed.id`)} as history
        from claimed join logged l on l.chat_id = claimed.id
        left join api_keys k on k.id = claimed.turn_key_id and not k.revoked
       order by l.id`.execute(kysely);
    this.events.record(em, loggedEvents(rows.map((row) => ({ id: row.event_id, prev: row.event_prev, event: row.event }))));
    return rows.map((row) => ({
      ...toChat(row),
      turnKey:
        row.key_role !== null && row.key_subject !== null && row.key_owner !== null
          ? { role: row.key_role, subject: row.key_subject, owner: row.key_owner }
          : null,
      history: row.history.map(toMessageRow),
    }));
  }

  /** One statement per replica per interval for all of its running chats. */
  async heartbeat(em: EntityManager, workerId: string, ids: string[]): Promise<void> {
    if (!ids.length) return;
    await db(em)
      .updateTable('chats')
      .set({ heartbeat_at: now() })
      .where('worker_id', '=', workerId)
      .where('status', '=', 'running')
      .where((eb) => eb('id', '=', eb.fn.any(uuids(ids))))
      .execute();
  }

  /** Running chats whose replica stopped heart-beating go back to pending; after `maxAttempts` such losses, to error. */
  async recoverStale(
    em: EntityManager,
    staleAfterMs: number,
    maxAttempts: number,
  ): Promise<Array<{ id: string; owner: string; status: ChatStatus }>> {
    return db(em)
      .updateTable('chats')
      .set((eb) => {
        // Every expression of a SET list reads the row as it was, so this is the attempt count after the loss.
        const exhausted = eb(eb('attempts', '+', 1), '>=', maxAttempts);
        return {
          ...NO_CLAIM,
          updated_at: now(),
          available_at: now(),
          attempts: eb('attempts', '+', 1),
          status: eb
            .case()
            .when(exhausted)
            .then('error' as const)
            .else('pending' as const)
            .end(),
          // Typed as the JSON text the column is written with; the current value passes through unchanged.
          last_error: eb.case().when(exhausted).then(json(WORKER_LOST)).else(eb.ref('last_error').$castTo<string | null>()).end(),
        };
      })
      .where('status', '=', 'running')
      .where('heartbeat_at', '<', msFromNow(-staleAfterMs))
      .returning(['id', 'owner', 'status'])
      .execute();
  }

  /**
   * Ends in `error` (`key_revoked`) every pending, running or waiting (requires_action, requires_approval) turn whose key is revoked or no longer acts
   * for the chat's owner, in one statement that also appends, per chat, its error, its status and an
   * interrupt (the worker running it, on any replica, cancels the run; its claim is gone already).
   * Idempotent: every replica may run it on the same notification, the first one ends the turns.
   *
   * It reads auth's `api_keys` itself, the one read of another module's table here: deciding which keys
   * no longer act for a chat's owner and ending those turns must be one statement, or a turn could be
   * stopped on a key state already superseded (a key re-activated, a chat's turn moved to another key)
   * while every replica races on the same rows, and asking auth for every revoked key has no bound.
   */
  async stopTurnsOfRevokedKeys(em: EntityManager, error: NonNullable<ChatRow['lastError']>): Promise<number> {
    const kysely = db(em);
    const stopped = kysely
      .updateTable('chats')
      .set(statusSet({ status: 'error', lastError: error }))
      .where('status', 'in', ['pending', 'running', 'requires_action', 'requires_approval'])
      .where(
        sql<boolean>`not exists (select 1 from api_keys k
                                  where k.id = chats.turn_key_id and not k.revoked and k.owner = chats.owner)`,
      )
      .returning(['id', 'owner']);
    const base = sql`'chatId', s.id, 'owner', s.owner`;
    const { rows } = await sql<{ stopped: string; events: Array<{ id: string; prev: string | null; event: ChatEvent }> | null }>`
      with stopped as (${stopped}),
      logged as (
        insert into chat_events (chat_id, event, prev)
        select s.id, e.event, chat_event_prev(s.id)
          from stopped s cross join lateral (values
            (1, jsonb_build_object('type', 'error', ${base}, 'code', ${error.code}::text, 'message', ${error.message}::text)),
            (2, jsonb_build_object('type', 'status', ${base}, 'status', 'error')),
            (3, jsonb_build_object('type', 'interrupt', ${base}))
          ) as e(n, event)
         order by s.id, e.n
        returning id, prev, event
      )
      select (select count(*) from stopped) as stopped,
             (select jsonb_agg(jsonb_build_object('id', id, 'prev', prev, 'event', event) order by id) from logged) as events`.execute(
      kysely,
    );
    this.events.record(em, loggedEvents(rows[0]?.events));
    return Number(rows[0]?.stopped ?? 0);
  }

  /** On shutdown: this worker's chats go back to pending for another replica. */
  async release(em: EntityManager, workerId: string): Promise<Array<{ id: string; owner: string }>> {
    return db(em)
      .updateTable('chats')
      .set({ status: 'pending', ...NO_CLAIM, updated_at: now(), available_at: now() })
      .where('worker_id', '=', workerId)
      .where('status', '=', 'running')
      .returning(['id', 'owner'])
      .execute();
  }
}
