import { decodeCursor, querySignature } from '../../src/data/keyset';
import { orderTerms } from '../../src/data/order-by.compiler';
import { compileFind } from '../../src/data/records.compiler';
import type { RecordListResponse } from '../../src/records/records.dto';
import type { ObjectResponse } from '../../src/metadata/metadata.dto';
import { type FieldMeta, SYSTEM_FIELDS, type ObjectMeta } from '../../src/metadata/object-metadata.types';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey, createObject, fieldSpec } from '../support/fixtures';

describe('keyset paging: GET /records?cursor=', () => {
  let t: TestApp;
  let member: string;
  const ROWS = 10_000;

  const page = (query: Record<string, string | number>) =>
    t.http.get('/api/v1/objects/row/records').set(bearer(member)).query(query);

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'row', [fieldSpec('n', 'integer'), fieldSpec('score', 'number'), fieldSpec('seen', 'datetime')]);
    member = (await createApiKey(t, { name: 'grid', role: 'member' })).secret;
    // Many ties and nulls in score, so that the id tiebreaker and nulls-last both matter.
    for (let from = 0; from < ROWS; from += 1000) {
      const operations = Array.from({ length: 1000 }, (_, i) => ({
        op: 'create',
        record: {
          n: from + i,
          score: (from + i) % 7 === 0 ? null : ((from + i) * 37) % 50,
          seen: new Date(1_700_000_000_000 + (from + i) * 1_001).toISOString(),
        },
      }));
      await t.http.post('/api/v1/objects/row/records/batch').set(bearer(member)).send({ operations }).expect(200);
    }
  });
  afterAll(() => t.close());

  async function walk(orderBy: unknown, where?: unknown, onPage?: (pageNo: number) => Promise<void>): Promise<string[]> {
    const ids: string[] = [];
    const base = { orderBy: JSON.stringify(orderBy), limit: 700, ...(where ? { where: JSON.stringify(where) } : {}) };
    let cursor: string | null | undefined;
    for (let pageNo = 0; ; pageNo++) {
      const res = await page(cursor ? { ...base, cursor } : base).expect(200);
      const body = bodyOf<RecordListResponse>(res);
      if (cursor) expect(body.total).toBeUndefined();
      else expect(body.total).toBeGreaterThan(0);
      ids.push(...body.records.map((r) => String(r.id)));
      await onPage?.(pageNo);
      cursor = body.nextCursor;
      if (!cursor) break;
    }
    return ids;
  }

  it.each([
    ['score descending, nulls last', [{ field: 'score', order: 'desc' }]],
    ['score ascending then n descending', [{ field: 'score' }, { field: 'n', order: 'desc' }]],
    ['a datetime with microseconds', [{ field: 'seen', order: 'desc' }]],
    ['id (the default)', []],
    ['id descending', [{ field: 'id', order: 'desc' }]],
    ['created_at descending (never empty; a batch shares one)', [{ field: 'created_at', order: 'desc' }]],
  ])('pages 10,000 rows by %s while rows are inserted, skipping and repeating none', async (_, orderBy) => {
    const before = await t.sql<{ id: string }>('select id from data.row');
    let inserted = 0;
    const ids = await walk(orderBy, undefined, async () => {
      // Rows that sort before, after and among the ones already read.
      for (const score of [-1, 25, 1000, null]) {
        await t.http.post('/api/v1/objects/row/records').set(bearer(member)).send({ n: -1, score }).expect(201);
        inserted++;
      }
    });
    expect(new Set(ids).size).toBe(ids.length);
    const seen = new Set(ids);
    expect(before.filter((r) => !seen.has(r.id))).toEqual([]);
    expect(inserted).toBeGreaterThan(40);
    await t.sql('delete from data.row where n = -1');
  });

  it.each([
    [[{ field: 'score', order: 'desc' }], 'score desc nulls last, id asc'],
    [[{ field: 'score' }, { field: 'n', order: 'desc' }], 'score asc nulls last, n desc nulls last, id asc'],
    [[{ field: 'created_at', order: 'desc' }, { field: 'score' }], 'created_at desc, score asc nulls last, id asc'],
    [[{ field: 'id', order: 'desc' }], 'id desc'],
  ])('gives the pages SQL gives for a filter and order %j, in order', async (orderBy, sqlOrder) => {
    const ids = await walk(orderBy, { n: { $lt: 5000 } });
    const expected = await t.sql<{ id: string }>(`select id from data.row where n < 5000 order by ${sqlOrder}`);
    expect(ids).toEqual(expected.map((r) => r.id));
  });

  it('ends with nextCursor null on the last page, and a first page gives one too', async () => {
    const first = bodyOf<RecordListResponse>(await page({ limit: 3 }).expect(200));
    expect(first.records).toHaveLength(3);
    expect(typeof first.nextCursor).toBe('string');
    const all = bodyOf<RecordListResponse>(await page({ limit: 5, where: JSON.stringify({ n: { $lt: 5 } }) }).expect(200));
    expect(all.records).toHaveLength(5);
    expect(all.nextCursor).toBeNull();
  });

  it('refuses a cursor of another query, a forged one, and a cursor with an offset (400 invalid_cursor)', async () => {
    const { nextCursor } = bodyOf<RecordListResponse>(await page({ limit: 3, orderBy: '[{"field":"n"}]' }).expect(200));
    const otherOrder = await page({ limit: 3, orderBy: '[{"field":"score"}]', cursor: nextCursor! }).expect(400);
    expect(errorOf(otherOrder).code).toBe('invalid_cursor');
    const otherWhere = await page({ limit: 3, orderBy: '[{"field":"n"}]', where: '{"n":1}', cursor: nextCursor! }).expect(400);
    expect(errorOf(otherWhere).code).toBe('invalid_cursor');
    for (const forged of ['abc', Buffer.from('{"v":1,"q":"x","k":[1]}').toString('base64url'), 'x'.repeat(9000)]) {
      expect((await page({ cursor: forged })).status).toBe(400);
    }
    const withOffset = await page({ limit: 3, orderBy: '[{"field":"n"}]', cursor: nextCursor!, offset: 3 }).expect(400);
    expect(errorOf(withOffset).code).toBe('invalid_cursor');
  });

  describe('deep in a large object', () => {
    const DEEP_ROWS = 30_000;
    const DEPTH = 20_000;

    interface PlanNode {
      'Node Type': string;
      'Relation Name'?: string;
      'Actual Rows': number;
      'Actual Loops': number;
      'Rows Removed by Filter'?: number;
      Plans?: PlanNode[];
    }

    beforeAll(async () => {
      await createObject(t, 'deep', [
        fieldSpec('rank', 'integer', { indexed: true }),
        fieldSpec('day', 'date', { indexed: true }),
      ]);
      // Every 20th rank empty, each about 4 times; each day about 100 times.
      await t.sql(
        `insert into data.deep (rank, day)
         select case when g % 20 = 0 then null else (g * 7919) % 7000 end, date '2026-01-01' + g % 300
         from generate_series(1, ${DEEP_ROWS}) g`,
      );
      await t.sql('analyze data.deep');
    });

    /** The cursor after the first `depth` records in this order, by following nextCursor with pages of 1,000. */
    async function cursorAt(orderBy: unknown, depth: number): Promise<string> {
      let cursor: string | undefined;
      for (let read = 0; read < depth; read += 1000) {
        const res = await t.http
          .get('/api/v1/objects/deep/records')
          .set(bearer(member))
          .query({ orderBy: JSON.stringify(orderBy), fields: 'id', limit: 1000, ...(cursor ? { cursor } : {}) })
          .expect(200);
        cursor = bodyOf<RecordListResponse>(res).nextCursor!;
      }
      return cursor!;
    }

    /** The object as the data engine sees it. */
    async function deepObject(): Promise<ObjectMeta> {
      const described = bodyOf<ObjectResponse>(await t.http.get('/api/v1/objects/deep').set(bearer(t.adminKey)).expect(200));
      return { name: 'deep', label: 'Deep', fields: [...SYSTEM_FIELDS, ...(described.fields as FieldMeta[])] };
    }

    /** EXPLAIN ANALYZE of a statement in the app's database: its nodes, and the scans of the table itself. */
    async function explainScans(compiled: { sql: string; parameters: readonly unknown[] }) {
      const [{ 'QUERY PLAN': explained }] = await t.sql<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
        `explain (analyze, format json) ${compiled.sql}`,
        [...compiled.parameters],
      );
      const nodes: PlanNode[] = [];
      const visit = (node: PlanNode) => {
        nodes.push(node);
        node.Plans?.forEach(visit);
      };
      visit(explained[0].Plan);
      // Scans of the table itself (not of a part's result).
      const scans = nodes.filter((node) => node['Relation Name'] === 'deep');
      const rowsRead = scans.reduce(
        (sum, s) => sum + (s['Actual Rows'] + (s['Rows Removed by Filter'] ?? 0)) * s['Actual Loops'],
        0,
      );
      return { nodeTypes: nodes.map((n) => n['Node Type']), scanTypes: scans.map((s) => s['Node Type']), rowsRead };
    }

    it.each([
      ['rank descending (empty values last)', [{ field: 'rank', order: 'desc' }], 'rank desc nulls last, id'],
      ['rank ascending', [{ field: 'rank' }], 'rank, id'],
      ['day descending', [{ field: 'day', order: 'desc' }], 'day desc nulls last, id'],
      ['id descending', [{ field: 'id', order: 'desc' }], 'id desc'],
    ])(
      'serves the first page by %s without a filter from an index, reading under 200 rows and counting none',
      async (_, orderBy, sqlOrder) => {
        const res = await t.http
          .get('/api/v1/objects/deep/records')
          .set(bearer(member))
          .query({ orderBy: JSON.stringify(orderBy), limit: 50 })
          .expect(200);
        const page = bodyOf<RecordListResponse>(res);
        const expected = await t.sql<{ id: string }>(`select id from data.deep order by ${sqlOrder} limit 50`);
        expect(page.records.map((r) => r.id)).toEqual(expected.map((r) => r.id));
        // Above the default cap of 10,000: the planner's estimate, not a count of the 30,000 rows.
        expect(page.totalExact).toBe(false);
        expect(page.total).toBeGreaterThan(10_000);

        // The statement the app runs for that page, as its compiler writes it, explained in its database.
        const object = await deepObject();
        const terms = orderTerms(object, orderBy);
        const plan = await explainScans(compileFind(object, { orderBy, limit: 50, offset: 0 }, { terms, keys: true }));
        expect(plan.scanTypes.length).toBeGreaterThan(0);
        expect(plan.scanTypes.every((type) => /^Index (Only )?Scan$/.test(type))).toBe(true);
        expect(plan.nodeTypes).not.toContain('WindowAgg');
        // Two parts at most (the values, the empty ones) of 51 rows, and the rest of a tie.
        expect(plan.rowsRead).toBeLessThan(200);
      },
    );

    it.each([
      ['rank descending', [{ field: 'rank', order: 'desc' }]],
      ['rank ascending', [{ field: 'rank' }]],
      ['day descending', [{ field: 'day', order: 'desc' }]],
      ['id descending', [{ field: 'id', order: 'desc' }]],
    ])(
      'pages by %s 20,000 rows deep reading about a page per part from an index, none of the rows before',
      async (_, orderBy) => {
        const cursor = await cursorAt(orderBy, DEPTH);
        const page = (query: Record<string, string | number>) =>
          t.http
            .get('/api/v1/objects/deep/records')
            .set(bearer(member))
            .query({ orderBy: JSON.stringify(orderBy), limit: 50, ...query })
            .expect(200);
        const afterCursor = bodyOf<RecordListResponse>(await page({ cursor }));
        const atOffset = bodyOf<RecordListResponse>(await page({ offset: DEPTH }));
        expect(afterCursor.records).toHaveLength(50);
        expect(afterCursor.records).toEqual(atOffset.records);

        // The statement the app runs for that page, as its compiler writes it, explained in its database.
        const object = await deepObject();
        const terms = orderTerms(object, orderBy);
        const after = decodeCursor(cursor, querySignature('deep', undefined, terms), terms.length);
        const plan = await explainScans(compileFind(object, { orderBy, limit: 50, offset: 0 }, { terms, after, keys: true }));
        expect(plan.scanTypes).not.toContain('Seq Scan');
        // Three parts at most (ties of the last row, the values beyond it, the empty ones) of 51 rows, and the rest of a tie.
        expect(plan.rowsRead).toBeLessThan(200);
      },
    );
  });
});
