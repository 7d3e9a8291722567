import { Client } from 'pg';

/** One statement on a connection of its own (opened and closed around it): for set-up and checks, not load. */
export async function sql<T = Record<string, unknown>>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}

/** A statement runner of a test: TestApp.sql, or a pg client's query with its rows. */
export type RowQuery = (text: string, params?: unknown[]) => Promise<unknown[]>;

/** The name of a links field's join table in schema data_links (the server makes it up), for checks written in SQL. */
export async function linkTableOf(query: RowQuery, object: string, field: string): Promise<string> {
  const [row] = (await query(
    `select f.computed->'link'->>'table' as "table" from field_definitions f join object_definitions o on o.id = f.object_id
      where o.name = $1 and f.name = $2`,
    [object, field],
  )) as Array<{ table: string }>;
  return row.table;
}

/**
 * Waits until a transaction holds `table`'s ACCESS EXCLUSIVE lock (a field's DDL): a lock asked for then is
 * granted as that transaction commits, before anything the commit starts. Polls every couple of milliseconds.
 */
export async function waitForAccessExclusive(query: RowQuery, table: string): Promise<void> {
  for (;;) {
    const held = await query(
      `select 1 from pg_locks where relation = $1::regclass and mode = 'AccessExclusiveLock' and granted`,
      [table],
    );
    if (held.length) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
