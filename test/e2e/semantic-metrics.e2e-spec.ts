import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import type { MetricListResponse, MetricResponse } from '../../src/metrics/metric.dto';
import type { ListMetricsResult } from '../../src/tools/metric-tools/list-metrics.tool';
import type { QueryMetricResult } from '../../src/tools/metric-tools/query-metric.tool';
import type { ToolErrorContent } from '../../src/tools/tool.types';
import type { ExecuteToolResponse } from '../../src/tools/tools.dto';
import { parsedContent, sentMessages, sentToolNames, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

type Row = Record<string, unknown>;
type Executed<R> = ExecuteToolResponse & { result: R };

/**
 * A small object with figures chosen for the edge cases: a month without sales inside the range, sales on
 * both sides of a year end, a datetime that is 2024 in its own offset and 2025 in UTC, and a channel whose
 * sales were all refunded (a ratio over it divides by 0).
 */
const SALES = [
  {
    customer: 'ann',
    channel: 'web',
    status: 'paid',
    amount: 120.5,
    quantity: 1,
    sold_on: '2024-12-30',
    sold_at: '2024-12-30T10:00:00Z',
    store: 'n',
  },
  {
    customer: 'bob',
    channel: 'web',
    status: 'paid',
    amount: 80.0,
    quantity: 2,
    sold_on: '2024-12-31',
    sold_at: '2024-12-31T23:30:00-02:00',
    store: 's',
  },
  {
    customer: 'ann',
    channel: 'web',
    status: 'refunded',
    amount: 40.25,
    quantity: 1,
    sold_on: '2025-01-01',
    sold_at: '2025-01-01T08:00:00Z',
    store: 'n',
  },
  {
    customer: 'cid',
    channel: 'shop',
    status: 'refunded',
    amount: 300.0,
    quantity: 5,
    sold_on: '2025-01-02',
    sold_at: '2025-01-02T12:00:00Z',
    store: 's',
  },
  {
    customer: 'dee',
    channel: 'phone',
    status: 'paid',
    amount: 55.1,
    quantity: 3,
    sold_on: '2025-01-15',
    sold_at: '2025-01-15T09:00:00Z',
    store: 'n',
  },
  {
    customer: 'bob',
    channel: 'phone',
    status: 'paid',
    amount: 99.99,
    quantity: 4,
    sold_on: '2025-03-10',
    sold_at: '2025-03-10T18:00:00Z',
    store: 's',
  },
  {
    customer: 'eve',
    channel: 'web',
    status: 'paid',
    amount: 10.0,
    quantity: 7,
    sold_on: '2025-03-31',
    sold_at: '2025-03-31T23:59:59Z',
    store: 'n',
  },
];

const DIMENSIONS = ['channel', 'customer', 'store.region'];

const METRICS = [
  { name: 'sales', label: 'Sales', type: 'simple', measure: { function: 'count' } },
  {
    name: 'paid_revenue',
    label: 'Paid revenue',
    type: 'simple',
    measure: { function: 'sum', field: 'amount' },
    filter: { status: 'paid' },
  },
  { name: 'avg_amount', label: 'Average amount', type: 'simple', measure: { function: 'avg', field: 'amount' } },
  { name: 'min_amount', label: 'Smallest sale', type: 'simple', measure: { function: 'min', field: 'amount' } },
  { name: 'max_quantity', label: 'Largest quantity', type: 'simple', measure: { function: 'max', field: 'quantity' } },
  { name: 'customers', label: 'Customers', type: 'simple', measure: { function: 'count_distinct', field: 'customer' } },
  { name: 'paid_sales', label: 'Paid sales', type: 'simple', measure: { function: 'count' }, filter: { status: 'paid' } },
  {
    name: 'closed_sales',
    label: 'Closed sales',
    type: 'simple',
    measure: { function: 'count' },
    filter: { status: { $in: ['paid', 'refunded'] } },
  },
  { name: 'paid_rate', label: 'Paid rate', type: 'ratio', numerator: 'paid_sales', denominator: 'closed_sales' },
  {
    name: 'refund_to_paid',
    label: 'Refunds per paid sale',
    type: 'ratio',
    numerator: 'refunded_sales',
    denominator: 'paid_sales',
  },
].map((m) => ({ object: 'sale', timeField: 'sold_on', dimensions: DIMENSIONS, ...m }));

describe('metrics: definitions in metadata and the metric tools', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let member: string;

  const exec = async <R>(name: string, args: unknown, key = t.adminKey): Promise<Executed<R>> =>
    bodyOf<Executed<R>>(
      await t.http.post(`/api/v1/ai/tools/${name}/execute`).set(bearer(key)).send({ arguments: args }).expect(200),
    );
  async function metric(args: Record<string, unknown>, key?: string): Promise<Row[]> {
    const res = await exec<QueryMetricResult>('query_metric', args, key);
    expect(res).toMatchObject({ isError: false });
    return res.result.rows;
  }
  async function metricError(args: Record<string, unknown>): Promise<ToolErrorContent['error']> {
    const res = await exec<ToolErrorContent>('query_metric', args);
    expect(res.isError).toBe(true);
    return res.result.error;
  }
  const num = (value: unknown) => (value === null ? null : Number(value));

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true' } }));
    member = (await createApiKey(t, { name: 'member', role: 'member' })).secret;
    await createObject(t, 'store', [
      fieldSpec('code', 'text'),
      fieldSpec('region', 'select', { options: ['north', 'south'] }),
      fieldSpec('notes', 'json'),
    ]);
    await createObject(t, 'sale', [
      fieldSpec('customer', 'text'),
      fieldSpec('channel', 'select', { options: ['web', 'shop', 'phone'] }),
      fieldSpec('status', 'select', { options: ['paid', 'refunded'] }),
      fieldSpec('amount', 'currency'),
      fieldSpec('quantity', 'integer'),
      fieldSpec('sold_on', 'date'),
      fieldSpec('sold_at', 'datetime'),
      fieldSpec('note', 'textarea'),
      fieldSpec('store', 'lookup', { reference: 'store' }),
    ]);
    const stores: Record<string, string> = {};
    for (const [code, region] of [
      ['n', 'north'],
      ['s', 'south'],
    ]) {
      const res = await t.http.post('/api/v1/objects/store/records').set(asAdmin(t)).send({ code, region }).expect(201);
      stores[code] = bodyOf<{ id: string }>(res).id;
    }
    for (const sale of SALES) {
      await t.http
        .post('/api/v1/objects/sale/records')
        .set(asAdmin(t))
        .send({ ...sale, store: stores[sale.store] })
        .expect(201);
    }
    const refunded = {
      name: 'refunded_sales',
      label: 'Refunded',
      type: 'simple',
      measure: { function: 'count' },
      filter: { status: 'refunded' },
    };
    for (const definition of [
      ...METRICS.slice(0, 8),
      { object: 'sale', timeField: 'sold_on', dimensions: DIMENSIONS, ...refunded },
      ...METRICS.slice(8),
    ]) {
      await t.http.post('/api/v1/metrics').set(asAdmin(t)).send(definition).expect(201);
    }
    await t.http
      .post('/api/v1/metrics')
      .set(asAdmin(t))
      .send({
        name: 'sales_by_instant',
        label: 'Sales by instant',
        object: 'sale',
        type: 'simple',
        measure: { function: 'count' },
        timeField: 'sold_at',
        dimensions: ['channel'],
      })
      .expect(201);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  describe('definitions (admin writes, members read)', () => {
    it('creates, reads, lists, replaces and deletes a metric; members only read', async () => {
      const body = {
        name: 'big_sales',
        label: 'Big sales',
        description: 'Sales over 100',
        object: 'sale',
        type: 'simple',
        measure: { function: 'count' },
        filter: { amount: { $gt: 100 } },
        timeField: 'sold_at',
        dimensions: ['channel', 'store.region'],
        synonyms: ['large sales', ' whales '],
      };
      const created = bodyOf<MetricResponse>(await t.http.post('/api/v1/metrics').set(asAdmin(t)).send(body).expect(201));
      expect(created).toMatchObject({ ...body, synonyms: ['large sales', 'whales'] });
      expect(created.createdAt).toEqual(expect.any(String));

      await t.http
        .post('/api/v1/metrics')
        .set(bearer(member))
        .send({ ...body, name: 'mine' })
        .expect(403);
      await t.http.put('/api/v1/metrics/big_sales').set(bearer(member)).send(body).expect(403);
      await t.http.delete('/api/v1/metrics/big_sales').set(bearer(member)).expect(403);
      expect(errorOf(await t.http.post('/api/v1/metrics').set(asAdmin(t)).send(body).expect(409)).code).toBe('metric_exists');

      const read = bodyOf<MetricResponse>(await t.http.get('/api/v1/metrics/big_sales').set(bearer(member)).expect(200));
      expect(read).toEqual(created);
      const list = bodyOf<MetricListResponse>(await t.http.get('/api/v1/metrics').set(bearer(member)).expect(200));
      expect(list.metrics.map((m) => m.name)).toEqual([...list.metrics.map((m) => m.name)].sort());
      expect(list.metrics.map((m) => m.name)).toEqual(expect.arrayContaining(['big_sales', 'paid_rate', 'win_rate']));

      const rest: Record<string, unknown> = { ...body };
      delete rest.name;
      const replaced = bodyOf<MetricResponse>(
        await t.http
          .put('/api/v1/metrics/big_sales')
          .set(asAdmin(t))
          .send({ ...rest, label: 'Huge sales', filter: { amount: { $gt: 200 } }, dimensions: ['customer'] })
          .expect(200),
      );
      expect(replaced).toMatchObject({
        name: 'big_sales',
        label: 'Huge sales',
        filter: { amount: { $gt: 200 } },
        dimensions: ['customer'],
      });
      expect(await metric({ metrics: ['big_sales'] })).toEqual([{ big_sales: 1 }]);

      await t.http.delete('/api/v1/metrics/big_sales').set(asAdmin(t)).expect(204);
      expect(errorOf(await t.http.get('/api/v1/metrics/big_sales').set(asAdmin(t)).expect(404)).code).toBe('metric_not_found');
      await t.http.get('/api/v1/metrics').expect(401);
    });

    it.each([
      ['an unknown object', { object: 'nope' }, 'object', /Unknown object "nope"/],
      ['an unknown measure field', { measure: { function: 'sum', field: 'price' } }, 'measure.field', /unknown field "price"/],
      [
        'a sum over a text field',
        { measure: { function: 'sum', field: 'customer' } },
        'measure.field',
        /sum needs a numeric field; "customer" is text/,
      ],
      ['an unknown measure function', { measure: { function: 'median', field: 'amount' } }, 'measure.function', /median/],
      ['a filter the where compiler refuses', { filter: { colour: 'red' } }, 'filter', /filter: Unknown field "colour"/],
      ['a filter with a bad value', { filter: { quantity: { $gt: 'many' } } }, 'filter', /filter: .*quantity/],
      [
        'a time field that is not a date',
        { timeField: 'quantity' },
        'timeField',
        /"quantity" is integer; it must be a date or datetime/,
      ],
      ['an unknown time field', { timeField: 'when' }, 'timeField', /unknown field "when"/],
      [
        'a dimension through a field that is not a lookup',
        { dimensions: ['channel.name'] },
        'dimensions',
        /"channel" is select, not a lookup/,
      ],
      ['a dimension whose target field is unknown', { dimensions: ['store.city'] }, 'dimensions', /"store" has no field "city"/],
      ['an unknown dimension', { dimensions: ['colour'] }, 'dimensions', /unknown field "colour"/],
      ['a json dimension through a lookup', { dimensions: ['store.notes'] }, 'dimensions', /json field/],
      ['a ratio with a measure', { type: 'ratio', numerator: 'sales', denominator: 'sales' }, 'measure', /no measure/],
    ])('refuses %s with 400 naming the bad part', async (_case, change, part, message) => {
      const body = {
        name: 'bad_metric',
        label: 'Bad',
        object: 'sale',
        type: 'simple',
        measure: { function: 'count' },
        ...change,
      };
      const error = errorOf<{ part: string }>(await t.http.post('/api/v1/metrics').set(asAdmin(t)).send(body).expect(400));
      expect(error.code).toBe('invalid_metric');
      expect(error.details.part).toBe(part);
      expect(error.error).toMatch(message);
    });

    it.each([
      ['an unknown numerator', { numerator: 'nope', denominator: 'sales' }, 'numerator', /unknown metric "nope"/],
      ['a ratio as denominator', { numerator: 'sales', denominator: 'paid_rate' }, 'denominator', /"paid_rate" is a ratio/],
      [
        'a metric of another object',
        { numerator: 'sales', denominator: 'won_deals' },
        'denominator',
        /"won_deals" counts "deal" records/,
      ],
      ['a missing denominator', { numerator: 'sales' }, 'denominator', /needs a denominator/],
    ])('refuses a ratio with %s', async (_case, change, part, message) => {
      const body = { name: 'bad_ratio', label: 'Bad', object: 'sale', type: 'ratio', ...change };
      const error = errorOf<{ part: string }>(await t.http.post('/api/v1/metrics').set(asAdmin(t)).send(body).expect(400));
      expect(error).toMatchObject({ code: 'invalid_metric', details: { part } });
      expect(error.error).toMatch(message);
    });

    it('refuses bodies of the wrong shape with 400', async () => {
      for (const body of [
        { name: 'Bad Name', label: 'x', object: 'sale', type: 'simple', measure: { function: 'count' } },
        { name: 'x', label: 'x', object: 'sale', type: 'median' },
        { name: 'x', label: 'x', object: 'sale', type: 'simple', measure: { function: 'count' }, synonyms: 'many' },
        {
          name: 'x',
          label: 'x',
          object: 'sale',
          type: 'simple',
          measure: { function: 'count' },
          dimensions: Array(31).fill('channel'),
        },
      ]) {
        expect((await t.http.post('/api/v1/metrics').set(asAdmin(t)).send(body)).status).toBe(400);
      }
    });

    it('refuses to delete a field a metric uses (measure, filter, time field, dimension) with 409 naming the metrics', async () => {
      const amount = errorOf<{ metrics: string[] }>(
        await t.http.delete('/api/v1/objects/sale/fields/amount').set(asAdmin(t)).expect(409),
      );
      expect(amount.code).toBe('field_in_use');
      expect(amount.details.metrics).toEqual(['avg_amount', 'min_amount', 'paid_revenue']);
      expect(amount.error).toContain('avg_amount, min_amount, paid_revenue');
      for (const [object, field, metric] of [
        ['sale', 'status', 'paid_sales'],
        ['sale', 'sold_on', 'sales'],
        ['sale', 'customer', 'customers'],
        ['store', 'region', 'sales'],
        ['sale', 'store', 'sales'],
      ]) {
        const error = errorOf<{ metrics: string[] }>(
          await t.http.delete(`/api/v1/objects/${object}/fields/${field}`).set(asAdmin(t)).expect(409),
        );
        expect(error.code).toBe('field_in_use');
        expect(error.details.metrics).toContain(metric);
      }
      // A field no metric uses goes.
      await t.http.delete('/api/v1/objects/sale/fields/note').set(asAdmin(t)).expect(204);
      expect(errorOf(await t.http.delete('/api/v1/objects/sale').set(asAdmin(t)).expect(409)).code).toBe('object_in_use');
      expect(
        (
          await t.sql(
            `select 1 from information_schema.columns where table_schema = 'data' and table_name = 'sale' and column_name = 'amount'`,
          )
        ).length,
      ).toBe(1);
    });

    it('refuses to delete a metric a ratio divides, or to make it a ratio, with 409', async () => {
      const error = errorOf<{ metrics: string[] }>(await t.http.delete('/api/v1/metrics/paid_sales').set(asAdmin(t)).expect(409));
      expect(error).toMatchObject({ code: 'metric_in_use', details: { metrics: ['paid_rate', 'refund_to_paid'] } });
      const replace = await t.http
        .put('/api/v1/metrics/closed_sales')
        .set(asAdmin(t))
        .send({ label: 'x', object: 'sale', type: 'ratio', numerator: 'sales', denominator: 'sales' })
        .expect(409);
      expect(errorOf(replace).code).toBe('metric_in_use');
    });
  });

  describe('query_metric: the same figures as SQL', () => {
    const AGGREGATES: Array<[string, string]> = [
      ['sales', 'count(*)'],
      ['paid_revenue', "coalesce(sum(amount) filter (where status = 'paid'), 0)"],
      ['avg_amount', 'avg(amount)'],
      ['min_amount', 'min(amount)'],
      ['max_quantity', 'max(quantity)'],
      ['customers', 'count(distinct customer)'],
      [
        'paid_rate',
        "(count(*) filter (where status = 'paid'))::numeric / nullif(count(*) filter (where status in ('paid', 'refunded')), 0)",
      ],
    ];

    it.each(AGGREGATES)('%s over every record', async (name, sql) => {
      const [expected] = await t.sql<{ v: unknown }>(`select ${sql} as v from data.sale`);
      const rows = await metric({ metrics: [name] });
      expect(rows).toHaveLength(1);
      expect(num(rows[0][name])).toBeCloseTo(num(expected.v)!, 10);
    });

    it.each(AGGREGATES)('%s grouped by channel', async (name, sql) => {
      const expected = await t.sql<{ channel: string; v: unknown }>(
        `select channel, ${sql} as v from data.sale group by channel order by channel`,
      );
      const rows = await metric({ metrics: [name], groupBy: ['channel'] });
      expect(rows.map((r) => r.channel)).toEqual(expected.map((e) => e.channel));
      expected.forEach((e, i) => expect(num(rows[i][name])).toBeCloseTo(num(e.v)!, 10));
    });

    it('computes several metrics in one call, grouped through a lookup (store.region)', async () => {
      const expected = await t.sql<{ region: string; n: number; revenue: string }>(
        `select st.region, count(*)::int as n, coalesce(sum(s.amount) filter (where s.status = 'paid'), 0) as revenue
           from data.sale s left join data.store st on st.id = s.store group by st.region order by st.region`,
      );
      const rows = await metric({ metrics: ['sales', 'paid_revenue'], groupBy: ['store.region'] });
      expect(rows).toEqual(expected.map((e) => ({ 'store.region': e.region, sales: e.n, paid_revenue: Number(e.revenue) })));
    });

    it('gives a ratio of null where its denominator is 0', async () => {
      const rows = await metric({ metrics: ['refund_to_paid', 'paid_sales'], groupBy: ['channel'] });
      expect(rows).toEqual([
        { channel: 'phone', refund_to_paid: 0, paid_sales: 2 },
        { channel: 'shop', refund_to_paid: null, paid_sales: 0 },
        { channel: 'web', refund_to_paid: 1 / 3, paid_sales: 3 },
      ]);
    });

    it('filters on dimensions (a lookup one too), orders by a metric and limits', async () => {
      const rows = await metric({
        metrics: ['paid_revenue'],
        groupBy: ['customer'],
        where: { 'store.region': 'north', channel: { $ne: 'shop' } },
        orderBy: [{ field: 'paid_revenue', order: 'desc' }],
        limit: 2,
      });
      const expected = await t.sql<{ customer: string; v: string }>(
        `select s.customer, coalesce(sum(s.amount) filter (where s.status = 'paid'), 0) as v
           from data.sale s join data.store st on st.id = s.store
          where st.region = 'north' and s.channel is distinct from 'shop'
          group by s.customer order by v desc, s.customer limit 2`,
      );
      expect(rows).toEqual(expected.map((e) => ({ customer: e.customer, paid_revenue: Number(e.v) })));
    });

    const GRAINS: Array<[string, string, string, string]> = [
      ['day', '2024-12-29', '2025-01-03', '1 day'],
      ['week', '2024-12-23', '2025-01-19', '1 week'],
      ['month', '2024-11-01', '2025-03-31', '1 month'],
      ['quarter', '2024-07-01', '2025-06-30', '3 months'],
      ['year', '2023-01-01', '2025-12-31', '1 year'],
    ];

    it.each(GRAINS)(
      'splits by %s across the year end, empty buckets as 0 (counts, sums) and null (averages)',
      async (grain, from, to, step) => {
        const expected = await t.sql<{ period: string; n: number; revenue: string; avg: string | null }>(
          `select to_char(p, 'YYYY-MM-DD') as period,
                count(s.id)::int as n,
                coalesce(sum(s.amount) filter (where s.status = 'paid'), 0) as revenue,
                avg(s.amount) as avg
           from generate_series(date_trunc($1, $2::timestamp), date_trunc($1, $3::timestamp), $4::interval) p
           left join data.sale s on date_trunc($1, s.sold_on::timestamp) = p and s.sold_on between $2::date and $3::date
          group by p order by p`,
          [grain, from, to, step],
        );
        const rows = await metric({ metrics: ['sales', 'paid_revenue', 'avg_amount'], timeGrain: grain, from, to, limit: 200 });
        expect(rows).toEqual(
          expected.map((e) => ({
            period: e.period,
            sales: e.n,
            paid_revenue: Number(e.revenue),
            avg_amount: e.avg === null ? null : (expect.closeTo(Number(e.avg), 10) as unknown),
          })),
        );
        expect(rows.some((r) => r.sales === 0)).toBe(true);
        expect(new Set(rows.map((r) => String(r.period).slice(0, 4)))).toEqual(
          new Set(expected.map((e) => e.period.slice(0, 4))),
        );
      },
    );

    it('starts weeks on Monday and cuts datetimes in UTC', async () => {
      const week = await metric({ metrics: ['sales'], timeGrain: 'week', from: '2024-12-30', to: '2025-01-05' });
      expect(week).toEqual([{ period: '2024-12-30', sales: 4 }]);
      // 2024-12-31T23:30-02:00 is 2025-01-01 in UTC.
      const days = await metric({ metrics: ['sales_by_instant'], timeGrain: 'day', from: '2024-12-31', to: '2025-01-01' });
      const expected = await t.sql<{ period: string; n: number }>(
        `select to_char(p, 'YYYY-MM-DD') as period, (select count(*)::int from data.sale s where date_trunc('day', s.sold_at at time zone 'UTC') = p) as n
           from generate_series('2024-12-31'::timestamp, '2025-01-01'::timestamp, '1 day') p order by p`,
      );
      expect(days).toEqual(expected.map((e) => ({ period: e.period, sales_by_instant: e.n })));
      expect(days).toEqual([
        { period: '2024-12-31', sales_by_instant: 0 },
        { period: '2025-01-01', sales_by_instant: 2 },
      ]);
    });

    it('fills empty periods per group', async () => {
      const rows = await metric({
        metrics: ['sales'],
        groupBy: ['channel'],
        timeGrain: 'month',
        from: '2025-01-01',
        to: '2025-03-31',
        where: { channel: 'phone' },
      });
      expect(rows).toEqual([
        { channel: 'phone', period: '2025-01-01', sales: 1 },
        { channel: 'phone', period: '2025-02-01', sales: 0 },
        { channel: 'phone', period: '2025-03-01', sales: 1 },
      ]);
    });

    it('refuses what the metrics cannot answer, with errors the model can act on', async () => {
      expect(await metricError({ metrics: ['nope'] })).toMatchObject({
        code: 'metric_not_found',
        details: { availableMetrics: expect.arrayContaining(['sales', 'win_rate']) as unknown },
      });
      expect(await metricError({ metrics: ['sales'], groupBy: ['status'] })).toMatchObject({
        code: 'unknown_field',
        details: { availableFields: DIMENSIONS },
      });
      expect(await metricError({ metrics: ['sales'], where: { amount: { $gt: 1 } } })).toMatchObject({ code: 'unknown_field' });
      expect(await metricError({ metrics: ['sales', 'won_revenue'] })).toMatchObject({ code: 'invalid_metric_query' });
      expect(await metricError({ metrics: ['sales'], timeGrain: 'day', from: '2020-01-01', to: '2025-01-01' })).toMatchObject({
        code: 'invalid_metric_query',
      });
      expect(await metricError({ metrics: ['sales'], from: '2025-02-30' })).toMatchObject({ code: 'invalid_metric_query' });
      expect(await metricError({ metrics: ['sales'], from: '2025-03-01', to: '2025-01-01' })).toMatchObject({
        code: 'invalid_metric_query',
      });
      expect(await metricError({ metrics: ['sales'], timeGrain: 'hour' })).toMatchObject({ code: 'invalid_arguments' });
      expect(await metricError({ metrics: ['sales'], where: { channel: { $gt: [] } } })).toMatchObject({ code: 'invalid_value' });
    });
  });

  describe('no data, dated extremes and partial periods', () => {
    const PAID = { status: 'paid' };
    beforeAll(async () => {
      for (const [name, fn, field] of [
        ['paid_avg', 'avg', 'amount'],
        ['paid_max_quantity', 'max', 'quantity'],
        ['first_paid_on', 'min', 'sold_on'],
        ['last_paid_at', 'max', 'sold_at'],
      ]) {
        await t.http
          .post('/api/v1/metrics')
          .set(asAdmin(t))
          .send({
            name,
            label: name,
            object: 'sale',
            type: 'simple',
            measure: { function: fn, field },
            filter: PAID,
            timeField: 'sold_on',
            dimensions: DIMENSIONS,
          })
          .expect(201);
      }
    });
    /** A datetime as the records API returns it (null for no record). */
    const recordSoldAt = async (id: string | null) =>
      id === null
        ? null
        : bodyOf<Row>(await t.http.get(`/api/v1/objects/sale/records/${id}`).set(asAdmin(t)).expect(200)).sold_at;

    it('gives null averages and extremes, and 0 counts and sums, for a group with records but none matching', async () => {
      const expected = await t.sql<{
        channel: string;
        paid_avg: string | null;
        paid_max_quantity: number | null;
        first_paid_on: string | null;
        last_id: string | null;
        paid_sales: number;
        paid_revenue: string;
      }>(
        `select channel,
                avg(amount) filter (where status = 'paid') as paid_avg,
                (max(quantity) filter (where status = 'paid'))::int as paid_max_quantity,
                (min(sold_on) filter (where status = 'paid'))::text as first_paid_on,
                (select x.id from data.sale x where x.channel = s.channel and x.status = 'paid' order by x.sold_at desc limit 1) as last_id,
                (count(*) filter (where status = 'paid'))::int as paid_sales,
                coalesce(sum(amount) filter (where status = 'paid'), 0) as paid_revenue
           from data.sale s group by channel order by channel`,
      );
      // shop has a sale, but no paid one.
      expect(expected.find((e) => e.channel === 'shop')).toMatchObject({ paid_sales: 0, paid_avg: null, last_id: null });
      const names = ['paid_avg', 'paid_max_quantity', 'first_paid_on', 'last_paid_at', 'paid_sales', 'paid_revenue'];
      const rows = await metric({ metrics: names, groupBy: ['channel'] });
      const want: Row[] = [];
      for (const e of expected) {
        want.push({
          channel: e.channel,
          paid_avg: e.paid_avg === null ? null : expect.closeTo(Number(e.paid_avg), 10),
          paid_max_quantity: e.paid_max_quantity,
          first_paid_on: e.first_paid_on,
          last_paid_at: await recordSoldAt(e.last_id),
          paid_sales: e.paid_sales,
          paid_revenue: Number(e.paid_revenue),
        });
      }
      expect(rows).toEqual(want);
      expect(rows.find((r) => r.channel === 'shop')).toEqual({
        channel: 'shop',
        paid_avg: null,
        paid_max_quantity: null,
        first_paid_on: null,
        last_paid_at: null,
        paid_sales: 0,
        paid_revenue: 0,
      });
      // Over days that have sales but no paid one, and inside a time bucket, the same holds.
      expect(
        await metric({ metrics: ['paid_avg', 'first_paid_on', 'paid_sales'], from: '2025-01-01', to: '2025-01-02' }),
      ).toEqual([{ paid_avg: null, first_paid_on: null, paid_sales: 0 }]);
      expect(
        await metric({
          metrics: ['paid_avg', 'last_paid_at', 'paid_revenue'],
          timeGrain: 'day',
          from: '2025-01-01',
          to: '2025-01-01',
        }),
      ).toEqual([{ period: '2025-01-01', paid_avg: null, last_paid_at: null, paid_revenue: 0 }]);
    });

    it('takes the minimum and maximum of a date and a datetime field, as ISO strings like records', async () => {
      const [expected] = await t.sql<{ first: string; last: string; last_id: string; latest: string }>(
        `select (min(sold_on) filter (where status = 'paid'))::text as first,
                (max(sold_on) filter (where status = 'paid'))::text as last,
                (select id from data.sale where status = 'paid' order by sold_at desc limit 1) as last_id,
                to_char(max(sold_at) filter (where status = 'paid') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as latest
           from data.sale`,
      );
      const [row] = await metric({ metrics: ['first_paid_on', 'last_paid_at'] });
      expect(row).toEqual({ first_paid_on: expected.first, last_paid_at: await recordSoldAt(expected.last_id) });
      expect(Date.parse(row.last_paid_at as string)).toBe(Date.parse(expected.latest));
      expect(expected.first).toMatch(/^\d{4}-\d{2}-\d{2}$/);

      // The plain aggregate agrees: the same extremes, and over no records a count of 0 and no other value.
      const aggregate = (body: Row) => t.http.post('/api/v1/objects/sale/aggregate').set(asAdmin(t)).send(body).expect(200);
      const extremes = await aggregate({
        where: PAID,
        aggregations: [
          { function: 'min', field: 'sold_on', alias: 'first_paid_on' },
          { function: 'max', field: 'sold_at', alias: 'last_paid_at' },
        ],
      });
      expect((extremes.body as { rows: Row[] }).rows).toEqual([row]);
      const none = await aggregate({
        where: { status: 'paid', channel: 'shop' },
        aggregations: [
          { function: 'count', alias: 'n' },
          { function: 'sum', field: 'amount', alias: 'total' },
          { function: 'avg', field: 'amount', alias: 'average' },
          { function: 'min', field: 'sold_on', alias: 'first' },
          { function: 'max', field: 'sold_at', alias: 'last' },
        ],
      });
      expect((none.body as { rows: Row[] }).rows).toEqual([{ n: 0, total: null, average: null, first: null, last: null }]);
    });

    it('refuses a ratio that would divide the extreme of a date', async () => {
      const body = {
        name: 'bad_ratio',
        label: 'Bad',
        object: 'sale',
        type: 'ratio',
        numerator: 'first_paid_on',
        denominator: 'sales',
      };
      const error = errorOf<{ part: string }>(await t.http.post('/api/v1/metrics').set(asAdmin(t)).send(body).expect(400));
      expect(error).toMatchObject({ code: 'invalid_metric', details: { part: 'numerator' } });
      expect(error.error).toMatch(/"first_paid_on" is the min of date field "sold_on", not a number/);
    });

    const CUTS: Array<[string, string, string, string]> = [
      ['week', '2024-12-31', '2025-01-15', '1 week'],
      ['month', '2025-01-15', '2025-03-10', '1 month'],
      ['quarter', '2024-12-01', '2025-02-15', '3 months'],
      ['year', '2024-12-30', '2025-03-31', '1 year'],
      ['day', '2024-12-30', '2025-01-02', '1 day'],
    ];

    it.each(CUTS)(
      'marks the %s buckets from %s to %s cuts as partial, with the days they cover',
      async (grain, from, to, step) => {
        const expected = await t.sql<{
          period: string;
          covered_from: string;
          covered_to: string;
          cut: boolean;
          n: number;
          paid_avg: string | null;
        }>(
          `select to_char(p, 'YYYY-MM-DD') as period,
                to_char(greatest(p, $2::timestamp), 'YYYY-MM-DD') as covered_from,
                to_char(least(p + $4::interval - interval '1 day', $3::timestamp), 'YYYY-MM-DD') as covered_to,
                (p < $2::timestamp or p + $4::interval - interval '1 day' > $3::timestamp) as cut,
                count(s.id)::int as n,
                avg(s.amount) filter (where s.status = 'paid') as paid_avg
           from generate_series(date_trunc($1, $2::timestamp), date_trunc($1, $3::timestamp), $4::interval) p
           left join data.sale s on date_trunc($1, s.sold_on::timestamp) = p and s.sold_on between $2::date and $3::date
          group by p order by p`,
          [grain, from, to, step],
        );
        const rows = await metric({ metrics: ['sales', 'paid_avg'], timeGrain: grain, from, to, limit: 200 });
        expect(rows).toEqual(
          expected.map((e) => ({
            period: e.period,
            ...(e.cut && { partial: true, periodStart: e.covered_from, periodEnd: e.covered_to }),
            sales: e.n,
            paid_avg: e.paid_avg === null ? null : (expect.closeTo(Number(e.paid_avg), 10) as unknown),
          })),
        );
        expect(rows.some((r) => r.partial === true)).toBe(grain !== 'day');
      },
    );

    it('cuts January 2026 from the 15th: partial, 2026-01-15..2026-01-31', async () => {
      expect(await metric({ metrics: ['sales', 'paid_avg'], timeGrain: 'month', from: '2026-01-15', to: '2026-02-28' })).toEqual([
        { period: '2026-01-01', partial: true, periodStart: '2026-01-15', periodEnd: '2026-01-31', sales: 0, paid_avg: null },
        { period: '2026-02-01', sales: 0, paid_avg: null },
      ]);
    });
  });

  describe('access and the sample metrics', () => {
    it('under an access policy with a row filter, counts only the key’s rows; a metric using a hidden field is unknown', async () => {
      await t.http
        .post('/api/v1/policies')
        .set(asAdmin(t))
        .send({
          name: 'web-only',
          objects: { sale: { read: true, rowFilter: { channel: 'web' }, hiddenFields: ['customer'] }, store: { read: true } },
        })
        .expect(201);
      const key = await createApiKey(t, { name: 'web', role: 'member', policies: ['web-only'] });
      const [expected] = await t.sql<{ n: number }>(`select count(*)::int as n from data.sale where channel = 'web'`);
      expect(await metric({ metrics: ['sales_by_instant'] }, key.secret)).toEqual([{ sales_by_instant: expected.n }]);
      expect(await metric({ metrics: ['sales_by_instant'], groupBy: ['channel'] }, key.secret)).toEqual([
        { channel: 'web', sales_by_instant: expected.n },
      ]);
      // Every other sale metric has the hidden customer among its dimensions: for this key it does not exist.
      const hidden = await exec<ToolErrorContent>('query_metric', { metrics: ['sales'] }, key.secret);
      expect(hidden).toMatchObject({
        isError: true,
        result: { error: { code: 'metric_not_found', details: { availableMetrics: ['sales_by_instant'] } } },
      });
      const listed = await exec<ListMetricsResult>('list_metrics', {}, key.secret);
      expect(listed.result.metrics.map((m) => m.name)).toEqual(['sales_by_instant']);
    });

    it('ships the sample metrics with synonyms, and win rate matches SQL over the sample deals', async () => {
      const listed = (await exec<ListMetricsResult>('list_metrics', {}, member)).result.metrics;
      const names = listed.map((m) => m.name);
      expect(names).toEqual(
        expect.arrayContaining(['pipeline_value', 'won_revenue', 'win_rate', 'average_deal_size', 'deals_created']),
      );
      for (const m of listed.filter((x) => x.object === 'deal')) {
        expect(m.synonyms.length).toBeGreaterThan(0);
        expect(m.description!.length).toBeGreaterThan(20);
      }
      expect(listed.find((m) => m.name === 'win_rate')).toMatchObject({
        type: 'ratio',
        numerator: 'won_deals',
        denominator: 'closed_deals',
        timeGrains: ['day', 'week', 'month', 'quarter', 'year'],
      });

      const expected = await t.sql<{ industry: string | null; rate: string | null; revenue: string; pipeline: string }>(
        `select a.industry,
                (count(*) filter (where d.stage = 'won'))::numeric / nullif(count(*) filter (where d.stage in ('won', 'lost')), 0) as rate,
                coalesce(sum(d.amount) filter (where d.stage = 'won'), 0) as revenue,
                coalesce(sum(d.amount) filter (where d.stage not in ('won', 'lost')), 0) as pipeline
           from data.deal d left join data.account a on a.id = d.account group by a.industry order by a.industry nulls last`,
      );
      const rows = await metric(
        { metrics: ['win_rate', 'won_revenue', 'pipeline_value'], groupBy: ['account.industry'] },
        member,
      );
      expect(rows).toHaveLength(expected.length);
      expected.forEach((e, i) => {
        expect(rows[i]['account.industry']).toBe(e.industry);
        expect(num(rows[i].win_rate)).toBeCloseTo(num(e.rate)!, 12);
        expect(rows[i].won_revenue).toBe(Number(e.revenue));
        expect(rows[i].pipeline_value).toBe(Number(e.pipeline));
      });
    });

    it('counts deals created in the past years of the sample, per year as SQL over created_at', async () => {
      const expected = await t.sql<{ period: string; n: number }>(
        `select to_char(p, 'YYYY-MM-DD') as period,
                (select count(*)::int from data.deal d where date_trunc('year', d.created_at at time zone 'UTC') = p) as n
           from generate_series('2022-01-01'::timestamp, '2025-01-01'::timestamp, '1 year') p order by p`,
      );
      const rows = await metric({ metrics: ['deals_created'], timeGrain: 'year', from: '2022-01-01', to: '2025-12-31' }, member);
      expect(rows).toEqual(expected.map((e) => ({ period: e.period, deals_created: e.n })));
      // History, not the load instant: deals were created in each of these years.
      for (const year of ['2023-01-01', '2024-01-01', '2025-01-01']) {
        expect(rows.find((r) => r.period === year)?.deals_created).toBeGreaterThan(0);
      }
    });

    it('offers the metric tools to data_chat, whose instructions prefer a metric; the model gets query_metric’s rows', async () => {
      llm.enqueue(MockReply.toolCall('query_metric', { metrics: ['paid_revenue'], groupBy: ['channel'] }), (req) => {
        const tool = (req.body!.messages as SentMessage[]).find((m) => m.role === 'tool')!;
        const { rows } = parsedContent<QueryMetricResult>(tool);
        return MockReply.text(`Web: ${Number(rows.find((r) => r.channel === 'web')!.paid_revenue)}`);
      });
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(member))
        .send({ messages: [{ role: 'user', content: 'Paid revenue by channel?' }] })
        .expect(200);
      const [web] = await t.sql<{ v: string }>(
        `select sum(amount) as v from data.sale where channel = 'web' and status = 'paid'`,
      );
      expect(bodyOf<StatelessChatResponse>(res).content).toBe(`Web: ${Number(web.v)}`);
      expect(sentToolNames(llm, 0)).toEqual(expect.arrayContaining(['list_metrics', 'query_metric', 'aggregate_data']));
      expect(sentMessages(llm, 0)[0].content).toContain('Prefer a metric when one fits');
      const toolMessage = sentMessages(llm, 1).find((m) => m.role === 'tool')!;
      // Each row carries its figure reference (the chat's first data result, rows from 1).
      expect(parsedContent<QueryMetricResult>(toolMessage).rows).toEqual([
        { ref: 'r1.1', channel: 'phone', paid_revenue: 155.09 },
        { ref: 'r1.2', channel: 'shop', paid_revenue: 0 },
        { ref: 'r1.3', channel: 'web', paid_revenue: 210.5 },
      ]);
    });
  });
});
