import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { RecordListResponse } from '../../src/data/records.dto';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';

describe('keyset paging: GET /records?cursor=', () => {
  let t: TestApp;
  let member: string;
  const ROWS = 10_000;

  const page = (query: Record<string, string | number>) =>
    t.http.get('/api/v1/objects/row/records').set(bearer(member)).query(query);

  beforeAll(async () => {
    t = await startTestApp();
    await t.http
      .post('/api/v1/objects')
      .set(bearer(t.adminKey))
      .send({
        name: 'row',
        label: 'Row',
        fields: [
          { name: 'n', label: 'N', type: 'integer' },
          { name: 'score', label: 'Score', type: 'number' },
          { name: 'seen', label: 'Seen', type: 'datetime' },
        ],
      })
      .expect(201);
    const key = await t.http.post('/api/v1/api-keys').set(bearer(t.adminKey)).send({ name: 'grid', role: 'member' }).expect(201);
    member = bodyOf<CreatedApiKeyResponse>(key).secret;
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

  it('gives the pages SQL gives for a filter and order, in order', async () => {
    const ids = await walk([{ field: 'score', order: 'desc' }], { n: { $lt: 5000 } });
    const expected = await t.sql<{ id: string }>('select id from data.row where n < 5000 order by score desc nulls last, id asc');
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
});
