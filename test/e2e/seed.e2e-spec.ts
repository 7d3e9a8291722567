import type { AggregateResponse } from '../../src/records/records.dto';
import { CRM_SAMPLE_REFERENCE_DATE, generateCrmSample } from '../../src/seed/crm-sample.data';
import type { ObjectListResponse, ObjectResponse } from '../../src/metadata/metadata.dto';
import { match } from '../support/matchers';
import { bodyOf, type RecordPage } from '../support/responses';
import { startTestApp, TestApp } from '../support/test-app';
import { asAdmin } from '../support/fixtures';

type Row = Record<string, unknown>;

const SAMPLE_OBJECTS = ['account', 'activity', 'contact', 'deal'];

describe('sample CRM seed (SEED=true)', () => {
  let t: TestApp;

  const list = (object: string, query: Record<string, unknown> = {}) => {
    const params: Record<string, string> = {};
    for (const [key, value] of Object.entries(query)) params[key] = typeof value === 'string' ? value : JSON.stringify(value);
    return t.http.get(`/api/v1/objects/${object}/records`).query(params).set(asAdmin(t));
  };

  async function sqlCount(table: string, where = 'true', params: unknown[] = []): Promise<number> {
    const [row] = await t.sql<{ count: string }>(`select count(*) from data.${table} where ${where}`, params);
    return Number(row.count);
  }

  beforeAll(async () => {
    t = await startTestApp({ env: { SEED: 'true' } });
  });
  afterAll(() => t.close());

  it('lists the seeded objects account, contact, deal and activity', async () => {
    const res = await t.http.get('/api/v1/objects').set(asAdmin(t)).expect(200);
    expect(bodyOf<ObjectListResponse>(res).objects.map((o: { name: string }) => o.name)).toEqual(SAMPLE_OBJECTS);
    for (const object of bodyOf<ObjectListResponse>(res).objects) {
      expect(object).toEqual({
        name: object.name,
        label: match.any(String),
        description: match.any(String),
        fieldCount: match.any(Number),
      });
      expect(object.fieldCount).toBeGreaterThanOrEqual(5);
    }
  });

  it('defines deal with a stage select, a currency amount, a close date, an owner and lookups to account and contact', async () => {
    const res = await t.http.get('/api/v1/objects/deal').set(asAdmin(t)).expect(200);
    const field = (name: string) => bodyOf<ObjectResponse>(res).fields.find((f: { name: string }) => f.name === name);
    expect(field('stage')).toMatchObject({ type: 'select', options: match.arrayContaining(['won', 'lost']) });
    expect(field('amount')).toMatchObject({ type: 'currency' });
    expect(field('close_date')).toMatchObject({ type: 'date' });
    expect(field('owner')).toMatchObject({ type: 'text' });
    expect(
      bodyOf<ObjectResponse>(res)
        .fields.filter((f: { type: string }) => f.type === 'lookup')
        .map((f) => f.reference)
        .sort(),
    ).toEqual(['account', 'contact']);
  });

  it('loads at least 200 accounts, 1,000 contacts and 2,000 deals, and the API total equals the SQL count', async () => {
    const minimum: Record<string, number> = { account: 200, contact: 1000, deal: 2000, activity: 1 };
    for (const object of SAMPLE_OBJECTS) {
      const res = await list(object, { limit: '1' }).expect(200);
      const expected = await sqlCount(object);
      expect({ object, total: bodyOf<RecordPage>(res).total }).toEqual({ object, total: expected });
      expect(expected).toBeGreaterThanOrEqual(minimum[object]);
    }
  });

  it('returns the same count for "won deals above 10,000" as the same WHERE in SQL', async () => {
    const res = await list('deal', { where: { stage: 'won', amount: { $gt: 10000 } }, limit: '1000' }).expect(200);

    const expected = await sqlCount('deal', `stage = 'won' and amount > 10000`);
    expect(expected).toBeGreaterThan(0);
    expect(bodyOf<RecordPage>(res).total).toBe(expected);
    expect(bodyOf<RecordPage>(res).records).toHaveLength(Math.min(expected, 1000));
    for (const deal of bodyOf<RecordPage>(res).records) {
      expect(deal.stage).toBe('won');
      expect(deal.amount).toBeGreaterThan(10000);
    }
  });

  it('returns the same rows as SQL for a filter with combinators, dates and nulls', async () => {
    const where = {
      $or: [{ stage: { $in: ['proposal', 'negotiation'] } }, { close_date: { $between: ['2025-01-01', '2025-03-31'] } }],
      owner: { $null: false },
      $not: { deal_type: 'renewal' },
    };
    const expected = await t.sql<{ id: string }>(
      `select id from data.deal
        where (stage in ('proposal', 'negotiation') or close_date between '2025-01-01' and '2025-03-31')
          and owner is not null and not coalesce(deal_type = 'renewal', false)
        order by id`,
    );
    expect(expected.length).toBeGreaterThan(0);

    const res = await list('deal', { where, fields: 'id', limit: '1000' }).expect(200);

    expect(bodyOf<RecordPage>(res).total).toBe(expected.length);
    expect(bodyOf<RecordPage>(res).records.map((r: Row) => r.id)).toEqual(expected.slice(0, 1000).map((r) => r.id));
  });

  it('clamps a page to 1,000 records while reporting the full total', async () => {
    const res = await list('deal', { limit: '5000' }).expect(200);
    expect(res.body).toMatchObject({ limit: 1000, offset: 0, total: await sqlCount('deal') });
    expect(bodyOf<RecordPage>(res).records).toHaveLength(1000);
  });

  it('aggregates won revenue per owner exactly like SQL', async () => {
    const res = await t.http
      .post('/api/v1/objects/deal/aggregate')
      .set(asAdmin(t))
      .send({
        where: { stage: 'won' },
        groupBy: ['owner'],
        aggregations: [
          { function: 'sum', field: 'amount', alias: 'revenue' },
          { function: 'count', alias: 'deals' },
        ],
        orderBy: [{ field: 'revenue', order: 'desc' }],
        limit: 1000,
      })
      .expect(200);
    const expected = await t.sql<{ owner: string | null; revenue: string; deals: number }>(
      `select owner, sum(amount)::text as revenue, count(*)::int as deals from data.deal where stage = 'won'
        group by owner order by sum(amount) desc nulls last, owner asc`,
    );
    expect(bodyOf<AggregateResponse>(res).rows).toEqual(
      expected.map((r) => ({ owner: r.owner, revenue: Number(r.revenue), deals: r.deals })),
    );
  });

  it('loads each record with the created_at of the sample’s history, not the load instant', async () => {
    const sample = generateCrmSample();
    for (const { name, records } of sample.objects) {
      const rows = await t.sql<{ id: string; created_at: Date }>(`select id, created_at from data.${name}`);
      const loaded = new Map(rows.map((r) => [r.id, new Date(r.created_at).toISOString()]));
      const off = records.filter((r) => loaded.get(r.id as string) !== r.created_at).map((r) => r.id);
      expect({ object: name, off: off.slice(0, 5) }).toEqual({ object: name, off: [] });
    }
    const [span] = await t.sql<{ years: number; before: boolean; after_close: number }>(
      `select count(distinct extract(year from created_at at time zone 'UTC'))::int as years,
              max(created_at) < $1::timestamptz as before,
              count(*) filter (where (created_at at time zone 'UTC')::date >= close_date)::int as after_close
         from data.deal`,
      [CRM_SAMPLE_REFERENCE_DATE],
    );
    expect(span).toEqual({ years: 4, before: true, after_close: 0 });
    // The records API shows it like any other record's created_at.
    const [deal] = bodyOf<RecordPage>(await list('deal', { limit: '1', orderBy: [{ field: 'created_at' }] }).expect(200)).records;
    expect(deal.created_at).toBe([...sample.objects[2].records].map((r) => r.created_at as string).sort()[0]);
  });

  it('keeps every lookup pointing at an existing record', async () => {
    const dangling = await t.sql(
      `select 1 from data.deal d left join data.account a on a.id = d.account where a.id is null
       union all select 1 from data.contact c left join data.account a on a.id = c.account where c.account is not null and a.id is null`,
    );
    expect(dangling).toEqual([]);
  });

  describe('restarting on the same database', () => {
    it('neither duplicates nor overwrites: counts, edits, deletions and added fields survive', async () => {
      const counts: Record<string, number> = {};
      for (const object of SAMPLE_OBJECTS) counts[object] = await sqlCount(object);
      const [deal] = bodyOf<RecordPage>(
        await list('deal', { limit: '1', orderBy: [{ field: 'amount', order: 'desc' }] }).expect(200),
      ).records;
      await t.http
        .patch(`/api/v1/objects/deal/records/${deal.id}`)
        .set(asAdmin(t))
        .send({ name: 'Edited by a user', amount: 1.5 })
        .expect(200);
      const [activity] = bodyOf<RecordPage>(await list('activity', { limit: '1' }).expect(200)).records;
      await t.http.delete(`/api/v1/objects/activity/records/${activity.id}`).set(asAdmin(t)).expect(204);
      await t.http.patch('/api/v1/objects/account').set(asAdmin(t)).send({ label: 'Customer account' }).expect(200);
      await t.http
        .post('/api/v1/objects/contact/fields')
        .set(asAdmin(t))
        .send({ name: 'nickname', label: 'Nickname', type: 'text' })
        .expect(201);
      const fieldCount = Number((await t.sql<{ n: string }>('select count(*) as n from field_definitions'))[0].n);

      const restarted = await startTestApp({ database: t.database, env: { SEED: 'true' } });
      try {
        const objects = await restarted.http.get('/api/v1/objects').set(asAdmin(t)).expect(200);
        expect(bodyOf<ObjectListResponse>(objects).objects.map((o: { name: string }) => o.name)).toEqual(SAMPLE_OBJECTS);
        for (const object of ['account', 'contact', 'deal']) expect(await sqlCount(object)).toBe(counts[object]);
        expect(await sqlCount('activity')).toBe(counts.activity - 1);
        expect(await sqlCount('activity', 'id = $1', [activity.id])).toBe(0);

        const edited = await restarted.http.get(`/api/v1/objects/deal/records/${deal.id}`).set(asAdmin(t)).expect(200);
        expect(edited.body).toMatchObject({ name: 'Edited by a user', amount: 1.5 });
        const account = await restarted.http.get('/api/v1/objects/account').set(asAdmin(t)).expect(200);
        expect(bodyOf<ObjectResponse>(account).label).toBe('Customer account');
        const contact = await restarted.http.get('/api/v1/objects/contact').set(asAdmin(t)).expect(200);
        expect(bodyOf<ObjectResponse>(contact).fields.map((f: { name: string }) => f.name)).toContain('nickname');
        expect(Number((await t.sql<{ n: string }>('select count(*) as n from field_definitions'))[0].n)).toBe(fieldCount);
      } finally {
        await restarted.close();
      }
    });
  });
});
