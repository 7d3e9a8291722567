import fc from 'fast-check';
import { Client } from 'pg';
import type { ChangesResponse } from '../../src/changes/changes.dto';
import type { FieldResponse } from '../../src/metadata/metadata.dto';
import type { ImportStartedResponse, JobResponse } from '../../src/transfer/transfer.dto';
import { asAdmin, createApiKey, createObject, fieldSpec, finishedJob } from '../support/fixtures';
import { waitForAccessExclusive } from '../support/pg-query';
import { bodyOf, errorOf, idOf, type RecordBody, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';

type Row = Record<string, unknown>;

const STORED = ['open_total', 'n_deals', 'max_amount', 'owners'] as const;

/** The stored fields of `acct`, each written by hand in SQL over `o` (the deals pointing at account `a`). */
const HAND_SQL: Record<(typeof STORED)[number], string> = {
  open_total: "coalesce(sum(o.amount) filter (where o.stage = 'open'), 0)",
  n_deals: 'count(*)',
  max_amount: 'max(o.amount)',
  owners: 'count(distinct o.owner)',
};

describe('stored rollup and count fields', () => {
  let t: TestApp;
  let member: string;
  let ownOnly: string;
  const accounts: string[] = [];

  const addField = (object: string, spec: Row) =>
    t.http
      .post(`/api/v1/objects/${object}/fields`)
      .set(asAdmin(t))
      .send({ label: spec.name, ...spec });
  const create = async (record: Row, key = member) =>
    bodyOf<RecordBody>(await t.http.post('/api/v1/objects/opp/records').set(bearer(key)).send(record).expect(201));
  const update = async (id: string, patch: Row, key = member) =>
    bodyOf<RecordBody>(await t.http.patch(`/api/v1/objects/opp/records/${id}`).set(bearer(key)).send(patch).expect(200));
  const remove = (id: string, key = member) => t.http.delete(`/api/v1/objects/opp/records/${id}`).set(bearer(key)).expect(204);

  /** Every account's stored columns next to the same values written by hand over all of its deals. */
  const mismatches = async (): Promise<Row[]> => {
    const stored = STORED.map((name) => `a.${name}`).join(', ');
    const hand = STORED.map((name) => `(select ${HAND_SQL[name]} from data.opp o where o.acct = a.id)`).join(', ');
    return t.sql<Row>(
      `select a.id, row(${stored})::text as stored, row(${hand})::text as computed from data.acct a
       where row(${stored}) is distinct from row(${hand}) order by a.id`,
    );
  };
  const expectStoredRight = async (step: string) =>
    expect({ step, mismatches: await mismatches() }).toEqual({ step, mismatches: [] });

  beforeAll(async () => {
    t = await startTestApp({ env: { RATE_LIMIT_PER_MINUTE: '100000', LOG_LEVEL: 'error' } });
    await createObject(t, 'acct', [fieldSpec('name', 'text'), fieldSpec('region', 'text')]);
    await createObject(t, 'opp', [
      fieldSpec('title', 'text'),
      fieldSpec('acct', 'lookup', { reference: 'acct' }),
      fieldSpec('amount', 'currency'),
      fieldSpec('stage', 'select', { options: ['open', 'won', 'lost'] }),
      fieldSpec('owner', 'text'),
    ]);
    const specs: Row[] = [
      {
        name: 'open_total',
        type: 'rollup',
        relation: 'opp.acct',
        function: 'sum',
        field: 'amount',
        filter: { stage: 'open' },
        stored: true,
        indexed: true,
      },
      { name: 'n_deals', type: 'count', relation: 'opp.acct', stored: true },
      { name: 'max_amount', type: 'rollup', relation: 'opp.acct', function: 'max', field: 'amount', stored: true },
      { name: 'owners', type: 'rollup', relation: 'opp.acct', function: 'count_distinct', field: 'owner', stored: true },
    ];
    for (const spec of specs) {
      const field = bodyOf<FieldResponse>(await addField('acct', spec).expect(201));
      // Added to an empty object: nothing to fill.
      expect(field).toMatchObject({ name: spec.name, stored: true, filled: true });
      expect(field.fillJobId).toBeUndefined();
    }
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'own-deals', objects: { acct: { read: true }, opp: { read: true, rowFilter: { owner: '$subject' } } } })
      .expect(201);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'all-deals',
        objects: { acct: { read: true }, opp: { read: true, create: true, update: true, delete: true } },
      })
      .expect(201);
    member = (await createApiKey(t, { name: 'writer', role: 'member', subject: 'writer', policies: ['all-deals'] })).secret;
    ownOnly = (await createApiKey(t, { name: 'alice', role: 'member', subject: 'alice', policies: ['own-deals'] })).secret;
    for (const name of ['A', 'B', 'C']) {
      accounts.push(idOf(await t.http.post('/api/v1/objects/acct/records').set(asAdmin(t)).send({ name }).expect(201)));
    }
  });

  afterAll(async () => {
    await t?.close();
  });

  it('keeps the stored values equal to their computation through creates, updates, moves, deletes, restores, batches and imports', async () => {
    const [a, b, c] = accounts;
    const d1 = await create({ acct: a, amount: 100, stage: 'open', owner: 'alice' });
    const d2 = await create({ acct: a, amount: 50, stage: 'won', owner: 'bob' });
    const d3 = await create({ acct: b, amount: 70, stage: 'open', owner: 'alice' });
    await expectStoredRight('creates');
    expect((await t.sql<Row>('select open_total::text as v, n_deals::text as n from data.acct where id = $1', [a]))[0]).toEqual({
      v: '100.00',
      n: '2',
    });
    await update(d1.id, { amount: 120 });
    await update(d2.id, { stage: 'open' });
    await expectStoredRight('updates');
    await update(d1.id, { acct: b });
    await expectStoredRight('move to another parent');
    await update(d3.id, { acct: null });
    await expectStoredRight('move to no parent');
    await remove(d2.id);
    await expectStoredRight('delete');
    await t.http.post(`/api/v1/objects/opp/trash/${d2.id}/restore`).set(bearer(member)).expect(200);
    await expectStoredRight('restore from the trash');
    const batch = await t.http
      .post('/api/v1/objects/opp/records/batch')
      .set(bearer(member))
      .send({
        operations: [
          { op: 'create', record: { acct: c, amount: 5, stage: 'open', owner: 'carol' } },
          { op: 'create', record: { acct: c, amount: 6, stage: 'lost', owner: 'carol' } },
          { op: 'update', id: d1.id, record: { acct: c, amount: 7 } },
          { op: 'delete', id: d3.id },
        ],
      })
      .expect(200);
    expect(batch.body).toBeDefined();
    await expectStoredRight('batch');
    const started = await t.http
      .post('/api/v1/objects/opp/import')
      .set(bearer(member))
      .set('content-type', 'text/csv')
      .send(`acct,amount,stage,owner\n${a},11,open,dan\n${b},12,open,erin\n${c},13,won,dan\n`)
      .expect(202);
    const job = await finishedJob(t, bodyOf<ImportStartedResponse>(started).jobId, member);
    expect(job).toMatchObject({ status: 'done', rowsWritten: 3 });
    await expectStoredRight('import');
  });

  it('serves the stored value to a key that reads every related record, and the value computed under its access to a key under a row filter', async () => {
    const [a] = accounts;
    await create({ acct: a, amount: 1000, stage: 'open', owner: 'zed' });
    await create({ acct: a, amount: 1, stage: 'open', owner: 'alice' });
    // Put a marker into the column by hand (no trigger rewrites it): whoever reads the column sees it.
    await t.sql(`update data.acct set open_total = 424242 where id = $1`, [a]);
    const get = async (key: string) =>
      bodyOf<RecordBody>(await t.http.get(`/api/v1/objects/acct/records/${a}`).set(bearer(key)).expect(200)).open_total;
    expect(await get(member)).toBe(424242);
    const aliceOpen = await t.sql<{ v: string }>(
      `select coalesce(sum(amount) filter (where stage = 'open'), 0)::text as v from data.opp where acct = $1 and owner = 'alice'`,
      [a],
    );
    expect(await get(ownOnly)).toBe(Number(aliceOpen[0].v));
    // Sorted by it too: the row-filtered key orders by its own totals, not by the column.
    const page = bodyOf<RecordPage>(
      await t.http
        .get('/api/v1/objects/acct/records')
        .query({ orderBy: JSON.stringify([{ field: 'open_total', order: 'desc' }]), fields: 'open_total' })
        .set(bearer(ownOnly))
        .expect(200),
    );
    expect(page.records.map((r) => r.open_total)).not.toContain(424242);
    // The next write of a deal of the account recomputes it.
    await create({ acct: a, amount: 2, stage: 'won', owner: 'bob' });
    await expectStoredRight('after the marker');
    expect(await get(member)).not.toBe(424242);
  });

  it('writes an update change for the parent in the same change set as the child write', async () => {
    const [, b] = accounts;
    const before = bodyOf<ChangesResponse>(await t.http.get('/api/v1/objects/acct/changes').set(bearer(member)).expect(200));
    const created = await t.http
      .post('/api/v1/objects/opp/records')
      .set(bearer(member))
      .send({ acct: b, amount: 33, stage: 'open', owner: 'frank' })
      .expect(201);
    const changes = bodyOf<ChangesResponse>(
      await t.http.get('/api/v1/objects/acct/changes').query({ after: before.nextCursor }).set(bearer(member)).expect(200),
    ).changes;
    // One update of the account, in that change set, naming the stored values that changed (the count and the open total at least).
    expect(changes.map((c) => [c.op, c.id, c.changeSetId])).toEqual([['update', b, created.headers['change-set-id']]]);
    const fields = changes[0].changedFields;
    expect(fields).toEqual(expect.arrayContaining(['n_deals', 'open_total']));
    expect(fields.every((f) => (STORED as readonly string[]).includes(f))).toBe(true);
    const stored = (await t.sql<Row>('select open_total::float8 as v from data.acct where id = $1', [b]))[0].v;
    expect(changes[0]).toMatchObject({ actor: 'self', record: { open_total: stored } });
    const [{ before: replaced }] = await t.sql<{ before: Record<string, unknown> }>(
      `select before from record_changes where object = 'acct' and change_set_id = $1`,
      [created.headers['change-set-id']],
    );
    expect(Object.keys(replaced).sort()).toEqual([...fields].sort());
    const sets = await t.sql<{ n: string }>(
      `select count(distinct change_set_id)::text as n from record_changes where change_set_id = $1`,
      [created.headers['change-set-id']],
    );
    expect(sets[0].n).toBe('1');
    const parentRows = await t.sql<Row>(`select object, op from record_changes where change_set_id = $1 and object = 'acct'`, [
      created.headers['change-set-id'],
    ]);
    expect(parentRows.length).toBeGreaterThan(0);
    // A write that changes no stored value gives no parent change.
    const quiet = await t.http.get('/api/v1/objects/acct/changes').set(bearer(member)).expect(200);
    await update(idOf(created), { title: 'renamed' });
    const after = bodyOf<ChangesResponse>(
      await t.http
        .get('/api/v1/objects/acct/changes')
        .query({ after: bodyOf<ChangesResponse>(quiet).nextCursor })
        .set(bearer(member))
        .expect(200),
    );
    expect(after.changes).toEqual([]);
  });

  it('indexes an indexed stored field and drops its column and triggers with the field', async () => {
    const indexes = await t.sql<{ indexdef: string }>(
      `select indexdef from pg_indexes where schemaname = 'data' and tablename = 'acct'`,
    );
    expect(indexes.some((i) => /\(open_total, id\)/.test(i.indexdef))).toBe(true);
    expect(indexes.some((i) => /\(n_deals/.test(i.indexdef))).toBe(false);
    const triggers = async () =>
      Number(
        (
          await t.sql<{ n: string }>(
            `select count(*)::text as n from pg_trigger where tgrelid = 'data.opp'::regclass and not tgisinternal`,
          )
        )[0].n,
      );
    // One set of triggers for the four stored fields over opp.acct, rebuilt as a field joins or leaves it.
    expect(await triggers()).toBe(3);
    await addField('acct', { name: 'tmp_count', type: 'count', relation: 'opp.acct', stored: true }).expect(201);
    expect(await triggers()).toBe(3);
    await create({ acct: accounts[2], amount: 1, stage: 'won', owner: 'gus' });
    expect((await t.sql<{ n: number }>('select tmp_count::int as n from data.acct where id = $1', [accounts[2]]))[0].n).toBe(
      Number((await t.sql<{ n: string }>('select count(*)::text as n from data.opp where acct = $1', [accounts[2]]))[0].n),
    );
    await t.http.delete('/api/v1/objects/acct/fields/tmp_count').set(asAdmin(t)).expect(204);
    expect(await triggers()).toBe(3);
    await expectStoredRight('after a field left the group');
    const column = await t.sql(
      `select 1 from information_schema.columns where table_schema = 'data' and table_name = 'acct' and column_name = 'tmp_count'`,
    );
    expect(column).toEqual([]);
    // Refused: a stored lookup_value, an index on a field computed when read, a stored formula over the clock.
    const refused = [
      await addField('opp', { name: 'x', type: 'lookup_value', through: 'acct', field: 'name', stored: true }),
      await addField('acct', { name: 'x', type: 'count', relation: 'opp.acct', indexed: true }),
      await addField('acct', { name: 'x', type: 'formula', expression: 'YEAR(TODAY())', resultType: 'number', stored: true }),
    ].map((res) => [res.status, errorOf(res).code]);
    expect(refused).toEqual([
      [400, 'stored_not_supported'],
      [400, 'validation_failed'],
      [400, 'stored_not_supported'],
    ]);
  });

  it('fills a stored field added to an object with records as a job, computed when read until filled', async () => {
    await t.sql(`insert into data.acct (name) select 'bulk ' || g from generate_series(1, 1200) g`);
    await t.sql(
      `insert into data.opp (acct, amount, stage, owner) select a.id, (g * 3) % 500, (array['open','won','lost'])[1 + g % 3], 'o' || (g % 7)
       from (select id, row_number() over (order by id) r from data.acct) a cross join generate_series(1, 2) g`,
    );
    const field = bodyOf<FieldResponse>(
      await addField('acct', {
        name: 'won_total',
        type: 'rollup',
        relation: 'opp.acct',
        function: 'sum',
        field: 'amount',
        filter: { stage: 'won' },
        stored: true,
      }).expect(201),
    );
    expect(field).toMatchObject({ stored: true, filled: false });
    const job = await finishedJob(t, field.fillJobId!, t.adminKey);
    const total = Number((await t.sql<{ n: string }>('select count(*)::text as n from data.acct'))[0].n);
    expect(job).toMatchObject({ kind: 'stored_fill', status: 'done', rowsRead: total });
    const wrong = await t.sql(
      `select a.id from data.acct a where a.won_total is distinct from (select coalesce(sum(o.amount) filter (where o.stage = 'won'), 0) from data.opp o where o.acct = a.id)`,
    );
    expect(wrong).toEqual([]);
    const described = bodyOf<{ fields: FieldResponse[] }>(await t.http.get('/api/v1/objects/acct').set(asAdmin(t)).expect(200));
    expect(described.fields.find((f) => f.name === 'won_total')).toMatchObject({ stored: true, filled: true });
  });

  it('cancels a fill job: the field stays computed when read', async () => {
    // Hold a lock on the first account so the job waits in its first batch until it is asked to stop: asked while
    // the field's DDL holds the table, so it is granted as that commits, before the job's first batch asks.
    const blocker = new Client({ connectionString: t.database.url });
    await blocker.connect();
    try {
      await blocker.query('begin');
      const adding = addField('acct', {
        name: 'lost_count',
        type: 'count',
        relation: 'opp.acct',
        filter: { stage: 'lost' },
        stored: true,
      }).then((res) => res);
      await waitForAccessExclusive((text, params) => t.sql(text, params), 'data.acct');
      const locking = blocker.query('select id from data.acct order by id limit 1 for update');
      const field = bodyOf<FieldResponse>(await adding);
      await locking;
      const cancelled = bodyOf<JobResponse>(await t.http.delete(`/api/v1/jobs/${field.fillJobId!}`).set(asAdmin(t)).expect(202));
      expect(cancelled).toMatchObject({ kind: 'stored_fill', cancelRequested: true });
      await blocker.query('rollback');
      const job = await finishedJob(t, field.fillJobId!, t.adminKey);
      expect(job).toMatchObject({ status: 'cancelled' });
      expect(job.rowsRead).toBeLessThan(Number((await t.sql<{ n: string }>('select count(*)::text as n from data.acct'))[0].n));
      // Unfilled: reads compute it, so every account still reads its right count.
      const page = bodyOf<RecordPage>(
        await t.http
          .get('/api/v1/objects/acct/records')
          .query({ fields: 'lost_count', limit: 200, orderBy: JSON.stringify([{ field: 'id' }]) })
          .set(bearer(member))
          .expect(200),
      );
      const expected = await t.sql<{ id: string; n: number }>(
        `select a.id, (select count(*) from data.opp o where o.acct = a.id and o.stage = 'lost')::int as n from data.acct a order by a.id limit 200`,
      );
      expect(page.records.map((r) => [r.id, r.lost_count])).toEqual(expected.map((r) => [r.id, r.n]));
      const described = bodyOf<{ fields: FieldResponse[] }>(await t.http.get('/api/v1/objects/acct').set(asAdmin(t)).expect(200));
      expect(described.fields.find((f) => f.name === 'lost_count')).toMatchObject({ stored: true, filled: false });
    } finally {
      await blocker.end();
    }
  });

  it('property: eight concurrent writers of one parent leave every stored value equal to its recomputation', async () => {
    const [a, b] = accounts;
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('create' as const),
        amount: fc.integer({ min: 0, max: 999 }),
        open: fc.boolean(),
        toB: fc.boolean(),
      }),
      fc.record({ kind: fc.constant('update' as const), amount: fc.integer({ min: 0, max: 999 }), open: fc.boolean() }),
      fc.record({ kind: fc.constant('move' as const) }),
      fc.record({ kind: fc.constant('delete' as const) }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(op, { minLength: 3, maxLength: 8 }), { minLength: 8, maxLength: 8 }),
        async (writers) => {
          await Promise.all(
            writers.map(async (ops, w) => {
              const mine: Array<{ id: string; acct: string }> = [];
              for (const step of ops) {
                const last = mine[mine.length - 1];
                if (step.kind === 'create' || !last) {
                  const acct = 'toB' in step && step.toB ? b : a;
                  const amount = 'amount' in step ? step.amount : 1;
                  const open = 'open' in step ? step.open : true;
                  const made = await create({ acct, amount, stage: open ? 'open' : 'won', owner: `w${w}` });
                  mine.push({ id: made.id, acct });
                } else if (step.kind === 'update') {
                  await update(last.id, { amount: step.amount, stage: step.open ? 'open' : 'lost' });
                } else if (step.kind === 'move') {
                  last.acct = last.acct === a ? b : a;
                  await update(last.id, { acct: last.acct });
                } else {
                  await remove(last.id);
                  mine.pop();
                }
              }
            }),
          );
          expect(await mismatches()).toEqual([]);
        },
      ),
      { numRuns: 6 },
    );
  }, 180_000);

  it("stores a formula over the record's own fields: filled as a job, kept by every write, indexed and sorted on", async () => {
    await t.sql(
      `insert into data.opp (acct, amount, stage, owner) select $1, g * 1.5, (array['open','won'])[1 + g % 2], 'x' from generate_series(1, 300) g`,
      [accounts[0]],
    );
    const field = bodyOf<FieldResponse>(
      await addField('opp', {
        name: 'weighted',
        type: 'formula',
        expression: "IF({stage} = 'open', {amount} / 2, 0)",
        resultType: 'currency',
        stored: true,
        indexed: true,
      }).expect(201),
    );
    expect(field).toMatchObject({ type: 'formula', stored: true, filled: false, indexed: true });
    expect(await finishedJob(t, field.fillJobId!, t.adminKey)).toMatchObject({ kind: 'stored_fill', status: 'done' });
    const wrong = () =>
      t.sql(
        `select id from data.opp where weighted is distinct from round(case when stage = 'open' then amount / 2 else 0 end, 2)`,
      );
    expect(await wrong()).toEqual([]);
    // Every write keeps it: a create, an update of an input, a batch, a delete and its restore from the trash.
    const made = await create({ title: 'stored formula', acct: accounts[0], amount: 301, stage: 'open' });
    await update(made.id, { amount: 99.99 });
    await update(made.id, { stage: 'won' });
    await t.http
      .post('/api/v1/objects/opp/records/batch')
      .set(bearer(member))
      .send({ operations: [{ op: 'update', id: made.id, record: { stage: 'open' } }] })
      .expect(200);
    await remove(made.id);
    await t.http.post(`/api/v1/objects/opp/trash/${made.id}/restore`).set(bearer(member)).expect(200);
    expect(await wrong()).toEqual([]);
    const [{ weighted }] = await t.sql<{ weighted: string }>('select weighted::text as weighted from data.opp where id = $1', [
      made.id,
    ]);
    expect(weighted).toBe('50.00');
    // Read from its column (an index on it), the same for every caller who may see it; sorted by it.
    const page = bodyOf<RecordPage>(
      await t.http
        .get('/api/v1/objects/opp/records')
        .query({ fields: 'weighted', orderBy: JSON.stringify([{ field: 'weighted', order: 'desc' }]), limit: 5 })
        .set(bearer(member))
        .expect(200),
    );
    const top = await t.sql<{ id: string; w: number }>(
      'select id, weighted::float8 as w from data.opp order by weighted desc nulls last, id desc limit 5',
    );
    expect(page.records.map((r) => r.weighted)).toEqual(top.map((r) => r.w));
    const indexes = await t.sql(`select indexname from pg_indexes where tablename = 'opp' and indexdef like '%weighted%'`);
    expect(indexes.length).toBeGreaterThan(0);

    // What cannot be kept by a row trigger is refused, with the reason.
    const clock = await addField('opp', {
      name: 'age',
      type: 'formula',
      expression: "DATE_DIFF({created_at}, NOW(), 'days')",
      resultType: 'number',
      stored: true,
    });
    expect([clock.status, errorOf(clock).code]).toEqual([400, 'stored_not_supported']);
    await addField('acct', { name: 'deal_count', type: 'count', relation: 'opp.acct' }).expect(201);
    const overRollup = await addField('acct', {
      name: 'deals_x2',
      type: 'formula',
      expression: '{deal_count} * 2',
      resultType: 'integer',
      stored: true,
    });
    expect([overRollup.status, errorOf(overRollup).code]).toEqual([400, 'stored_not_supported']);
    // Its expression is its column's: changed by deleting and adding it again.
    const changed = await t.http.patch('/api/v1/objects/opp/fields/weighted').set(asAdmin(t)).send({ expression: '{amount}' });
    expect([changed.status, errorOf(changed).code]).toEqual([409, 'field_in_use']);
    await t.http.delete('/api/v1/objects/opp/fields/weighted').set(asAdmin(t)).expect(204);
    expect(await t.sql(`select 1 from information_schema.columns where table_name = 'opp' and column_name = 'weighted'`)).toEqual(
      [],
    );
    expect(await t.sql(`select 1 from pg_trigger where tgname like 'stored\\_%\\_f'`)).toEqual([]);
    await t.http.delete('/api/v1/objects/acct/fields/deal_count').set(asAdmin(t)).expect(204);
  });
});
