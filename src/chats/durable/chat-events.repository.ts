import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from 'kysely';
import type { ChatEvent } from './chat.types';

/** A row of `chat_events` as its writer got it back: its id (the cursor) and the chat's event before it. */
export interface LoggedChatEvent {
  id: number;
  /** The chat's previous event, as committed when this one was written (null: none). */
  prev: number | null;
  event: ChatEvent;
}

/** Events read per statement. */
export const READ_BATCH = 1000;
/** Events are read by replicas within seconds; after this they only take room. */
const RETENTION = '1 hour';

/** What the writing statements return of the events they appended. */
interface EventRow {
  id: string | number;
  prev: string | number | null;
  event: ChatEvent;
}

/** Converts what a statement returned of the events it appended (or read). */
export function loggedEvents(rows: readonly EventRow[] | null | undefined): LoggedChatEvent[] {
  return (rows ?? []).map((row) => ({ id: Number(row.id), prev: row.prev === null ? null : Number(row.prev), event: row.event }));
}

/** Appends events of any chats, in order, in one statement on `em`. */
export async function appendEvents(em: EntityManager, events: ChatEvent[]): Promise<LoggedChatEvent[]> {
  const { rows } = await sql<EventRow>`
    insert into chat_events (chat_id, event, message_id, prev)
    select (e.value->>'chatId')::uuid, e.value, (e.value->>'messageId')::bigint, chat_event_prev((e.value->>'chatId')::uuid)
      from jsonb_array_elements(${JSON.stringify(events)}::jsonb) with ordinality as e(value, n)
     order by e.n
    returning id, prev, event`.execute(em.getKysely());
  return loggedEvents(rows);
}

/**
 * Events after `after`, and those of the ids in `missing`, in id order; a message event carries its
 * message (as the API shows it), read with it.
 */
export async function readEvents(em: EntityManager, after: number, missing: number[]): Promise<LoggedChatEvent[]> {
  const { rows } = await sql<EventRow>`
    select e.id, e.prev,
           case when m.id is null then e.event
                else e.event || jsonb_build_object('message', jsonb_build_object(
                       'id', m.id, 'role', m.role, 'parts', m.parts, 'usage', m.usage, 'metadata', m.metadata,
                       'access', m.access_fingerprint, 'createdAt', m.created_at)) end as event
      from chat_events e
      left join chat_messages m on m.id = e.message_id
     where e.id > ${after} or e.id = any(${missing}::bigint[])
     order by e.id
     limit ${READ_BATCH}`.execute(em.getKysely());
  return loggedEvents(rows);
}

/** The newest event's id (0: none): where a replica starts reading. */
export async function newestEventId(em: EntityManager): Promise<number> {
  const { rows } = await sql<{ id: string }>`select coalesce(max(id), 0) as id from chat_events`.execute(em.getKysely());
  return Number(rows[0].id);
}

/** Deletes the events older than the retention. */
export async function pruneEvents(em: EntityManager): Promise<void> {
  await sql`delete from chat_events where created_at < now() - ${RETENTION}::interval`.execute(em.getKysely());
}
