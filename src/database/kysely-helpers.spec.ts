import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, type CompiledQuery } from 'kysely';
import { givenFilters, insertRecordset } from './kysely-helpers';

interface Db {
  log: { id: string; at: Date; agent: string | null; note: string | null; args: unknown };
}

/** A Kysely that compiles and records what it would run, without a database. */
function recordingDb(): { db: Kysely<Db>; ran: CompiledQuery[] } {
  const ran: CompiledQuery[] = [];
  const db = new Kysely<Db>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (k) => new PostgresIntrospector(k),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
    log: (event) => void ran.push(event.query),
  });
  return { db, ran };
}

describe('givenFilters', () => {
  it('ANDs only the filters whose value was given, keeping null as a value', () => {
    const { db } = recordingDb();
    const since = new Date('2026-01-01T00:00:00Z');
    const query = db
      .selectFrom('log')
      .select('id')
      .where((eb) =>
        givenFilters(eb, [
          ['agent', '=', undefined],
          ['note', '=', null],
          ['at', '>=', since],
        ]),
      )
      .compile();
    expect(query.sql).toBe('select "id" from "log" where ("note" = $1 and "at" >= $2)');
    expect(query.parameters).toEqual([null, since]);
  });

  it('is true when no filter was given', () => {
    const { db } = recordingDb();
    const query = db
      .selectFrom('log')
      .select('id')
      .where((eb) => givenFilters(eb, [['agent', '=', undefined]]))
      .compile();
    expect(query.sql).toBe('select "id" from "log" where 1 = 1');
  });
});

describe('insertRecordset', () => {
  it('inserts every row with one statement and one jsonb parameter, without NUL characters', async () => {
    const { db, ran } = recordingDb();
    await insertRecordset(db, 'log', { agent: 'text', args: 'jsonb' }, [
      { agent: 'a\u0000b', args: { q: 1 } },
      { agent: null, args: null },
    ]);
    expect(ran).toHaveLength(1);
    expect(ran[0].sql).toBe(
      'insert into "log" ("agent", "args") select "agent", "args" from jsonb_to_recordset($1::jsonb) as x("agent" text, "args" jsonb)',
    );
    expect(JSON.parse(ran[0].parameters[0] as string)).toEqual([
      { agent: 'ab', args: { q: 1 } },
      { agent: null, args: null },
    ]);
  });
});
