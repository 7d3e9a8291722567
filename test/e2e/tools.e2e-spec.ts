import { EntityManager } from '@mikro-orm/postgresql';
import { CompiledQuery } from 'kysely';
import { DataService } from '../../src/data/data.service';
import { DataPool } from '../../src/database/data-pool';
import { SYSTEM_CALLER } from '../../src/governance/access.service';
import { runSql } from '../../src/database/sql';
import type { AggregateDataResult } from '../../src/tools/data-tools/aggregate-data.tool';
import type { DescribeObjectResult } from '../../src/tools/data-tools/describe-object.tool';
import type { ListObjectsResult } from '../../src/tools/data-tools/list-objects.tool';
import type { QueryRecordsResult } from '../../src/tools/data-tools/query-records.tool';
import { defineTool } from '../../src/tools/tool.define';
import { withReadOnlyData } from '../../src/tools/read-only-data';
import { ToolRegistry } from '../../src/tools/tool.registry';
import type { ToolErrorContent } from '../../src/tools/tool.types';
import type { ExecuteToolResponse, ToolListResponse } from '../../src/tools/tools.dto';
import { match } from '../support/matchers';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { memberSecret } from '../support/fixtures';

const TOOLS = '/api/v1/ai/tools';

/** The body of POST /tools/:name/execute, with the tool's result typed as `R`. */
type Executed<R> = ExecuteToolResponse & { result: R };

/** A tool's error result for an unknown field: the fields it may use (at most 40) and how many more there are. */
type UnknownFieldError = { error: ToolErrorContent['error'] & { details: { availableFields: string[]; moreFields?: number } } };

/** A query_records page cut to fit the output cap (see capContent). */
type TruncatedPage = QueryRecordsResult & { truncated: true; omittedCount: number; note: string };

describe('tools API and the five data tools (seeded CRM)', () => {
  let t: TestApp;
  let memberKey: string;
  let dealCount: number;

  beforeAll(async () => {
    t = await startTestApp({ env: { SEED: 'true' } });
    memberKey = await memberSecret(t, 'analyst', { subject: 'analyst@example.com' });
    dealCount = (await t.sql<{ count: number }>('select count(*)::int as count from data.deal'))[0].count;
    expect(dealCount).toBeGreaterThan(200);
  });
  afterAll(() => t.close());

  /** Executes a tool as the member and returns the response body (always HTTP 200 for a known tool). */
  async function exec<R = unknown>(name: string, args: unknown): Promise<Executed<R>> {
    const res = await t.http.post(`${TOOLS}/${name}/execute`).set(bearer(memberKey)).send({ arguments: args });
    expect(res.status).toBe(200);
    return bodyOf<Executed<R>>(res);
  }

  async function query(args: Record<string, unknown>) {
    const body = await exec('query_records', { objectName: 'deal', fields: ['id'], ...args });
    expect(body.isError).toBe(false);
    return body.result as { count: number; total: number; hasMore: boolean; records: Array<{ id: string }> };
  }

  describe('HTTP surface', () => {
    it('lists the five data tools with their JSON Schemas to a member', async () => {
      const res = await t.http.get(TOOLS).set(bearer(memberKey)).expect(200);
      expect(bodyOf<ToolListResponse>(res).tools.map((tool: { name: string }) => tool.name)).toEqual(
        expect.arrayContaining(['list_objects', 'describe_object', 'query_records', 'get_record', 'aggregate_data']),
      );
      for (const tool of bodyOf<ToolListResponse>(res).tools) {
        expect(Object.keys(tool).sort()).toEqual(['description', 'name', 'parameters']);
        expect(tool.parameters.type).toBe('object');
        expect(tool.description.length).toBeGreaterThan(50);
      }
    });

    it('needs an API key', async () => {
      await t.http.get(TOOLS).expect(401);
      await t.http.post(`${TOOLS}/list_objects/execute`).send({ arguments: {} }).expect(401);
    });

    it('answers an unknown tool with 404 tool_not_found', async () => {
      const res = await t.http.post(`${TOOLS}/drop_database/execute`).set(bearer(memberKey)).send({ arguments: {} }).expect(404);
      expect(res.body).toMatchObject({ code: 'tool_not_found' });
    });

    it('rejects a body whose arguments are not an object, or with extra properties, with 400', async () => {
      for (const body of [{ arguments: 'x' }, { arguments: [1] }, { arguments: 3 }, { arguments: {}, extra: true }]) {
        const res = await t.http.post(`${TOOLS}/list_objects/execute`).set(bearer(memberKey)).send(body);
        expect(res.status).toBe(400);
        expect(errorOf(res).code).toBe('validation_failed');
      }
    });

    it('returns a tool error as 200 with isError and a duration', async () => {
      const body = await exec<ToolErrorContent>('describe_object', {});
      expect(body.isError).toBe(true);
      expect(body.result.error).toMatchObject({ code: 'invalid_arguments', message: match.stringContaining('objectName') });
      expect(typeof body.durationMs).toBe('number');
    });
  });

  describe('each tool', () => {
    it('list_objects returns the seeded objects with field counts', async () => {
      const { result, isError } = await exec<ListObjectsResult>('list_objects', {});
      expect(isError).toBe(false);
      expect(result.totalCount).toBe(4);
      expect(result.objects.map((o: { name: string }) => o.name).sort()).toEqual(['account', 'activity', 'contact', 'deal']);
      expect(result.objects.find((o: { name: string }) => o.name === 'deal')).toMatchObject({ label: 'Deal', fieldCount: 11 });
    });

    it('describe_object returns fields with types, options, references and the system fields', async () => {
      const { result, isError } = await exec<DescribeObjectResult>('describe_object', { objectName: 'deal' });
      expect(isError).toBe(false);
      const byName = Object.fromEntries(result.fields.map((f: { name: string }) => [f.name, f]));
      expect(byName.id).toMatchObject({ type: 'uuid', system: true });
      expect(byName.created_at).toMatchObject({ type: 'datetime', system: true });
      expect(byName.stage).toMatchObject({ type: 'select', required: true, options: match.arrayContaining(['won', 'lost']) });
      expect(byName.account).toMatchObject({ type: 'lookup', reference: 'account' });
      expect(byName.amount).toMatchObject({ type: 'currency', required: false });
    });

    it('describe_object of an unknown object lists the available ones', async () => {
      const { result, isError } = await exec<ToolErrorContent>('describe_object', { objectName: 'invoice' });
      expect(isError).toBe(true);
      expect(result.error).toMatchObject({
        code: 'object_not_found',
        details: { availableObjects: ['account', 'activity', 'contact', 'deal'] },
      });
    });

    it('query_records filters, sorts and projects like the SQL it stands for', async () => {
      const body = await exec<QueryRecordsResult>('query_records', {
        objectName: 'deal',
        where: { stage: 'won', amount: { $gt: 50000 } },
        fields: ['name', 'amount'],
        orderBy: [{ field: 'amount', order: 'desc' }],
        limit: 5,
      });
      expect(body.isError).toBe(false);
      const [{ count }] = await t.sql<{ count: number }>(
        `select count(*)::int as count from data.deal where stage = 'won' and amount > 50000`,
      );
      const top = await t.sql<{ amount: string }>(
        `select amount from data.deal where stage = 'won' and amount > 50000 order by amount desc, id limit 5`,
      );
      expect(body.result.total).toBe(count);
      expect(body.result.records.map((r) => Number(r.amount))).toEqual(top.map((r) => Number(r.amount)));
      expect(Object.keys(body.result.records[0]).sort()).toEqual(['amount', 'id', 'name']);
    });

    it('get_record returns one record, and "not found" for a missing or malformed id', async () => {
      const [row] = await t.sql<{ id: string; name: string }>('select id, name from data.deal order by id limit 1');
      const found = await exec('get_record', { objectName: 'deal', recordId: row.id, fields: ['name'] });
      expect(found).toMatchObject({ isError: false, result: { id: row.id, name: row.name } });

      for (const recordId of ['not-a-uuid', "1' or '1'='1", '00000000-0000-0000-0000-000000000000']) {
        const missing = await exec<ToolErrorContent>('get_record', { objectName: 'deal', recordId });
        expect(missing.isError).toBe(true);
        expect(missing.result.error.code).toBe('record_not_found');
      }
    });

    it('aggregate_data gives a top-N by alias', async () => {
      const { result, isError } = await exec<AggregateDataResult>('aggregate_data', {
        objectName: 'deal',
        where: { stage: 'won' },
        groupBy: ['owner'],
        aggregations: [
          { function: 'sum', field: 'amount', alias: 'revenue' },
          { function: 'count', alias: 'deals' },
        ],
        orderBy: [{ field: 'revenue', order: 'desc' }],
        limit: 3,
      });
      expect(isError).toBe(false);
      const expected = await t.sql<{ owner: string; revenue: string; deals: string }>(
        `select owner, sum(amount) as revenue, count(*) as deals from data.deal where stage = 'won'
          group by owner order by revenue desc nulls last, owner limit 3`,
      );
      expect(result.count).toBe(3);
      expect(result.rows).toEqual(expected.map((r) => ({ owner: r.owner, revenue: Number(r.revenue), deals: Number(r.deals) })));
    });

    it('aggregate_data defaults to 50 groups and caps at 200', async () => {
      const base = { objectName: 'deal', groupBy: ['name'], aggregations: [{ function: 'count', alias: 'n' }] };
      expect((await exec<AggregateDataResult>('aggregate_data', base)).result.count).toBe(50);
      const capped = await exec<AggregateDataResult>('aggregate_data', { ...base, limit: 5000 });
      expect(capped.result.count).toBeLessThanOrEqual(200);
      expect(capped.result.note).toMatch(/first 200 groups/);
    });

    it('aggregate_data refuses sum on a text field', async () => {
      const { result, isError } = await exec<ToolErrorContent>('aggregate_data', {
        objectName: 'deal',
        aggregations: [{ function: 'sum', field: 'owner', alias: 's' }],
      });
      expect(isError).toBe(true);
      expect(result.error).toMatchObject({ code: 'invalid_aggregation', message: match.stringContaining('numeric') });
    });

    it('aggregate_data refuses more than 3 group-by fields', async () => {
      const { result, isError } = await exec<ToolErrorContent>('aggregate_data', {
        objectName: 'deal',
        groupBy: ['owner', 'stage', 'deal_type', 'lead_source'],
        aggregations: [{ function: 'count', alias: 'n' }],
      });
      expect(isError).toBe(true);
      expect(result.error.message).toContain('groupBy');
    });

    it('aggregate_data rejects "drop_table" before any SQL, naming it, and the table is intact', async () => {
      const { result, isError } = await exec<ToolErrorContent>('aggregate_data', {
        objectName: 'deal',
        aggregations: [{ function: 'drop_table', field: 'amount', alias: 'x' }],
      });
      expect(isError).toBe(true);
      // invalid_arguments comes from schema validation, which runs before the tool and so before any SQL.
      expect(result.error.code).toBe('invalid_arguments');
      expect(result.error.message).toContain('"drop_table"');
      const [{ count }] = await t.sql<{ count: number }>('select count(*)::int as count from data.deal');
      expect(count).toBe(dealCount);
    });
  });

  describe('query_records limit and offset clamps against the seeded deal table', () => {
    it.each([
      ['omitted', 20, undefined],
      ['0', 20, 0],
      ['-5', 20, -5],
      ['"abc"', 20, 'abc'],
      ['"NaN"', 20, 'NaN'],
      ['null', 20, null],
      ['7.9', 7, 7.9],
      ['"12"', 12, '12'],
      ['500', 200, 500],
    ])('limit %s → %i records', async (_label, expected, limit) => {
      const result = await query(limit === undefined ? {} : { limit });
      expect(result.count).toBe(expected);
      expect(result.records).toHaveLength(expected);
      expect(result.total).toBe(dealCount);
      expect(result.hasMore).toBe(true);
    });

    it.each([
      ['-3', -3],
      ['"x"', 'x'],
      ['omitted', undefined],
    ])('offset %s → 0', async (_label, offset) => {
      const first = await query({ limit: 3, orderBy: [{ field: 'id' }] });
      const result = await query({ limit: 3, orderBy: [{ field: 'id' }], ...(offset === undefined ? {} : { offset }) });
      expect(result.records).toEqual(first.records);
    });

    it('caps a full page at 16 KB of JSON, keeping it valid and telling the model to narrow the query', async () => {
      const res = await t.http
        .post(`${TOOLS}/query_records/execute`)
        .set(bearer(memberKey))
        .send({ arguments: { objectName: 'deal', limit: 200 } });
      expect(res.status).toBe(200);
      const { result, isError } = bodyOf<Executed<TruncatedPage>>(res);
      expect(isError).toBe(false);
      expect(Buffer.byteLength(JSON.stringify(result))).toBeLessThanOrEqual(16 * 1024);
      expect(result).toMatchObject({ truncated: true, total: dealCount, hasMore: true });
      expect(result.count).toBe(result.records.length);
      expect(result.count + result.omittedCount).toBe(200);
      expect(result.note).toMatch(/Narrow the query/);
    });

    it('pages with offset, and hasMore/total agree with a SQL count', async () => {
      const where = { stage: 'lost' };
      const [{ count }] = await t.sql<{ count: number }>(`select count(*)::int as count from data.deal where stage = 'lost'`);
      const ids = await t.sql<{ id: string }>(`select id from data.deal where stage = 'lost' order by id`);
      const middle = await query({ where, orderBy: [{ field: 'id' }], limit: 10, offset: 10 });
      expect(middle).toMatchObject({ count: 10, total: count, hasMore: true });
      expect(middle.records.map((r) => r.id)).toEqual(ids.slice(10, 20).map((r) => r.id));

      const last = await query({ where, orderBy: [{ field: 'id' }], limit: 10, offset: count - 4 });
      expect(last).toMatchObject({ count: 4, total: count, hasMore: false });

      const past = await query({ where, limit: 10, offset: count + 100 });
      expect(past).toMatchObject({ count: 0, total: count, hasMore: false, records: [] });
    });
  });

  describe('unknown fields', () => {
    it.each([
      ['where', { where: { stagee: 'won' } }],
      ['fields', { fields: ['name', 'amountt'] }],
      ['orderBy', { orderBy: [{ field: 'closing', order: 'asc' }] }],
    ])('in %s → error result listing available fields', async (_label, args) => {
      const { result, isError } = await exec<UnknownFieldError>('query_records', { objectName: 'deal', ...args });
      expect(isError).toBe(true);
      expect(result.error.code).toBe('unknown_field');
      expect(result.error.details.availableFields).toEqual(expect.arrayContaining(['id', 'stage', 'amount', 'close_date']));
      expect(result.error.details.availableFields.length).toBeLessThanOrEqual(40);
      expect(result.error.message).toContain('describe_object');
    });

    it('lists at most 40 fields for a wide object', async () => {
      const fields = Array.from({ length: 45 }, (_, i) => ({ name: `f_${i}`, label: `F ${i}`, type: 'text' }));
      await t.http.post('/api/v1/objects').set(bearer(t.adminKey)).send({ name: 'wide', label: 'Wide', fields }).expect(201);
      const { result, isError } = await exec<UnknownFieldError>('query_records', { objectName: 'wide', where: { nope: 1 } });
      expect(isError).toBe(true);
      expect(result.error.details.availableFields).toHaveLength(40);
      expect(result.error.details.moreFields).toBe(48 - 40);
    });
  });

  describe('read-only transactions', () => {
    let registry: ToolRegistry;
    let em: EntityManager;
    let pool: DataPool;
    let data: DataService;
    let randomAccount: string;

    beforeAll(async () => {
      [{ id: randomAccount }] = await t.sql<{ id: string }>('select id from data.account limit 1');
      registry = t.app.get(ToolRegistry);
      em = t.app.get(EntityManager);
      pool = t.app.get(DataPool);
      data = t.app.get(DataService);
      // Platform tools: hidden from listings, callable by name, so they run through the same HTTP path and middleware.
      registry.register(
        defineTool({
          name: 'test_insert_attempt',
          description: 'Test only: tries to write inside a read-only transaction.',
          parameters: { type: 'object', properties: {}, additionalProperties: false },
          scope: 'platform',
          execute: (_args, ctx) =>
            withReadOnlyData(pool, { signal: ctx.signal }, (session) =>
              data.insert(SYSTEM_CALLER, 'deal', { name: 'Injected', account: randomAccount, stage: 'won' }, { session }),
            ),
        }),
      );
      registry.register(
        defineTool({
          name: 'test_update_attempt',
          description: 'Test only: tries a raw UPDATE inside a read-only transaction.',
          parameters: { type: 'object', properties: {}, additionalProperties: false },
          scope: 'platform',
          execute: (_args, ctx) =>
            withReadOnlyData(pool, { signal: ctx.signal }, (tx) =>
              tx.query(CompiledQuery.raw(`update data.deal set amount = 0`)),
            ),
        }),
      );
      registry.register(
        defineTool({
          name: 'test_slow_query',
          description: 'Test only: sleeps longer than its statement timeout.',
          parameters: { type: 'object', properties: {}, additionalProperties: false },
          scope: 'platform',
          execute: (_args, ctx) =>
            pool.transaction(
              async (tx) => {
                // Shorter than QUERY_TIMEOUT_MS for this test only; local to the transaction.
                await tx.query(CompiledQuery.raw(`select set_config('statement_timeout', '100', true)`));
                return tx.query(CompiledQuery.raw('select pg_sleep(2)'));
              },
              { signal: ctx.signal },
            ),
        }),
      );
    });

    it('keeps platform tools out of the listing', async () => {
      const res = await t.http.get(TOOLS).set(bearer(memberKey)).expect(200);
      expect(bodyOf<ToolListResponse>(res).tools.map((tool: { name: string }) => tool.name)).not.toContain('test_insert_attempt');
    });

    it.each([['test_insert_attempt'], ['test_update_attempt']])(
      '%s fails with the read-only error and changes nothing',
      async (name) => {
        const before = await t.sql<{ count: number; amount: string }>(
          'select count(*)::int as count, sum(amount)::text as amount from data.deal',
        );
        const { result, isError } = await exec<ToolErrorContent>(name, {});
        expect(isError).toBe(true);
        expect(result.error.code).toBe('read_only_transaction');
        expect(await t.sql('select count(*)::int as count, sum(amount)::text as amount from data.deal')).toEqual(before);
      },
    );

    it('surfaces the raw Postgres error as 25006 inside the transaction', async () => {
      await expect(
        em.fork().transactional(async (tx) => {
          await runSql(tx, 'SET TRANSACTION READ ONLY');
          await runSql(tx, `update data.deal set amount = 0`);
        }),
      ).rejects.toMatchObject({ code: '25006' });
    });

    it('cancels a statement past its statement_timeout with query_timeout', async () => {
      const started = Date.now();
      const { result, isError } = await exec<ToolErrorContent>('test_slow_query', {});
      expect(Date.now() - started).toBeLessThan(1900);
      expect(isError).toBe(true);
      expect(result.error).toMatchObject({ code: 'query_timeout', message: match.stringMatching(/narrow|less|filters/i) });
    });

    it('leaves pooled sessions without a statement timeout: it was local to the transaction', async () => {
      const [{ statement_timeout }] = await runSql<{ statement_timeout: string }>(em.fork(), 'show statement_timeout');
      expect(statement_timeout).toBe('0');
      expect((await query({ limit: 1 })).count).toBe(1);
    });
  });
});
