import fc from 'fast-check';
import type { FieldResponse } from '../../src/metadata/metadata.dto';
import type { DescribeObjectResult } from '../../src/tools/data-tools/describe-object.tool';
import type { QueryMetricResult } from '../../src/tools/metric-tools/query-metric.tool';
import type { AggregateResponse } from '../../src/records/records.dto';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';
import { bodyOf, errorOf, idOf, type RecordBody, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';

type Row = Record<string, unknown>;

const ACCOUNTS: Row[] = [
  { name: 'Acme', region: 'north' },
  { name: 'Beta', region: 'south' },
  { name: 'Gamma', region: 'north' },
  { name: 'Delta', region: 'south' },
  { name: 'Eps', region: 'north' },
  { name: 'Zeta', region: null },
];
const OWNERS = ['alice', 'bob', 'carol'];
const STAGES = ['open', 'won', 'lost'];

/** 26 deals over accounts 0, 1, 3 and 4 (2 and 5 have none); nulls in every rolled-up field; one without an account. */
function deals(accountIds: string[]): Row[] {
  return Array.from({ length: 26 }, (_, i) => ({
    title: i % 7 === 0 ? null : `T${String((i * 7) % 26).padStart(2, '0')}`,
    acct: i === 25 ? null : accountIds[[0, 1, 3, 4][i % 4]],
    amount: i % 5 === 0 ? null : i * 100 + 0.25,
    qty: i % 6 === 0 ? null : (i % 4) - 1,
    score: i % 3 === 0 ? null : i * 1.5,
    stage: STAGES[i % 3],
    closed: i % 4 === 2 ? null : `2024-${String(1 + (i % 9)).padStart(2, '0')}-${String(10 + (i % 17)).padStart(2, '0')}`,
    owner: i === 7 ? null : OWNERS[Math.floor(i / 2) % 3],
    note: i % 4 === 1 ? `n${i}` : null,
  }));
}

/** Each rollup and count of `acct`, and its value written by hand in SQL over `o` (the deals of account `a`). */
const ROLLUPS: Array<{ spec: Row; sql: string; kind: 'number' | 'text' | 'date' }> = [
  { spec: { name: 'n_deals', type: 'count', relation: 'opp.acct' }, sql: 'count(*)', kind: 'number' },
  {
    spec: { name: 'n_open', type: 'count', relation: 'opp.acct', filter: { stage: 'open' } },
    sql: "count(*) filter (where o.stage = 'open')",
    kind: 'number',
  },
  {
    spec: { name: 'n_amounts', type: 'rollup', relation: 'opp.acct', function: 'count', field: 'amount' },
    sql: 'count(o.amount)',
    kind: 'number',
  },
  {
    spec: { name: 'total', type: 'rollup', relation: 'opp.acct', function: 'sum', field: 'amount' },
    sql: 'coalesce(sum(o.amount), 0)',
    kind: 'number',
  },
  {
    spec: { name: 'total_qty', type: 'rollup', relation: 'opp.acct', function: 'sum', field: 'qty' },
    sql: 'coalesce(sum(o.qty), 0)',
    kind: 'number',
  },
  {
    spec: { name: 'avg_score', type: 'rollup', relation: 'opp.acct', function: 'avg', field: 'score' },
    sql: 'avg(o.score)',
    kind: 'number',
  },
  {
    spec: { name: 'avg_amount', type: 'rollup', relation: 'opp.acct', function: 'avg', field: 'amount' },
    sql: 'round(avg(o.amount), 2)',
    kind: 'number',
  },
  {
    spec: { name: 'min_closed', type: 'rollup', relation: 'opp.acct', function: 'min', field: 'closed' },
    sql: "to_char(min(o.closed), 'YYYY-MM-DD')",
    kind: 'date',
  },
  {
    spec: { name: 'max_amount', type: 'rollup', relation: 'opp.acct', function: 'max', field: 'amount' },
    sql: 'max(o.amount)',
    kind: 'number',
  },
  {
    spec: { name: 'max_title', type: 'rollup', relation: 'opp.acct', function: 'max', field: 'title' },
    sql: 'max(o.title)',
    kind: 'text',
  },
  {
    spec: { name: 'owners', type: 'rollup', relation: 'opp.acct', function: 'count_distinct', field: 'owner' },
    sql: 'count(distinct o.owner)',
    kind: 'number',
  },
  {
    spec: { name: 'titles', type: 'rollup', relation: 'opp.acct', function: 'concat', field: 'title' },
    sql: "string_agg(o.title, ', ' order by o.title)",
    kind: 'text',
  },
  {
    spec: {
      name: 'open_total',
      type: 'rollup',
      relation: 'opp.acct',
      function: 'sum',
      field: 'amount',
      filter: { $and: [{ stage: 'open' }, { amount: { $gt: 300 } }] },
    },
    sql: "coalesce(sum(o.amount) filter (where o.stage = 'open' and o.amount > 300), 0)",
    kind: 'number',
  },
  {
    // Over a formula of the related object.
    spec: { name: 'weighted', type: 'rollup', relation: 'opp.acct', function: 'sum', field: 'double_amount' },
    sql: 'coalesce(sum(o.amount * 2), 0)',
    kind: 'number',
  },
];

/** The rollups' values of every account, by hand in SQL; `dealWhere` narrows the deals (a row filter). */
function expectedSql(dealWhere = 'true'): string {
  const columns = ROLLUPS.map(
    (r) => `(select ${r.sql} from data.opp o where o.acct = a.id and ${dealWhere}) as "${r.spec.name as string}"`,
  );
  return `select a.id::text as id, ${columns.join(', ')} from data.acct a order by a.id`;
}

function expectClose(actual: unknown, expected: unknown, label: string): void {
  if (expected === null || expected === undefined) return expect({ label, actual }).toEqual({ label, actual: null });
  const want = Number(expected);
  expect({ label, type: typeof actual }).toEqual({ label, type: 'number' });
  expect({ label, close: Math.abs((actual as number) - want) <= 1e-9 * Math.max(1, Math.abs(want)) }).toEqual({
    label,
    close: true,
  });
}

function expectRow(record: Row, expected: Row, label: string): void {
  for (const r of ROLLUPS) {
    const name = r.spec.name as string;
    if (r.kind === 'number') expectClose(record[name], expected[name], `${label} ${name}`);
    else expect({ label, name, value: record[name] }).toEqual({ label, name, value: expected[name] });
  }
}

describe('rollup, count and lookup_value fields: computed when read', () => {
  let t: TestApp;
  const accountIds: string[] = [];
  const dealIds: string[] = [];
  let alice: string;
  let noNote: string;
  let acctOnly: string;
  let oppOnly: string;
  let north: string;

  const list = (key: string, object: string, query: Record<string, unknown> = {}) => {
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(query)) params[name] = typeof value === 'string' ? value : JSON.stringify(value);
    return t.http.get(`/api/v1/objects/${object}/records`).query(params).set(bearer(key));
  };
  const addField = (object: string, spec: Row) =>
    t.http
      .post(`/api/v1/objects/${object}/fields`)
      .set(asAdmin(t))
      .send({ label: spec.name, ...spec });
  const tool = (name: string, args: unknown, key: string) =>
    t.http.post(`/api/v1/ai/tools/${name}/execute`).set(bearer(key)).send({ arguments: args }).expect(200);
  const policy = (name: string, objects: Row) =>
    t.http.post('/api/v1/policies').set(asAdmin(t)).send({ name, objects }).expect(201);
  const all = async (key: string, object: string, query: Record<string, unknown> = {}) => {
    const res = await list(key, object, { limit: 200, orderBy: [{ field: 'id' }], ...query });
    expect({ status: res.status, body: res.status === 200 ? 'ok' : (res.body as unknown) }).toEqual({ status: 200, body: 'ok' });
    return bodyOf<RecordPage>(res).records;
  };
  const csv = async (key: string, object: string, fields: string) => {
    const res = await t.http.get(`/api/v1/objects/${object}/records/export.csv`).query({ fields }).set(bearer(key)).expect(200);
    const [header, ...lines] = res.text.trim().split(/\r?\n/);
    const names = header.split(',').map((h) => h.replace(/"/g, ''));
    return lines.map((line) => Object.fromEntries(line.split(',').map((v, i) => [names[i], v.replace(/"/g, '')])));
  };

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'acct', [fieldSpec('name', 'text'), fieldSpec('region', 'text')]);
    await createObject(t, 'opp', [
      fieldSpec('title', 'text'),
      fieldSpec('acct', 'lookup', { reference: 'acct' }),
      fieldSpec('amount', 'currency'),
      fieldSpec('qty', 'integer'),
      fieldSpec('score', 'number'),
      fieldSpec('stage', 'select', { options: STAGES }),
      fieldSpec('closed', 'date'),
      fieldSpec('owner', 'text'),
      fieldSpec('note', 'text'),
      { name: 'double_amount', label: 'Double', type: 'formula', expression: '{amount} * 2', resultType: 'currency' },
    ]);
    for (const account of ACCOUNTS) {
      accountIds.push(idOf(await t.http.post('/api/v1/objects/acct/records').set(asAdmin(t)).send(account).expect(201)));
    }
    for (const deal of deals(accountIds)) {
      dealIds.push(idOf(await t.http.post('/api/v1/objects/opp/records').set(asAdmin(t)).send(deal).expect(201)));
    }
    for (const r of ROLLUPS) {
      const res = await addField('acct', r.spec);
      expect({ name: r.spec.name, status: res.status, body: res.body as unknown }).toMatchObject({
        name: r.spec.name,
        status: 201,
      });
    }
    // The other way round: a formula over rollups and counts, and a value through the lookup.
    await addField('acct', {
      name: 'avg_deal',
      type: 'formula',
      expression: '{total} / {n_amounts}',
      resultType: 'number',
    }).expect(201);
    await addField('opp', { name: 'acct_region', type: 'lookup_value', through: 'acct', field: 'region' }).expect(201);
    await addField('opp', { name: 'acct_total', type: 'lookup_value', through: 'acct', field: 'total' }).expect(201);
    await addField('opp', {
      name: 'region_tag',
      type: 'formula',
      expression: "UPPER({acct_region}) & '/' & {title}",
      resultType: 'text',
    }).expect(201);
    // Over a hidden field (for the key that cannot see opp.note), directly and through a filter.
    await addField('acct', { name: 'last_note', type: 'rollup', relation: 'opp.acct', function: 'max', field: 'note' }).expect(
      201,
    );
    await addField('acct', { name: 'n_noted', type: 'count', relation: 'opp.acct', filter: { note: { $null: false } } }).expect(
      201,
    );
    await addField('acct', {
      name: 'noted_share',
      type: 'formula',
      expression: '{n_noted} / {n_deals}',
      resultType: 'number',
    }).expect(201);

    await policy('own-deals', { acct: { read: true }, opp: { read: true, rowFilter: { owner: '$subject' } } });
    await policy('no-note', { acct: { read: true }, opp: { read: true, hiddenFields: ['note'] } });
    await policy('acct-only', { acct: { read: true } });
    await policy('opp-only', { opp: { read: true } });
    await policy('north-only', { acct: { read: true, rowFilter: { region: 'north' } }, opp: { read: true } });
    const key = async (name: string, policies: string[], subject = name) =>
      (await createApiKey(t, { name, role: 'member', subject, policies })).secret;
    alice = await key('alice', ['own-deals']);
    noNote = await key('no-note', ['no-note']);
    acctOnly = await key('acct-only', ['acct-only']);
    oppOnly = await key('opp-only', ['opp-only']);
    north = await key('north', ['north-only']);
  });
  afterAll(async () => {
    await t.close();
  });

  it('gives every function the value SQL written by hand gives, over nulls and empty relations', async () => {
    const records = await all(t.adminKey, 'acct');
    const expected = await t.sql<Row>(expectedSql());
    expect(records.map((r) => r.id)).toEqual(expected.map((r) => r.id));
    records.forEach((record, i) => expectRow(record, expected[i], `account ${i}`));
    // Accounts without deals: counts and sums 0, avg/min/max null, concat null.
    const empty = records.find((r) => r.id === accountIds[2])!;
    expect(empty).toMatchObject({
      n_deals: 0,
      n_open: 0,
      total: 0,
      total_qty: 0,
      owners: 0,
      avg_score: null,
      min_closed: null,
      max_amount: null,
      titles: null,
      open_total: 0,
      avg_deal: null,
    });
    // The checks above hold something: some accounts have deals, some sums are fractional.
    expect(records.filter((r) => (r.n_deals as number) > 0)).toHaveLength(4);
    expect(records.some((r) => typeof r.titles === 'string' && r.titles.includes(', '))).toBe(true);
  });

  it('composes: a formula over rollups, a rollup over a formula, a value through the lookup and a formula over it', async () => {
    const accounts = await all(t.adminKey, 'acct', { fields: 'avg_deal,total,n_amounts' });
    const expected = await t.sql<{ id: string; avg_deal: number | null }>(
      `select a.id::text as id, (select sum(o.amount)::float8 / nullif(count(o.amount), 0) from data.opp o where o.acct = a.id) as avg_deal
         from data.acct a order by a.id`,
    );
    accounts.forEach((r, i) => expectClose(r.avg_deal, expected[i].avg_deal, `avg_deal ${i}`));
    expect(Object.keys(accounts[0]).sort()).toEqual(['avg_deal', 'id', 'n_amounts', 'total']);

    const opps = await all(t.adminKey, 'opp', { fields: 'acct_region,acct_total,region_tag' });
    const want = await t.sql<Row>(
      `select o.id::text as id, a.region as acct_region,
              case when a.id is not null then (select coalesce(sum(x.amount), 0)::float8 from data.opp x where x.acct = a.id) end as acct_total,
              coalesce(upper(a.region), '') || '/' || coalesce(o.title, '') as region_tag
         from data.opp o left join data.acct a on a.id = o.acct order by o.id`,
    );
    expect(opps.map((r) => r.id)).toEqual(want.map((r) => r.id));
    opps.forEach((r, i) => {
      expect({ i, region: r.acct_region, tag: r.region_tag }).toEqual({
        i,
        region: want[i].acct_region,
        tag: want[i].region_tag,
      });
      expectClose(r.acct_total, want[i].acct_total, `acct_total ${i}`);
    });
    // The deal without an account: its lookup_value is null.
    const orphan = bodyOf<RecordBody>(await t.http.get(`/api/v1/objects/opp/records/${dealIds[25]}`).set(asAdmin(t)).expect(200));
    expect(orphan).toMatchObject({ acct: null, acct_region: null, acct_total: null });
  });

  it('filters, sorts and pages by keyset on a rollup in the order of SQL written by hand', async () => {
    const filtered = await all(t.adminKey, 'acct', { where: { open_total: { $gt: 0 }, n_deals: { $gte: 1 } } });
    const sqlIds = await t.sql<{ id: string }>(
      `select a.id::text as id from data.acct a
        where (select coalesce(sum(o.amount) filter (where o.stage = 'open' and o.amount > 300), 0) from data.opp o where o.acct = a.id) > 0
        order by a.id`,
    );
    expect(filtered.map((r) => r.id)).toEqual(sqlIds.map((r) => r.id));
    expect(filtered.length).toBeGreaterThan(0);

    const expected = await t.sql<{ id: string }>(
      `select a.id::text as id from data.acct a
        order by (select coalesce(sum(o.amount) filter (where o.stage = 'open' and o.amount > 300), 0) from data.opp o where o.acct = a.id) desc,
                 (select count(*) from data.opp o where o.acct = a.id) asc, a.id`,
    );
    const seen: string[] = [];
    let cursor: string | null | undefined;
    for (let i = 0; i < 10; i++) {
      const query: Row = {
        orderBy: [
          { field: 'open_total', order: 'desc' },
          { field: 'n_deals', order: 'asc' },
        ],
        limit: 2,
      };
      if (cursor) query.cursor = cursor;
      const page = bodyOf<RecordPage>(await list(t.adminKey, 'acct', query).expect(200));
      seen.push(...page.records.map((r) => r.id));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    expect(seen).toEqual(expected.map((r) => r.id));
    const byOffset = bodyOf<RecordPage>(
      await list(t.adminKey, 'acct', {
        orderBy: [{ field: 'open_total', order: 'desc' }, { field: 'n_deals' }],
        offset: 2,
        limit: 3,
      }).expect(200),
    );
    expect(byOffset.records.map((r) => r.id)).toEqual(expected.slice(2, 5).map((r) => r.id));
    // A formula over a lookup_value, and a lookup_value, in a where.
    const tagged = await all(t.adminKey, 'opp', { where: { acct_region: 'north', region_tag: { $startsWith: 'NORTH/T' } } });
    const taggedSql = await t.sql<{ id: string }>(
      `select o.id::text as id from data.opp o join data.acct a on a.id = o.acct where a.region = 'north' and o.title like 'T%' order by o.id`,
    );
    expect(tagged.map((r) => r.id)).toEqual(taggedSql.map((r) => r.id));
  });

  it('groups and aggregates by rollups and counts like SQL; value counts too', async () => {
    const res = await t.http
      .post('/api/v1/objects/acct/aggregate')
      .set(asAdmin(t))
      .send({
        groupBy: ['n_open'],
        aggregations: [
          { function: 'count', alias: 'accounts' },
          { function: 'sum', field: 'total', alias: 'sum_total' },
        ],
      })
      .expect(200);
    const expected = await t.sql<Row>(
      `select n_open, count(*)::int as accounts, sum(total)::float8 as sum_total from (
         select (select count(*) filter (where o.stage = 'open') from data.opp o where o.acct = a.id)::int as n_open,
                (select coalesce(sum(o.amount), 0) from data.opp o where o.acct = a.id) as total
           from data.acct a) s group by 1 order by 1`,
    );
    expect(bodyOf<AggregateResponse>(res).rows).toEqual(expected);
    const values = bodyOf<{ values: Array<{ value: unknown; count: number }> }>(
      await t.http.get('/api/v1/objects/opp/fields/acct_region/values').set(asAdmin(t)).expect(200),
    ).values;
    const sqlValues = await t.sql<{ value: string | null; count: number }>(
      `select a.region as value, count(*)::int as count from data.opp o left join data.acct a on a.id = o.acct group by 1`,
    );
    const asMap = (rows: Array<{ value: unknown; count: number }>) =>
      Object.fromEntries(rows.map((r) => [String(r.value), Number(r.count)]));
    expect(asMap(values)).toEqual(asMap(sqlValues));
  });

  it('refuses writes to computed fields with read_only_field', async () => {
    const created = await t.http.post('/api/v1/objects/acct/records').set(asAdmin(t)).send({ name: 'x', total: 3 });
    expect([created.status, errorOf(created).code]).toEqual([400, 'read_only_field']);
    const patched = await t.http
      .patch(`/api/v1/objects/opp/records/${dealIds[1]}`)
      .set(asAdmin(t))
      .send({ acct_region: 'south' });
    expect([patched.status, errorOf(patched).code]).toEqual([400, 'read_only_field']);
    const counted = await t.http.patch(`/api/v1/objects/acct/records/${accountIds[0]}`).set(asAdmin(t)).send({ n_deals: 1 });
    expect([counted.status, errorOf(counted).code]).toEqual([400, 'read_only_field']);
  });

  it('answers a write with the computed values of the written record', async () => {
    const created = bodyOf<RecordBody>(
      await t.http
        .post('/api/v1/objects/opp/records')
        .set(asAdmin(t))
        .send({ title: 'W1', acct: accountIds[1], amount: 5 })
        .expect(201),
    );
    expect(created).toMatchObject({ acct_region: 'south', region_tag: 'SOUTH/W1', double_amount: 10 });
    const moved = bodyOf<RecordBody>(
      await t.http.patch(`/api/v1/objects/opp/records/${created.id}`).set(asAdmin(t)).send({ acct: accountIds[0] }).expect(200),
    );
    expect(moved).toMatchObject({ acct_region: 'north', region_tag: 'NORTH/W1' });
    const account = bodyOf<RecordBody>(
      await t.http.post('/api/v1/objects/acct/records').set(asAdmin(t)).send({ name: 'New' }).expect(201),
    );
    expect(account).toMatchObject({ n_deals: 0, total: 0, titles: null, avg_deal: null });
    const renamed = bodyOf<RecordBody>(
      await t.http.patch(`/api/v1/objects/acct/records/${accountIds[0]}`).set(asAdmin(t)).send({ name: 'Acme 2' }).expect(200),
    );
    const [count] = await t.sql<{ n: number }>(`select count(*)::int as n from data.opp where acct = $1`, [accountIds[0]]);
    expect(renamed.n_deals).toBe(count.n);
    await t.http.delete(`/api/v1/objects/opp/records/${created.id}`).set(asAdmin(t)).expect(204);
    await t.http.delete(`/api/v1/objects/acct/records/${account.id}`).set(asAdmin(t)).expect(204);
    await t.http.patch(`/api/v1/objects/acct/records/${accountIds[0]}`).set(asAdmin(t)).send({ name: 'Acme' }).expect(200);
  });

  it('rolls up within one object (a parent lookup) and over a rollup of the related object, nested subqueries apart', async () => {
    await createObject(t, 'team', [
      fieldSpec('name', 'text'),
      fieldSpec('parent', 'lookup', { reference: 'team' }),
      fieldSpec('size', 'integer'),
    ]);
    const make = async (name: string, size: number | null, parent?: string) =>
      idOf(await t.http.post('/api/v1/objects/team/records').set(asAdmin(t)).send({ name, size, parent }).expect(201));
    const root = await make('root', 1);
    const a = await make('a', 2, root);
    const b = await make('b', null, root);
    await make('a1', 3, a);
    await make('a2', 4, a);
    await make('lonely', 5);
    await addField('team', { name: 'children', type: 'count', relation: 'team.parent' }).expect(201);
    await addField('team', {
      name: 'child_size',
      type: 'rollup',
      relation: 'team.parent',
      function: 'sum',
      field: 'size',
    }).expect(201);
    await addField('team', {
      name: 'grandchildren',
      type: 'rollup',
      relation: 'team.parent',
      function: 'sum',
      field: 'children',
    }).expect(201);
    await addField('team', { name: 'parent_name', type: 'lookup_value', through: 'parent', field: 'name' }).expect(201);
    await addField('team', { name: 'siblings', type: 'lookup_value', through: 'parent', field: 'children' }).expect(201);
    const records = await all(t.adminKey, 'team');
    const expected = await t.sql<Row>(
      `select t.id::text as id,
              (select count(*) from data.team c where c.parent = t.id)::int as children,
              (select coalesce(sum(c.size), 0) from data.team c where c.parent = t.id)::int as child_size,
              (select coalesce(sum((select count(*) from data.team g where g.parent = c.id)), 0) from data.team c where c.parent = t.id)::int as grandchildren,
              p.name as parent_name,
              case when p.id is null then null else (select count(*) from data.team s where s.parent = p.id)::int end as siblings
         from data.team t left join data.team p on p.id = t.parent order by t.id`,
    );
    expect(
      records.map((r) => ({
        ...r,
        children: Number(r.children),
        child_size: Number(r.child_size),
        grandchildren: Number(r.grandchildren),
      })),
    ).toEqual(
      expected.map((e): unknown => expect.objectContaining({ ...e, siblings: e.siblings === null ? null : Number(e.siblings) })),
    );
    expect(records.find((r) => r.id === root)).toMatchObject({ children: 2, grandchildren: 2, child_size: 2 });
    expect(records.find((r) => r.id === b)).toMatchObject({ parent_name: 'root', siblings: 2, children: 0 });
    // A batch writing a computed field is refused, naming the operation and the field; nothing is written.
    const batch = await t.http
      .post('/api/v1/objects/team/records/batch')
      .set(asAdmin(t))
      .send({
        operations: [
          { op: 'update', id: a, record: { children: 9 } },
          { op: 'update', id: b, record: { size: 7 } },
        ],
      });
    expect([batch.status, errorOf(batch).code]).toEqual([400, 'read_only_field']);
    expect(errorOf<{ errors: Row[] }>(batch).details.errors).toEqual([expect.objectContaining({ index: 0, field: 'children' })]);
    const [unchanged] = await t.sql<{ size: number | null }>(`select size from data.team where id = $1`, [b]);
    expect(unchanged.size).toBeNull();
  });

  it("searches (?q=) a concatenation and a value through a lookup, under the key's row filter", async () => {
    await addField('acct', {
      name: 'title_list',
      type: 'rollup',
      relation: 'opp.acct',
      function: 'concat',
      field: 'title',
      searchable: true,
    }).expect(201);
    const bad = await addField('acct', { name: 'bad', type: 'count', relation: 'opp.acct', searchable: true });
    expect([bad.status, errorOf(bad).code]).toEqual([400, 'invalid_searchable']);
    await t.http.patch('/api/v1/objects/opp/fields/acct_region').set(asAdmin(t)).send({ searchable: true }).expect(200);
    for (const [key, where] of [
      [t.adminKey, 'true'],
      [alice, `o.owner = 'alice'`],
    ] as const) {
      const found = await all(key, 'acct', { q: 't1' });
      const want = await t.sql<{ id: string }>(
        `select a.id::text as id from data.acct a
          where exists (select 1 from data.opp o where o.acct = a.id and ${where} and o.title ilike '%t1%') order by a.id`,
      );
      expect({ admin: key === t.adminKey, ids: found.map((r) => r.id) }).toEqual({
        admin: key === t.adminKey,
        ids: want.map((r) => r.id),
      });
      expect(want.length).toBeGreaterThan(0);
    }
    const north = await all(t.adminKey, 'opp', { q: 'NOR' });
    const wantNorth = await t.sql<{ id: string }>(
      `select o.id::text as id from data.opp o join data.acct a on a.id = o.acct where a.region = 'north' order by o.id`,
    );
    expect(north.map((r) => r.id)).toEqual(wantNorth.map((r) => r.id));
    // Hidden from a key, a searchable computed field is not searched for it.
    const noneFor = await list(acctOnly, 'acct', { q: 't1' });
    expect([noneFor.status, errorOf(noneFor).code]).toEqual([400, 'search_not_available']);
    await t.http.delete('/api/v1/objects/acct/fields/title_list').set(asAdmin(t)).expect(204);
  });

  it('refuses definitions that do not fit, with clear codes', async () => {
    const cases: Array<[Row, number, string]> = [
      [{ type: 'rollup', relation: 'opp.acct', function: 'sum', field: 'title' }, 400, 'invalid_rollup_function'],
      [{ type: 'rollup', relation: 'opp.acct', function: 'avg', field: 'closed' }, 400, 'invalid_rollup_function'],
      [{ type: 'rollup', relation: 'opp.acct', function: 'concat', field: 'amount' }, 400, 'invalid_rollup_function'],
      [{ type: 'rollup', relation: 'opp.acct', function: 'median', field: 'amount' }, 400, 'invalid_rollup_function'],
      [{ type: 'rollup', relation: 'opp.acct', function: 'sum' }, 400, 'invalid_computed_field'],
      [{ type: 'rollup', relation: 'opp.acct', function: 'sum', field: 'nope' }, 400, 'unknown_field'],
      [{ type: 'rollup', relation: 'opp.title', function: 'count' }, 400, 'invalid_computed_field'],
      [{ type: 'count', relation: 'nothing.acct' }, 400, 'unknown_reference'],
      [{ type: 'count', relation: 'opp' }, 400, 'invalid_computed_field'],
      [{ type: 'count', relation: 'opp.acct', filter: { nope: 1 } }, 400, 'unknown_field'],
      [{ type: 'count', relation: 'opp.acct', filter: { amount: { $bogus: 1 } } }, 400, 'unknown_field'],
      [{ type: 'count', relation: 'opp.acct', filter: { amount: { $gt: 'many' } } }, 400, 'invalid_value'],
      [{ type: 'count', relation: 'opp.acct', filter: { acct_total: { $gt: 1 } } }, 400, 'invalid_computed_field'],
      [{ type: 'count', relation: 'opp.acct', field: 'amount' }, 400, 'invalid_computed_field'],
      [{ type: 'count', relation: 'opp.acct', indexed: true }, 400, 'validation_failed'],
      [{ type: 'lookup_value', through: 'name', field: 'x' }, 400, 'invalid_computed_field'],
      [{ type: 'count', relation: 'opp.acct', required: true }, 400, 'validation_failed'],
      [{ type: 'formula', expression: 'YEAR(NOW())', resultType: 'number', stored: true }, 400, 'stored_not_supported'],
    ];
    for (const [spec, status, code] of cases) {
      const res = await addField('acct', { name: 'bad', ...spec });
      expect({ spec, status: res.status, code: errorOf(res).code }).toEqual({ spec, status, code });
    }
    const storedLookup = await addField('opp', {
      name: 'bad',
      type: 'lookup_value',
      through: 'acct',
      field: 'region',
      stored: true,
    });
    expect([storedLookup.status, errorOf(storedLookup).code]).toEqual([400, 'stored_not_supported']);
    const lookup = await addField('opp', { name: 'bad', type: 'lookup_value', through: 'acct', field: 'nope' });
    expect([lookup.status, errorOf(lookup).code]).toEqual([400, 'unknown_field']);
    // The admin API shows a definition as written, with its derived result type.
    const described = bodyOf<{ fields: FieldResponse[] }>(await t.http.get('/api/v1/objects/acct').set(asAdmin(t)).expect(200));
    expect(described.fields.find((f) => f.name === 'open_total')).toMatchObject({
      type: 'rollup',
      relation: 'opp.acct',
      function: 'sum',
      field: 'amount',
      filter: { $and: [{ stage: 'open' }, { amount: { $gt: 300 } }] },
      resultType: 'currency',
    });
    expect(described.fields.find((f) => f.name === 'n_deals')).toMatchObject({ type: 'count', resultType: 'integer' });
    expect(described.fields.find((f) => f.name === 'avg_score')).toMatchObject({ resultType: 'number' });
  });

  it('refuses a cycle through other objects with its path, and dropping or retyping a field a computed field uses', async () => {
    await addField('acct', { name: 'cyc_a', type: 'formula', expression: '1', resultType: 'number' }).expect(201);
    await addField('opp', { name: 'cyc_b', type: 'lookup_value', through: 'acct', field: 'cyc_a' }).expect(201);
    await addField('acct', { name: 'cyc_c', type: 'rollup', relation: 'opp.acct', function: 'sum', field: 'cyc_b' }).expect(201);
    const cycle = await t.http.patch('/api/v1/objects/acct/fields/cyc_a').set(asAdmin(t)).send({ expression: '{cyc_c} + 1' });
    expect([cycle.status, errorOf(cycle).code, errorOf<{ path: string[] }>(cycle).details.path]).toEqual([
      400,
      'computed_cycle',
      ['acct.cyc_a', 'acct.cyc_c', 'opp.cyc_b', 'acct.cyc_a'],
    ]);
    const retyped = await t.http
      .patch('/api/v1/objects/acct/fields/cyc_a')
      .set(asAdmin(t))
      .send({ expression: "'x'", resultType: 'text' });
    expect([retyped.status, errorOf(retyped).code, errorOf(retyped).error]).toEqual([
      409,
      'field_in_use',
      expect.stringContaining('opp.cyc_b'),
    ]);
    const retypedFormula = await t.http
      .patch('/api/v1/objects/opp/fields/double_amount')
      .set(asAdmin(t))
      .send({ resultType: 'text' });
    expect([retypedFormula.status, errorOf(retypedFormula).code]).toEqual([409, 'field_in_use']);

    const drops: Array<[string, string, string]> = [
      ['opp', 'amount', 'acct.total'],
      ['opp', 'acct', 'acct.n_deals'],
      ['opp', 'stage', 'acct.n_open'],
      ['opp', 'double_amount', 'acct.weighted'],
      ['acct', 'region', 'opp.acct_region'],
      ['acct', 'total', 'avg_deal'],
      ['opp', 'acct_region', 'region_tag'],
    ];
    for (const [object, field, user] of drops) {
      const res = await t.http.delete(`/api/v1/objects/${object}/fields/${field}`).set(asAdmin(t));
      expect({ field, status: res.status, code: errorOf(res).code }).toEqual({ field, status: 409, code: 'field_in_use' });
      expect(errorOf(res).error).toContain(user);
    }
    const object = await t.http.delete('/api/v1/objects/opp').set(asAdmin(t));
    expect([object.status, errorOf(object).code]).toEqual([409, 'object_in_use']);
    expect(errorOf(object).error).toContain('acct.total');
    // Only label and description of a rollup change; the rest is refused.
    await t.http.patch('/api/v1/objects/acct/fields/cyc_c').set(asAdmin(t)).send({ label: 'Cycle C' }).expect(200);
    const changed = await t.http.patch('/api/v1/objects/acct/fields/cyc_c').set(asAdmin(t)).send({ indexed: true });
    expect([changed.status, errorOf(changed).code]).toEqual([400, 'validation_failed']);
    // Unused, they go: reader first.
    await t.http.delete('/api/v1/objects/acct/fields/cyc_c').set(asAdmin(t)).expect(204);
    await t.http.delete('/api/v1/objects/opp/fields/cyc_b').set(asAdmin(t)).expect(204);
    await t.http.delete('/api/v1/objects/acct/fields/cyc_a').set(asAdmin(t)).expect(204);
  });

  it('totals only the related records a row filter lets the key read: records, get, where, aggregate, export, metrics', async () => {
    const records = await all(alice, 'acct');
    const expected = await t.sql<Row>(expectedSql(`o.owner = 'alice'`));
    const unfiltered = await t.sql<Row>(expectedSql());
    expect(records.map((r) => r.id)).toEqual(expected.map((r) => r.id));
    records.forEach((record, i) => expectRow(record, expected[i], `alice account ${i}`));
    // The filter matters: someone else's deals would change the totals.
    expect(expected.map((r) => r.n_deals)).not.toEqual(unfiltered.map((r) => r.n_deals));

    const one = bodyOf<RecordBody>(
      await t.http.get(`/api/v1/objects/acct/records/${accountIds[0]}`).set(bearer(alice)).expect(200),
    );
    expectClose(one.total, expected.find((r) => r.id === accountIds[0])!.total, 'get total');
    // A where on a rollup compares the key's own total.
    const big = await all(alice, 'acct', { where: { n_deals: { $gte: 2 } } });
    expect(big.map((r) => r.id).sort()).toEqual(
      expected
        .filter((r) => Number(r.n_deals) >= 2)
        .map((r) => r.id)
        .sort(),
    );
    const aggregated = bodyOf<AggregateResponse>(
      await t.http
        .post('/api/v1/objects/acct/aggregate')
        .set(bearer(alice))
        .send({
          aggregations: [
            { function: 'sum', field: 'total', alias: 'all_total' },
            { function: 'sum', field: 'n_deals', alias: 'deals' },
          ],
        })
        .expect(200),
    ).rows[0];
    const [sums] = await t.sql<Row>(
      `select coalesce(sum(o.amount), 0)::float8 as all_total, count(*)::int as deals from data.opp o where o.owner = 'alice' and o.acct is not null`,
    );
    expectClose(aggregated.all_total, sums.all_total, 'aggregate total');
    expectClose(Number(aggregated.deals), sums.deals, 'aggregate deals');

    const exported = await csv(alice, 'acct', 'id,total,n_deals');
    const byId = new Map(expected.map((r) => [r.id as string, r]));
    expect(exported).toHaveLength(expected.length);
    for (const row of exported) {
      expectClose(Number(row.total), byId.get(row.id)!.total, `export total ${row.id}`);
      expectClose(Number(row.n_deals), byId.get(row.id)!.n_deals, `export n_deals ${row.id}`);
    }

    await t.http
      .post('/api/v1/metrics')
      .set(asAdmin(t))
      .send({
        name: 'pipeline',
        label: 'Pipeline',
        object: 'acct',
        type: 'simple',
        measure: { function: 'sum', field: 'open_total' },
        dimensions: ['region'],
      })
      .expect(201);
    const metricRows = (key: string) =>
      tool('query_metric', { metrics: ['pipeline'], groupBy: ['region'] }, key).then(
        (res) => bodyOf<{ isError: boolean; result: QueryMetricResult }>(res).result.rows,
      );
    const metricSql = (dealWhere: string) =>
      t.sql<{ region: string | null; pipeline: number }>(
        `select a.region, sum((select coalesce(sum(o.amount) filter (where o.stage = 'open' and o.amount > 300), 0) from data.opp o
                                where o.acct = a.id and ${dealWhere}))::float8 as pipeline
           from data.acct a group by 1`,
      );
    for (const [key, where] of [
      [alice, `o.owner = 'alice'`],
      [t.adminKey, 'true'],
    ] as const) {
      const rows = await metricRows(key);
      const want = await metricSql(where);
      const got = new Map(rows.map((r) => [String(r.region), Number(r.pipeline)]));
      expect(got.size).toBe(want.length);
      for (const w of want) expectClose(got.get(String(w.region)), w.pipeline, `metric ${w.region}`);
    }
  });

  it("filters a metric by a rollup and groups one by a rollup through a lookup, under the key's row filter", async () => {
    await t.http
      .post('/api/v1/metrics')
      .set(asAdmin(t))
      .send({
        name: 'busy_accounts',
        label: 'Busy',
        object: 'acct',
        type: 'simple',
        measure: { function: 'count' },
        filter: { n_deals: { $gte: 2 } },
      })
      .expect(201);
    await t.http
      .post('/api/v1/metrics')
      .set(asAdmin(t))
      .send({
        name: 'deal_count',
        label: 'Deals',
        object: 'opp',
        type: 'simple',
        measure: { function: 'count' },
        dimensions: ['acct.n_deals'],
      })
      .expect(201);
    for (const [key, where] of [
      [alice, `o.owner = 'alice'`],
      [t.adminKey, 'true'],
    ] as const) {
      const busy = bodyOf<{ isError: boolean; result: QueryMetricResult }>(
        await tool('query_metric', { metrics: ['busy_accounts'] }, key),
      );
      const [want] = await t.sql<{ n: number }>(
        `select count(*)::int as n from data.acct a where (select count(*) from data.opp o where o.acct = a.id and ${where}) >= 2`,
      );
      expect({ key: key === alice, busy: Number(busy.result.rows[0].busy_accounts) }).toEqual({
        key: key === alice,
        busy: want.n,
      });
      const grouped = bodyOf<{ isError: boolean; result: QueryMetricResult }>(
        await tool('query_metric', { metrics: ['deal_count'], groupBy: ['acct.n_deals'] }, key),
      );
      expect(grouped.isError).toBe(false);
      const rows = await t.sql<{ n: number | null; deals: number }>(
        `select case when a.id is null then null else (select count(*) from data.opp x where x.acct = a.id and ${where.replace(/o\./g, 'x.')})::int end as n,
                count(*)::int as deals
           from data.opp o left join data.acct a on a.id = o.acct where ${where} group by 1`,
      );
      const got = Object.fromEntries(grouped.result.rows.map((r) => [String(r['acct.n_deals']), Number(r.deal_count)]));
      expect(got).toEqual(Object.fromEntries(rows.map((r) => [String(r.n), r.deals])));
    }
  });

  it('refuses a policy whose row filter names a field computed from other records', async () => {
    for (const rowFilter of [{ total: { $gt: 0 } }, { avg_deal: { $gt: 0 } }]) {
      const res = await t.http
        .post('/api/v1/policies')
        .set(asAdmin(t))
        .send({ name: 'bad-filter', objects: { acct: { read: true, rowFilter } } });
      expect({ rowFilter, status: res.status, code: errorOf(res).code }).toEqual({
        rowFilter,
        status: 400,
        code: 'invalid_policy',
      });
    }
  });

  it('reads a lookup_value as null where the row filter of the linked object hides its record', async () => {
    const opps = await all(north, 'opp', { fields: 'acct,acct_region,acct_total' });
    const expected = await t.sql<Row>(
      `select o.id::text as id, a.region as acct_region from data.opp o left join data.acct a on a.id = o.acct and a.region = 'north' order by o.id`,
    );
    expect(opps.map((r) => [r.id, r.acct_region])).toEqual(expected.map((r) => [r.id, r.acct_region]));
    expect(opps.some((r) => r.acct !== null && r.acct_region === null)).toBe(true);
  });

  it('hides a computed field over a hidden field (directly, by its filter, or under a formula) on every surface', async () => {
    const hidden = ['last_note', 'n_noted', 'noted_share'];
    const records = await all(noNote, 'acct');
    for (const record of records) for (const name of hidden) expect({ name, has: name in record }).toEqual({ name, has: false });
    expect(records[0]).toHaveProperty('total');
    for (const query of [
      { where: { n_noted: { $gt: 0 } } },
      { orderBy: [{ field: 'last_note' }] },
      { fields: 'noted_share' },
      { where: { noted_share: { $null: false } } },
    ]) {
      const res = await list(noNote, 'acct', query);
      expect({ query, status: res.status, code: errorOf(res).code }).toEqual({ query, status: 400, code: 'unknown_field' });
    }
    const one = bodyOf<RecordBody>(
      await t.http.get(`/api/v1/objects/acct/records/${accountIds[0]}`).set(bearer(noNote)).expect(200),
    );
    for (const name of hidden) expect(one).not.toHaveProperty(name);
    const header = Object.keys((await csv(noNote, 'acct', ''))[0] ?? {});
    expect(header).toContain('total');
    for (const name of hidden) expect(header).not.toContain(name);
    const aggregate = await t.http
      .post('/api/v1/objects/acct/aggregate')
      .set(bearer(noNote))
      .send({ groupBy: ['n_noted'], aggregations: [{ function: 'count', alias: 'n' }] });
    expect([aggregate.status, errorOf(aggregate).code]).toEqual([400, 'unknown_field']);
    const described = bodyOf<{ result: DescribeObjectResult }>(await tool('describe_object', { objectName: 'acct' }, noNote));
    const names = described.result.fields.map((f) => f.name);
    for (const name of hidden) expect(names).not.toContain(name);
    expect(names).toContain('total');

    // A metric and a view over a hidden rollup do not exist for the key.
    await t.http
      .post('/api/v1/metrics')
      .set(asAdmin(t))
      .send({ name: 'noted', label: 'Noted', object: 'acct', type: 'simple', measure: { function: 'sum', field: 'n_noted' } })
      .expect(201);
    const metric = bodyOf<{ isError: boolean }>(await tool('query_metric', { metrics: ['noted'] }, noNote));
    expect(metric.isError).toBe(true);
    const listed = bodyOf<{ result: { metrics: Array<{ name: string }> } }>(await tool('list_metrics', {}, noNote));
    expect(listed.result.metrics.map((m) => m.name)).not.toContain('noted');
    await t.http
      .post('/api/v1/objects/acct/views')
      .set(asAdmin(t))
      .send({ name: 'by_notes', label: 'By notes', shared: true, fields: ['name', 'n_noted'] })
      .expect(201);
    await t.http
      .post('/api/v1/objects/acct/views')
      .set(asAdmin(t))
      .send({
        name: 'by_total',
        label: 'By total',
        shared: true,
        fields: ['name', 'total'],
        orderBy: [{ field: 'total', order: 'desc' }],
      })
      .expect(201);
    const views = bodyOf<{ views: Array<{ name: string }> }>(
      await t.http.get('/api/v1/objects/acct/views').set(bearer(noNote)).expect(200),
    );
    expect(views.views.map((v) => v.name)).toEqual(['by_total']);
    const viaView = bodyOf<RecordPage>(await list(noNote, 'acct', { view: 'by_total' }).expect(200)).records;
    const top = await t.sql<{ id: string }>(
      `select a.id::text as id from data.acct a order by (select coalesce(sum(o.amount), 0) from data.opp o where o.acct = a.id) desc, a.id`,
    );
    expect(viaView.map((r) => r.id)).toEqual(top.map((r) => r.id));
    expect(Object.keys(viaView[0]).sort()).toEqual(['id', 'name', 'total']);
  });

  it('hides rollups into an object the key may not read, and values through a lookup into one', async () => {
    const accounts = await all(acctOnly, 'acct');
    const rollupNames = [...ROLLUPS.map((r) => r.spec.name as string), 'avg_deal', 'last_note', 'n_noted'];
    for (const name of rollupNames) expect({ name, has: name in accounts[0] }).toEqual({ name, has: false });
    expect(accounts[0]).toHaveProperty('region');
    const described = bodyOf<{ result: DescribeObjectResult }>(await tool('describe_object', { objectName: 'acct' }, acctOnly));
    expect(described.result.fields.map((f) => f.name)).not.toContain('total');
    const sorted = await list(acctOnly, 'acct', { orderBy: [{ field: 'total' }] });
    expect(errorOf(sorted).code).toBe('unknown_field');

    const opps = await all(oppOnly, 'opp');
    for (const name of ['acct_region', 'acct_total', 'region_tag'])
      expect({ name, has: name in opps[0] }).toEqual({ name, has: false });
    expect(opps[0]).toHaveProperty('double_amount');
    const header = Object.keys((await csv(oppOnly, 'opp', ''))[0] ?? {});
    expect(header).not.toContain('acct_region');
  });

  it('reads the change feed, history and trash of objects with computed fields, hidden ones left out', async () => {
    const temp = idOf(await t.http.post('/api/v1/objects/acct/records').set(asAdmin(t)).send({ name: 'Temp' }).expect(201));
    await t.http.patch(`/api/v1/objects/acct/records/${temp}`).set(asAdmin(t)).send({ region: 'east' }).expect(200);
    for (const key of [t.adminKey, alice, noNote]) {
      const changes = await t.http.get('/api/v1/objects/acct/changes').set(bearer(key));
      expect({ status: changes.status, body: changes.status === 200 ? 'ok' : (changes.body as unknown) }).toEqual({
        status: 200,
        body: 'ok',
      });
      expect(JSON.stringify(changes.body)).toContain(temp);
      if (key === noNote) expect(JSON.stringify(changes.body)).not.toContain('n_noted');
      const history = await t.http.get(`/api/v1/objects/acct/records/${temp}/history`).set(bearer(key));
      expect({ status: history.status, body: history.status === 200 ? 'ok' : (history.body as unknown) }).toEqual({
        status: 200,
        body: 'ok',
      });
    }
    await t.http.delete(`/api/v1/objects/acct/records/${temp}`).set(asAdmin(t)).expect(204);
    for (const key of [t.adminKey, noNote]) {
      const trash = await t.http.get('/api/v1/objects/acct/trash').set(bearer(key));
      expect({ status: trash.status, body: trash.status === 200 ? 'ok' : (trash.body as unknown) }).toEqual({
        status: 200,
        body: 'ok',
      });
      expect(JSON.stringify(trash.body)).toContain(temp);
      if (key === noNote) expect(JSON.stringify(trash.body)).not.toContain('n_noted');
    }
  });

  it('describes each computed field to the model: relation, function, field, filter, result type and how it is computed', async () => {
    const described = bodyOf<{ result: DescribeObjectResult }>(await tool('describe_object', { objectName: 'acct' }, t.adminKey));
    const field = (name: string) => described.result.fields.find((f) => f.name === name);
    expect(field('open_total')).toMatchObject({
      type: 'rollup',
      relation: 'opp.acct',
      function: 'sum',
      field: 'amount',
      filter: { $and: [{ stage: 'open' }, { amount: { $gt: 300 } }] },
      resultType: 'currency',
    });
    expect(field('open_total')!.computed).toContain('only those the caller may read');
    expect(field('n_deals')).toMatchObject({ type: 'count', relation: 'opp.acct', resultType: 'integer' });
    expect(field('avg_score')!.computed).toContain('null when there are none');
    const opp = bodyOf<{ result: DescribeObjectResult }>(await tool('describe_object', { objectName: 'opp' }, t.adminKey));
    expect(opp.result.fields.find((f) => f.name === 'acct_region')).toMatchObject({
      type: 'lookup_value',
      through: 'acct',
      field: 'region',
      resultType: 'text',
    });
    // query_records sorted by a rollup: the top accounts by open pipeline in one call.
    const top = bodyOf<{ isError: boolean; result: { records: Row[] } }>(
      await tool(
        'query_records',
        { objectName: 'acct', orderBy: [{ field: 'open_total', order: 'desc' }], fields: ['name', 'open_total'], limit: 3 },
        t.adminKey,
      ),
    );
    expect(top.isError).toBe(false);
    const want = await t.sql<{ name: string }>(
      `select a.name from data.acct a order by (select coalesce(sum(o.amount) filter (where o.stage = 'open' and o.amount > 300), 0)
         from data.opp o where o.acct = a.id) desc, a.id limit 3`,
    );
    expect(top.result.records.map((r) => r.name)).toEqual(want.map((r) => r.name));
  });

  it('property: under random policies on the related object, a computed field is shown exactly when it reads only visible fields, with totals of only the visible rows', async () => {
    /** The deal fields each computed field of acct reads, at any depth (the relation's lookup included). */
    const READS: Record<string, string[]> = {
      n_deals: ['acct'],
      n_open: ['acct', 'stage'],
      n_amounts: ['acct', 'amount'],
      total: ['acct', 'amount'],
      total_qty: ['acct', 'qty'],
      avg_score: ['acct', 'score'],
      avg_amount: ['acct', 'amount'],
      min_closed: ['acct', 'closed'],
      max_amount: ['acct', 'amount'],
      max_title: ['acct', 'title'],
      owners: ['acct', 'owner'],
      titles: ['acct', 'title'],
      open_total: ['acct', 'amount', 'stage'],
      weighted: ['acct', 'amount'],
      last_note: ['acct', 'note'],
      n_noted: ['acct', 'note'],
      avg_deal: ['acct', 'amount'],
      noted_share: ['acct', 'note'],
    };
    const FILTERS: Array<{ where: Row | undefined; sql: string }> = [
      { where: undefined, sql: 'true' },
      { where: { owner: { $in: ['alice', 'carol'] } }, sql: `o.owner in ('alice', 'carol')` },
      { where: { stage: 'open' }, sql: `o.stage = 'open'` },
      { where: { $or: [{ amount: { $gt: 1200 } }, { note: { $null: false } }] }, sql: '(o.amount > 1200 or o.note is not null)' },
    ];
    const policies = fc.sample(
      fc.record({
        read: fc.boolean(),
        filter: fc.integer({ min: 0, max: FILTERS.length - 1 }),
        hidden: fc.subarray(['acct', 'amount', 'stage', 'title', 'note', 'owner', 'score']),
      }),
      { numRuns: 12, seed: 3505 },
    );
    policies.push({ read: true, filter: 1, hidden: [] }, { read: true, filter: 3, hidden: ['title'] });
    for (const [i, p] of policies.entries()) {
      const filter = FILTERS[p.filter];
      const grant: Row = { read: p.read };
      if (filter.where) grant.rowFilter = filter.where;
      if (p.hidden.length) grant.hiddenFields = p.hidden;
      await policy(`prop-${i}`, { acct: { read: true }, opp: grant });
      const key = (await createApiKey(t, { name: `prop-${i}`, role: 'member', subject: `prop-${i}`, policies: [`prop-${i}`] }))
        .secret;
      const records = await all(key, 'acct');
      const label = JSON.stringify(p);
      for (const [name, reads] of Object.entries(READS)) {
        const visible = p.read && reads.every((f) => !p.hidden.includes(f));
        expect({ label, name, shown: name in records[0] }).toEqual({ label, name, shown: visible });
      }
      const expected = await t.sql<Row>(expectedSql(filter.sql));
      records.forEach((record, r) => {
        for (const rollup of ROLLUPS) {
          const name = rollup.spec.name as string;
          if (!(name in record)) continue;
          if (rollup.kind === 'number') expectClose(record[name], expected[r][name], `${label} ${name} ${r}`);
          else expect({ label, name, value: record[name] }).toEqual({ label, name, value: expected[r][name] });
        }
      });
      const described = bodyOf<{ result: DescribeObjectResult }>(await tool('describe_object', { objectName: 'acct' }, key));
      const names = described.result.fields.map((f) => f.name);
      for (const [name, reads] of Object.entries(READS)) {
        expect({ label, name, described: names.includes(name) }).toEqual({
          label,
          name,
          described: p.read && reads.every((f) => !p.hidden.includes(f)),
        });
      }
    }
  });
});
