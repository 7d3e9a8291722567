import type { Response } from 'supertest';
import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import type { RecordListResponse } from '../../src/records/records.dto';
import { MigrationViewOwnerKeys } from '../../src/database/migrations/migration-20261129-view-owner-keys';
import type { MetricListResponse, MetricResponse } from '../../src/metrics/metric.dto';
import type { ListMetricsResult } from '../../src/tools/metric-tools/list-metrics.tool';
import type { QueryMetricResult } from '../../src/tools/metric-tools/query-metric.tool';
import type { ToolErrorContent } from '../../src/tools/tool.types';
import type { ExecuteToolResponse } from '../../src/tools/tools.dto';
import type { ViewListResponse, ViewResponse } from '../../src/views/view.dto';
import { parsedContent, sentMessages, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

type Executed<R> = ExecuteToolResponse & { result: R };

/** Names of fields hidden from the `narrow` key: no definition it receives may mention them. */
const HIDDEN_NAMES = ['margin', 'booked_at', 'rating'];

const METRICS = [
  {
    name: 'sales',
    object: 'sale',
    type: 'simple',
    measure: { function: 'count' },
    timeField: 'sold_on',
    dimensions: ['channel'],
  },
  { name: 'web_sales', object: 'sale', type: 'simple', measure: { function: 'count' }, filter: { channel: 'web' } },
  { name: 'web_share', object: 'sale', type: 'ratio', numerator: 'web_sales', denominator: 'sales', dimensions: ['channel'] },
  { name: 'revenue', object: 'sale', type: 'simple', measure: { function: 'sum', field: 'amount' }, dimensions: ['channel'] },
  // Each of these uses something hidden from `narrow`: the measure, the filter, a ratio's part, the time field, a lookup's field.
  { name: 'total_margin', object: 'sale', type: 'simple', measure: { function: 'sum', field: 'margin' } },
  {
    name: 'high_margin_sales',
    object: 'sale',
    type: 'simple',
    measure: { function: 'count' },
    filter: { margin: { $gt: 10 } },
  },
  { name: 'margin_rate', object: 'sale', type: 'ratio', numerator: 'total_margin', denominator: 'revenue' },
  { name: 'bookings', object: 'sale', type: 'simple', measure: { function: 'count' }, timeField: 'booked_at' },
  { name: 'sales_by_rating', object: 'sale', type: 'simple', measure: { function: 'count' }, dimensions: ['store.rating'] },
  // Over a lookup's target object, and over that object itself: absent for `salesOnly`, which may not read stores.
  {
    name: 'sales_by_region',
    object: 'sale',
    type: 'simple',
    measure: { function: 'count' },
    dimensions: ['channel', 'store.region'],
  },
  { name: 'stores', object: 'store', type: 'simple', measure: { function: 'count' } },
].map((m) => ({ label: m.name.replace(/_/g, ' '), description: `About ${m.name}`, ...m }));

const ALL_METRICS = METRICS.map((m) => m.name).sort();
const NARROW_METRICS = ['revenue', 'sales', 'sales_by_region', 'stores', 'web_sales', 'web_share'];
const SALES_ONLY_METRICS = [
  'bookings',
  'high_margin_sales',
  'margin_rate',
  'revenue',
  'sales',
  'total_margin',
  'web_sales',
  'web_share',
];

/**
 * Shared views of sales: `web` uses only fields `narrow` sees; each other one uses margin or booked_at in one part
 * (their names do not say so: a chat's context repeats the name it is given).
 */
const VIEWS = [
  {
    name: 'web',
    label: 'Web sales',
    where: { channel: 'web' },
    orderBy: [{ field: 'amount', order: 'desc' }],
    fields: ['channel', 'amount'],
  },
  { name: 'top_earners', label: 'Sorted by margin', orderBy: [{ field: 'margin', order: 'desc' }] },
  { name: 'earnings_columns', label: 'Margin columns', fields: ['channel', 'margin'] },
  { name: 'best_deals', label: 'High margin', description: 'Sales whose margin tops 10', where: { margin: { $gt: 10 } } },
  { name: 'timeline', label: 'Grouped by booking', groupBy: ['booked_at'] },
].map((v) => ({ ...v, shared: true }));
const HIDDEN_VIEWS = VIEWS.map((v) => v.name).filter((name) => name !== 'web');

/**
 * A definition (metric, saved view) tells a key nothing its data would not: one using an object the key may
 * not read or a field hidden from it is absent from lists and 404 like an unknown name, on the REST API, in
 * the tools and in what a chat sends the model. Private views belong to the key that saved them.
 */
describe('definitions are filtered like data: metrics and saved views', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let narrow: string;
  let salesOnly: string;
  let member: string;
  let sam1: CreatedApiKeyResponse;
  let sam2: CreatedApiKeyResponse;

  const exec = async <R>(name: string, args: unknown, key: string): Promise<Executed<R>> =>
    bodyOf<Executed<R>>(
      await t.http.post(`/api/v1/ai/tools/${name}/execute`).set(bearer(key)).send({ arguments: args }).expect(200),
    );
  const names = (items: Array<{ name: string }>) => items.map((item) => item.name);
  /** A 404 body with `name` where an unknown name stood: the caller cannot tell a hidden definition from none. */
  const likeUnknown = (unknown: Response, unknownName: string, name: string) => {
    const body = errorOf(unknown);
    return { ...body, error: body.error.replace(unknownName, name) };
  };
  const mentionsHidden = (value: unknown) => HIDDEN_NAMES.filter((word) => JSON.stringify(value).includes(word));

  async function keyWith(name: string, policies: string[], subject = name): Promise<string> {
    const key = await createApiKey(t, { name, role: 'member', subject });
    await t.http.patch(`/api/v1/api-keys/${key.id}`).set(asAdmin(t)).send({ policies }).expect(200);
    return key.secret;
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm());
    await createObject(t, 'store', [
      fieldSpec('code', 'text'),
      fieldSpec('region', 'select', { options: ['north', 'south'] }),
      fieldSpec('rating', 'integer'),
    ]);
    await createObject(t, 'sale', [
      fieldSpec('channel', 'select', { options: ['web', 'shop'] }),
      fieldSpec('amount', 'currency'),
      fieldSpec('margin', 'currency'),
      fieldSpec('sold_on', 'date'),
      fieldSpec('booked_at', 'datetime'),
      fieldSpec('store', 'lookup', { reference: 'store' }),
    ]);
    const store = await t.http
      .post('/api/v1/objects/store/records')
      .set(asAdmin(t))
      .send({ code: 'n1', region: 'north', rating: 4 });
    const operations = Array.from({ length: 12 }, (_, i) => ({
      op: 'create',
      record: {
        channel: i % 3 ? 'shop' : 'web',
        amount: 100 + i,
        margin: i * 2,
        sold_on: `2025-01-${String(i + 1).padStart(2, '0')}`,
        booked_at: `2025-01-${String(i + 1).padStart(2, '0')}T10:00:00Z`,
        store: bodyOf<{ id: string }>(store).id,
      },
    }));
    await t.http.post('/api/v1/objects/sale/records/batch').set(asAdmin(t)).send({ operations }).expect(200);
    for (const metric of METRICS) await t.http.post('/api/v1/metrics').set(asAdmin(t)).send(metric).expect(201);
    for (const view of VIEWS) await t.http.post('/api/v1/objects/sale/views').set(asAdmin(t)).send(view).expect(201);

    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'no-margin',
        objects: {
          sale: { read: true, hiddenFields: ['margin', 'booked_at'] },
          store: { read: true, hiddenFields: ['rating'] },
        },
      })
      .expect(201);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'sales-only', objects: { sale: { read: true } } })
      .expect(201);
    narrow = await keyWith('narrow', ['no-margin']);
    salesOnly = await keyWith('sales-only', ['sales-only']);
    member = (await createApiKey(t, { name: 'member', role: 'member' })).secret;
    sam1 = await createApiKey(t, { name: 'sam-laptop', role: 'member', subject: 'sam' });
    sam2 = await createApiKey(t, { name: 'sam-phone', role: 'member', subject: 'sam' });
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  describe('metrics', () => {
    it('lists and reads only metrics whose every object and field the key sees; any other is 404 like an unknown one', async () => {
      const listed = async (key: string) =>
        bodyOf<MetricListResponse>(await t.http.get('/api/v1/metrics').set(bearer(key)).expect(200)).metrics;
      expect(names(await listed(t.adminKey))).toEqual(ALL_METRICS);
      expect(names(await listed(member))).toEqual(ALL_METRICS);
      expect(names(await listed(salesOnly))).toEqual(SALES_ONLY_METRICS);
      const narrowList = await listed(narrow);
      expect(names(narrowList)).toEqual(NARROW_METRICS);
      expect(mentionsHidden(narrowList)).toEqual([]);

      const unknown = await t.http.get('/api/v1/metrics/no_such_metric').set(bearer(narrow)).expect(404);
      expect(errorOf(unknown).code).toBe('metric_not_found');
      for (const name of ALL_METRICS.filter((n) => !NARROW_METRICS.includes(n))) {
        const res = await t.http.get(`/api/v1/metrics/${name}`).set(bearer(narrow));
        expect([name, res.status, res.body]).toEqual([name, 404, likeUnknown(unknown, 'no_such_metric', name)]);
      }
      for (const name of ['sales_by_region', 'stores']) {
        expect((await t.http.get(`/api/v1/metrics/${name}`).set(bearer(salesOnly))).status).toBe(404);
      }
      const region = bodyOf<MetricResponse>(await t.http.get('/api/v1/metrics/sales_by_region').set(bearer(narrow)).expect(200));
      expect(region.dimensions).toEqual(['channel', 'store.region']);
      expect((await t.http.get('/api/v1/metrics/margin_rate').set(bearer(salesOnly))).status).toBe(200);
    });

    it('list_metrics lists the same metrics; query_metric refuses the others as unknown', async () => {
      const listed = await exec<ListMetricsResult>('list_metrics', {}, narrow);
      expect(names(listed.result.metrics)).toEqual(NARROW_METRICS);
      expect(mentionsHidden(listed.result)).toEqual([]);
      expect(names((await exec<ListMetricsResult>('list_metrics', {}, salesOnly)).result.metrics)).toEqual(SALES_ONLY_METRICS);

      for (const [key, metric, available] of [
        [narrow, 'total_margin', NARROW_METRICS],
        [narrow, 'margin_rate', NARROW_METRICS],
        [narrow, 'bookings', NARROW_METRICS],
        [narrow, 'sales_by_rating', NARROW_METRICS],
        [salesOnly, 'sales_by_region', SALES_ONLY_METRICS],
      ] as const) {
        const refused = await exec<ToolErrorContent>('query_metric', { metrics: [metric] }, key);
        expect([metric, refused.isError, refused.result.error.code, refused.result.error.details]).toEqual([
          metric,
          true,
          'metric_not_found',
          { metric, availableMetrics: available },
        ]);
      }
      // A ratio whose parts the key sees is computed, over all the key's rows.
      const share = await exec<QueryMetricResult>('query_metric', { metrics: ['web_share'] }, narrow);
      expect(share.result.rows).toEqual([{ web_share: 4 / 12 }]);
    });

    it('a chat’s model gets from list_metrics only the metrics the key sees, and query_metric of another is unknown', async () => {
      llm.enqueue(
        MockReply.toolCalls([
          { id: 'list', name: 'list_metrics', arguments: {} },
          { id: 'margin', name: 'query_metric', arguments: { metrics: ['total_margin'] } },
        ]),
        MockReply.text('done'),
      );
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(narrow))
        .send({ messages: [{ role: 'user', content: 'Which metrics are there?' }] })
        .expect(200);
      expect(bodyOf<StatelessChatResponse>(res).content).toBe('done');
      const tools = sentMessages(llm, 1).filter((m) => m.role === 'tool');
      const byId: Record<string, SentMessage> = Object.fromEntries(tools.map((m) => [m.tool_call_id ?? '', m] as const));
      const offered = parsedContent<ListMetricsResult>(byId.list);
      expect(names(offered.metrics)).toEqual(NARROW_METRICS);
      expect(mentionsHidden(byId.list.content)).toEqual([]);
      expect(byId.margin.content).toMatch(/^Tool call failed: .*"code":"metric_not_found"/);
    });
  });

  describe('saved views', () => {
    const views = '/api/v1/objects/sale/views';
    const records = (key: string, view: string) => t.http.get('/api/v1/objects/sale/records').set(bearer(key)).query({ view });

    it('lists and reads only views whose every field the key sees; any other is 404 like an unknown one', async () => {
      const listed = async (key: string) => bodyOf<ViewListResponse>(await t.http.get(views).set(bearer(key)).expect(200)).views;
      expect(names(await listed(member))).toEqual(names(VIEWS).sort());
      const narrowList = await listed(narrow);
      expect(names(narrowList)).toEqual(['web']);
      expect(mentionsHidden(narrowList)).toEqual([]);

      const unknown = await t.http.get(`${views}/no_such_view`).set(bearer(narrow)).expect(404);
      expect(errorOf(unknown).code).toBe('view_not_found');
      for (const name of HIDDEN_VIEWS) {
        const res = await t.http.get(`${views}/${name}`).set(bearer(narrow));
        expect([name, res.status, res.body]).toEqual([name, 404, likeUnknown(unknown, 'no_such_view', name)]);
        // Changing a shared view is forbidden to a member; one it cannot see does not exist for it.
        const put = await t.http.put(`${views}/${name}`).set(bearer(narrow)).send({ label: 'x' });
        expect([name, put.status, errorOf(put).code]).toEqual([name, 404, 'view_not_found']);
      }
      expect(bodyOf<ViewResponse>(await t.http.get(`${views}/web`).set(bearer(narrow)).expect(200))).toEqual(VIEWS[0]);
      expect(errorOf(await t.http.put(`${views}/web`).set(bearer(narrow)).send({ label: 'x' }).expect(403)).code).toBe(
        'forbidden',
      );
      // An object the key may not read has no views for it at all.
      expect(errorOf(await t.http.get('/api/v1/objects/store/views').set(bearer(salesOnly)).expect(404)).code).toBe(
        'object_not_found',
      );
    });

    it('refuses a view it may not use wherever one is applied: records, field values, export and the data tools', async () => {
      for (const name of HIDDEN_VIEWS) {
        const res = await records(narrow, name);
        expect([name, res.status, errorOf(res).code]).toEqual([name, 404, 'view_not_found']);
      }
      const web = bodyOf<RecordListResponse>(await records(narrow, 'web').expect(200));
      expect(web.records.map((r) => Object.keys(r).sort())).toEqual(Array(4).fill(['amount', 'channel', 'id']));
      expect(web.records.map((r) => r.amount)).toEqual([109, 106, 103, 100]);

      const values = await t.http
        .get('/api/v1/objects/sale/fields/channel/values')
        .set(bearer(narrow))
        .query({ view: 'best_deals' });
      expect([values.status, errorOf(values).code]).toEqual([404, 'view_not_found']);
      const exported = await t.http
        .get('/api/v1/objects/sale/records/export.csv')
        .set(bearer(narrow))
        .query({ view: 'earnings_columns' });
      expect([exported.status, errorOf(exported).code]).toEqual([404, 'view_not_found']);
      const tool = await exec<ToolErrorContent>('query_records', { objectName: 'sale', view: 'best_deals' }, narrow);
      expect([tool.isError, tool.result.error.code]).toEqual([true, 'view_not_found']);
      // The same views serve a key that sees every field they use.
      expect((await records(member, 'best_deals').expect(200)).body).toMatchObject({ total: 6 });
    });

    it('puts a view in a chat’s context only when the key may use it', async () => {
      const contextOf = async (viewName: string): Promise<{ context: Record<string, unknown> }> => {
        llm.reset();
        llm.enqueue(MockReply.text('ok'));
        await t.http
          .post('/api/v1/ai/agents/data_chat/chat')
          .set(bearer(narrow))
          .send({ messages: [{ role: 'user', content: 'What am I looking at?' }], context: { objectName: 'sale', viewName } })
          .expect(200);
        const sent = sentMessages(llm, 0);
        expect(mentionsHidden(sent.map((m: SentMessage) => m.content))).toEqual([]);
        const message = sent.find((m) => m.role === 'user' && m.content?.includes('```json'))!;
        return JSON.parse(/```json\n(.*)\n```$/s.exec(message.content!)![1]) as { context: Record<string, unknown> };
      };
      const { shared, ...web } = VIEWS[0];
      expect(shared).toBe(true);
      expect(await contextOf('web')).toEqual({ context: { objectName: 'sale', viewName: 'web', view: web } });
      for (const name of HIDDEN_VIEWS) {
        expect(await contextOf(name)).toEqual({ context: { objectName: 'sale', viewName: name } });
      }
    });

    it('keeps a private view to the key that saved it: another key of the same subject gets 404', async () => {
      const mine = { name: 'mine', label: 'Sam’s laptop view', where: { channel: 'web' }, fields: ['channel'] };
      await t.http.post(views).set(bearer(sam1.secret)).send(mine).expect(201);
      expect(bodyOf<ViewResponse>(await t.http.get(`${views}/mine`).set(bearer(sam1.secret)).expect(200)).label).toBe(mine.label);

      const other = bearer(sam2.secret);
      expect(errorOf(await t.http.get(`${views}/mine`).set(other).expect(404)).code).toBe('view_not_found');
      expect(errorOf(await records(sam2.secret, 'mine').expect(404)).code).toBe('view_not_found');
      expect(errorOf(await t.http.put(`${views}/mine`).set(other).send({ label: 'x' }).expect(404)).code).toBe('view_not_found');
      expect(errorOf(await t.http.delete(`${views}/mine`).set(other).expect(404)).code).toBe('view_not_found');
      expect(names(bodyOf<ViewListResponse>(await t.http.get(views).set(other).expect(200)).views)).not.toContain('mine');

      // Each key keeps its own view of that name.
      await t.http
        .post(views)
        .set(other)
        .send({ ...mine, label: 'Sam’s phone view' })
        .expect(201);
      const labels = async (key: string) =>
        bodyOf<ViewListResponse>(await t.http.get(views).set(bearer(key)).expect(200))
          .views.filter((v) => !v.shared)
          .map((v) => [v.name, v.label]);
      expect(await labels(sam1.secret)).toEqual([['mine', 'Sam’s laptop view']]);
      expect(await labels(sam2.secret)).toEqual([['mine', 'Sam’s phone view']]);
    });

    it('a key’s own view naming a field hidden from it since is gone for it, yet it may still delete it', async () => {
      const key = await createApiKey(t, { name: 'later-narrowed', role: 'member', subject: 'lee' });
      await t.http
        .post(views)
        .set(bearer(key.secret))
        .send({ name: 'margins', label: 'Margins', fields: ['channel', 'margin'] })
        .expect(201);
      await t.http
        .patch(`/api/v1/api-keys/${key.id}`)
        .set(asAdmin(t))
        .send({ policies: ['no-margin'] })
        .expect(200);
      expect(errorOf(await t.http.get(`${views}/margins`).set(bearer(key.secret)).expect(404)).code).toBe('view_not_found');
      expect(errorOf(await records(key.secret, 'margins').expect(404)).code).toBe('view_not_found');
      expect(names(bodyOf<ViewListResponse>(await t.http.get(views).set(bearer(key.secret)).expect(200)).views)).toEqual(['web']);
      await t.http.delete(`${views}/margins`).set(bearer(key.secret)).expect(204);
      expect(await t.sql(`select 1 from views where name = 'margins'`)).toEqual([]);
    });
  });

  describe('the migration to key-owned views', () => {
    const views = '/api/v1/objects/sale/views';

    it('gives each private view to its subject’s oldest active key and drops those whose subject no key has', async () => {
      const run = async (step: 'up' | 'down') => {
        const migration = new MigrationViewOwnerKeys(undefined as never, undefined as never);
        migration[step]();
        for (const sql of migration.getQueries()) await t.sql(sql as string);
      };
      const patOld = await createApiKey(t, { name: 'pat-old', role: 'member', subject: 'pat' });
      const patNew = await createApiKey(t, { name: 'pat-new', role: 'member', subject: 'pat' });
      await t.http.delete(`/api/v1/api-keys/${patOld.id}`).set(asAdmin(t)).expect(204);

      await run('down');
      // Back to subject-owned views: both of Sam's keys' "mine" become one subject's view, the older one kept.
      expect(await t.sql(`select owner, label from views where name = 'mine'`)).toEqual([
        { owner: 'sam', label: 'Sam’s laptop view' },
      ]);
      await t.sql(
        `insert into views (id, object, name, owner, label, uses)
         values (gen_random_uuid(), 'sale', 'pats', 'pat', 'Pat''s', '[]'), (gen_random_uuid(), 'sale', 'gone', 'nobody', 'Orphan', '[]')`,
      );
      await run('up');

      const owners = await t.sql<{ name: string; owner_key_id: string | null }>(
        `select name, owner_key_id from views where name in ('mine', 'pats', 'gone', 'web') order by name`,
      );
      expect(owners).toEqual([
        { name: 'mine', owner_key_id: sam1.id },
        { name: 'pats', owner_key_id: patNew.id },
        { name: 'web', owner_key_id: null },
      ]);
      expect((await t.http.get(`${views}/pats`).set(bearer(patNew.secret)).expect(200)).body).toMatchObject({
        shared: false,
      });
      expect((await t.http.get(`${views}/mine`).set(bearer(sam2.secret))).status).toBe(404);
    });
  });
});
