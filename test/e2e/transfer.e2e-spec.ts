import { parse } from 'csv-parse/sync';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import type { Response } from 'supertest';
import type { ImportStartedResponse, JobResponse } from '../../src/transfer/transfer.dto';
import { eventually, listen } from '../support/chat-helpers';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey, finishedJob } from '../support/fixtures';

const FIELDS = [
  { name: 'sku', label: 'SKU', type: 'text', required: true, unique: true },
  { name: 'qty', label: 'Quantity', type: 'integer' },
  { name: 'price', label: 'Price', type: 'number' },
  { name: 'active', label: 'Active', type: 'boolean' },
  { name: 'tags', label: 'Tags', type: 'multiselect', options: ['red', 'green', 'blue'] },
  { name: 'due', label: 'Due date', type: 'date' },
  { name: 'meta', label: 'Meta', type: 'json' },
  { name: 'notes', label: 'Notes', type: 'textarea' },
  { name: 'owner', label: 'Owner', type: 'text' },
];

/** Collects a whole text response (CSV, or an event stream that ends). */
const asText = (res: Response, done: (error: Error | null, body: string) => void) => {
  // supertest hands the raw response stream to a parser.
  const stream = res as unknown as NodeJS.ReadableStream;
  let text = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => (text += chunk));
  stream.on('end', () => done(null, text));
};

describe('CSV in and out: imports as jobs, streamed exports', () => {
  let t: TestApp;
  let baseUrl: string;
  let member: string;
  let other: string;

  const count = async (table = 'data.item') => Number((await t.sql<{ n: string }>(`select count(*) as n from ${table}`))[0].n);
  const startImport = (csv: string, query = '', key = member, object = 'item') =>
    t.http.post(`/api/v1/objects/${object}/import${query}`).set(bearer(key)).set('content-type', 'text/csv').send(csv);
  const jobOf = async (res: Response, key = member): Promise<JobResponse> => {
    expect(res.status).toBe(202);
    return finishedJob(t, bodyOf<ImportStartedResponse>(res).jobId, key);
  };
  const exportCsv = (query: string, key = member, object = 'item') =>
    t.http.get(`/api/v1/objects/${object}/records/export.csv${query}`).set(bearer(key)).buffer(true).parse(asText);
  const rowsOf = (csv: string): string[][] => parse(csv, { bom: true });

  /** `n` good rows of the item header; `bad` replaces some, by data row index. */
  const itemCsv = (n: number, bad: Record<number, string> = {}) => {
    const lines = ['sku,qty,price,active,tags,due'];
    for (let i = 0; i < n; i++)
      lines.push(bad[i] ?? `sku-${i},${i},${i}.5,${i % 2 === 0},red;blue,2026-01-${String((i % 28) + 1).padStart(2, '0')}`);
    return lines.join('\n') + '\n';
  };

  /**
   * An import whose CSV body goes up a part at a time: its job runs while the upload goes on. Resolves
   * with the job's id once the 202 came, and the request to write more of the body on.
   */
  const uploadImport = async (
    query: string,
    firstPart: string,
    key = member,
    base = baseUrl,
  ): Promise<{ jobId: string; upload: ClientRequest }> => {
    const upload = httpRequest(`${base}/api/v1/objects/item/import${query}`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'text/csv', 'transfer-encoding': 'chunked' },
    });
    // A cancelled job refuses the rest of its upload.
    upload.on('error', () => undefined);
    const answered = new Promise<IncomingMessage>((resolve) => upload.on('response', resolve));
    upload.write(firstPart);
    const response = await answered;
    let text = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => (text += chunk));
    await new Promise((resolve) => response.on('end', resolve));
    expect(response.statusCode).toBe(202);
    return { jobId: (JSON.parse(text) as ImportStartedResponse).jobId, upload };
  };
  const readJob = async (id: string, key = member) =>
    bodyOf<JobResponse>(await t.http.get(`/api/v1/jobs/${id}`).set(bearer(key)).expect(200));
  const untilEnded = async (id: string): Promise<JobResponse> => {
    let job = await readJob(id);
    await eventually(async () => (job = await readJob(id)).status !== 'running', 20_000);
    return job;
  };

  beforeAll(async () => {
    t = await startTestApp();
    baseUrl = await listen(t);
    for (const name of ['item', 'copy']) {
      await t.http.post('/api/v1/objects').set(bearer(t.adminKey)).send({ name, label: name, fields: FIELDS }).expect(201);
    }
    member = (await createApiKey(t, { name: 'grid', role: 'member' })).secret;
    other = (await createApiKey(t, { name: 'other', role: 'member' })).secret;
  });
  afterAll(() => t.close());
  beforeEach(async () => {
    await t.sql('delete from data.item');
    await t.sql('delete from data.copy');
  });

  describe('import', () => {
    it('reports exactly the 3 bad rows of 5,000 (row, field, code) and writes nothing', async () => {
      const csv = itemCsv(5000, {
        100: 'sku-100,many,1,true,red,2026-01-01',
        2500: 'sku-2500,1,1,maybe,red,2026-01-01',
        4999: ',1,1,true,red,2026-01-01',
      });
      const job = await jobOf(await startImport(csv));
      expect(job).toMatchObject({ status: 'done', rowsRead: 5000, rowsWritten: 0, rowsRejected: 3, atomic: true, dryRun: false });
      expect(job.errors).toEqual([
        expect.objectContaining({ row: 102, field: 'qty', code: 'invalid_value' }),
        expect.objectContaining({ row: 2502, field: 'active', code: 'invalid_value' }),
        expect.objectContaining({ row: 5001, field: 'sku', code: 'missing_required_field' }),
      ]);
      expect(await count()).toBe(0);
    });

    it('with atomic=false writes the 4,997 good rows and rejects the bad ones', async () => {
      const csv = itemCsv(5000, {
        10: 'sku-10,x,1,true,red,2026-01-01',
        20: 'sku-20,1,1,true,purple,2026-01-01',
        30: 'sku-31,1,1,true,red,2026-01-01',
      });
      const job = await jobOf(await startImport(csv, '?atomic=false'));
      expect(job).toMatchObject({ status: 'done', rowsRead: 5000, rowsWritten: 4997, rowsRejected: 3 });
      expect(job.errors.map((e) => [e.row, e.field, e.code])).toEqual([
        [12, 'qty', 'invalid_value'],
        [22, 'tags', 'invalid_value'],
        [33, 'sku', 'unique_violation'],
      ]);
      expect(await count()).toBe(4997);
      const [row] = await t.sql<{ qty: string; price: string; active: boolean; tags: string[]; due: Date }>(
        `select qty, price, active, tags, to_char(due, 'YYYY-MM-DD') as due from data.item where sku = 'sku-4'`,
      );
      expect(row).toEqual({ qty: '4', price: 4.5, active: true, tags: ['red', 'blue'], due: '2026-01-05' });
    });

    it('with dryRun=true checks every row and writes nothing, even when all are good', async () => {
      const good = await jobOf(await startImport(itemCsv(1500), '?dryRun=true'));
      expect(good).toMatchObject({ status: 'done', dryRun: true, rowsRead: 1500, rowsWritten: 0, rowsRejected: 0, errors: [] });
      const bad = await jobOf(
        await startImport(itemCsv(10, { 3: 'sku-3,1,abc,true,red,2026-01-01' }), '?dryRun=true&atomic=false'),
      );
      expect(bad).toMatchObject({
        rowsWritten: 0,
        rowsRejected: 1,
        errors: [expect.objectContaining({ row: 5, field: 'price' })],
      });
      expect(await count()).toBe(0);
    });

    it('maps headers by label, ignoring case, and by an explicit mapping (unmapped columns skipped)', async () => {
      const byLabel = await jobOf(await startImport('sku,QUANTITY,due date\nA-1,7,2026-03-04\n'));
      expect(byLabel).toMatchObject({ status: 'done', rowsWritten: 1, rowsRejected: 0 });
      const mapping = encodeURIComponent(JSON.stringify({ Code: 'sku', Count: 'qty' }));
      const mapped = await jobOf(await startImport('Code,Count,Ignored\nB-1,9,whatever\n', `?mapping=${mapping}`));
      expect(mapped).toMatchObject({ status: 'done', rowsWritten: 1 });
      const rows = await t.sql<{ sku: string; qty: string; due: string | null }>(
        `select sku, qty, to_char(due, 'YYYY-MM-DD') as due from data.item order by sku`,
      );
      expect(rows).toEqual([
        { sku: 'A-1', qty: '7', due: '2026-03-04' },
        { sku: 'B-1', qty: '9', due: null },
      ]);
    });

    it('refuses unknown columns with 400 before reading any row', async () => {
      const jobsBefore = await count('public.jobs');
      const res = await startImport('sku,colour,size\nA,red,1\n').expect(400);
      expect(errorOf<{ columns: string[] }>(res)).toMatchObject({
        code: 'unknown_column',
        details: { columns: ['colour', 'size'] },
      });
      expect(await count()).toBe(0);
      expect(await count('public.jobs')).toBe(jobsBefore);
    });

    it('streams progress over SSE until done, and serves the rejected rows as CSV', async () => {
      const res = await startImport(itemCsv(3000, { 2999: 'sku-2999,1,1,true,red,not-a-date' }), '?atomic=false');
      const { jobId } = bodyOf<ImportStartedResponse>(res);
      const stream = await t.http.get(`/api/v1/jobs/${jobId}/stream`).set(bearer(member)).buffer(true).parse(asText).expect(200);
      expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
      const events = String(stream.body)
        .split('\n\n')
        .filter((frame) => frame.startsWith('event:'))
        .map((frame) => ({
          event: /^event: (\w+)/.exec(frame)![1],
          data: JSON.parse(/\ndata: (.*)/.exec(frame)![1]) as JobResponse,
        }));
      expect(events.length).toBeGreaterThanOrEqual(2);
      expect(events.slice(0, -1).every((e) => e.event === 'progress')).toBe(true);
      const done = events[events.length - 1];
      expect(done.event).toBe('done');
      expect(done.data).toMatchObject({ id: jobId, status: 'done', rowsRead: 3000, rowsWritten: 2999, rowsRejected: 1 });
      const reads = events.filter((e) => e.event === 'progress').map((e) => e.data.rowsRead);
      expect(reads).toEqual([...reads].sort((a, b) => a - b));

      const errors = await t.http
        .get(`/api/v1/jobs/${jobId}/errors.csv`)
        .set(bearer(member))
        .buffer(true)
        .parse(asText)
        .expect(200);
      expect(errors.headers['content-type']).toMatch(/^text\/csv/);
      const rows = rowsOf(String(errors.body));
      expect(rows[0]).toEqual(['row', 'field', 'code', 'error']);
      expect(rows.slice(1).map((r) => r.slice(0, 3))).toEqual([['3001', 'due', 'invalid_value']]);
    });

    it("answers 404 for another key's job; an admin reads every job", async () => {
      const job = await jobOf(await startImport('sku\nX\n'));
      for (const path of ['', '/stream', '/errors.csv']) {
        const res = await t.http.get(`/api/v1/jobs/${job.id}${path}`).set(bearer(other)).expect(404);
        expect(errorOf(res).code).toBe('job_not_found');
      }
      await t.http.get('/api/v1/jobs/not-a-uuid').set(bearer(member)).expect(404);
      const asAdmin = bodyOf<JobResponse>(await t.http.get(`/api/v1/jobs/${job.id}`).set(bearer(t.adminKey)).expect(200));
      expect(asAdmin.rowsWritten).toBe(1);
    });

    it("fails an upload that stalls (IMPORT_STALL_TIMEOUT_MS) with upload_stalled, rolled back whole, while another key's writes to the object go on", async () => {
      const b = await startTestApp({ database: t.database, env: { IMPORT_STALL_TIMEOUT_MS: '3000' } });
      // 1,500 rows, then nothing more (the upload stays open): the first chunk is written in the import's transaction.
      const { jobId, upload } = await uploadImport('', itemCsv(1500), member, await listen(b));
      try {
        await eventually(async () => (await readJob(jobId)).rowsRead >= 1000, 20_000);
        // Another key writes the same object while the import holds its transaction open, waiting for bytes.
        await t.http.post('/api/v1/objects/item/records').set(bearer(other)).send({ sku: 'meanwhile' }).expect(201);
        expect((await readJob(jobId)).status).toBe('running');
        const job = await untilEnded(jobId);
        expect(job).toMatchObject({ status: 'failed', atomic: true, rowsWritten: 0, failure: { code: 'upload_stalled' } });
        expect(job.failure!.error).toContain('IMPORT_STALL_TIMEOUT_MS');
        expect((await t.sql<{ sku: string }>('select sku from data.item')).map((r) => r.sku)).toEqual(['meanwhile']);
      } finally {
        upload.destroy();
        await b.close();
      }
    });

    it('fails an import whose connection is cut before its body ended (here by HTTP_REQUEST_TIMEOUT_MS), instead of waiting for it for ever', async () => {
      // The import stall timeout (30 s by default) is not what ends this one.
      const c = await startTestApp({ database: t.database, env: { HTTP_REQUEST_TIMEOUT_MS: '1000' } });
      const { jobId, upload } = await uploadImport('', itemCsv(1500), member, await listen(c));
      try {
        const job = await untilEnded(jobId);
        expect(job).toMatchObject({ status: 'failed', rowsWritten: 0, failure: { code: 'invalid_csv' } });
        expect(job.failure!.error).toContain('upload ended before the CSV body was complete');
        expect(await count()).toBe(0);
      } finally {
        upload.destroy();
        await c.close();
      }
    });

    describe('DELETE /api/v1/jobs/:id cancels a running import (finding: no way to cancel a CSV job)', () => {
      it('with atomic=false stops at the next chunk boundary: the chunks written stay, the job says so, nothing more is written', async () => {
        // 3,000 rows, then the start of one more: the job reads the 3,000, and waits for the rest of the 3,001st.
        const { jobId, upload } = await uploadImport('?atomic=false', `${itemCsv(3000)}late-0,1`);
        try {
          // Three chunks of 1,000 written and committed; the job now waits for more of its body.
          await eventually(async () => (await readJob(jobId)).rowsWritten === 3000, 20_000);
          const notTheirs = await t.http.delete(`/api/v1/jobs/${jobId}`).set(bearer(other)).expect(404);
          expect(errorOf(notTheirs).code).toBe('job_not_found');
          const res = await t.http.delete(`/api/v1/jobs/${jobId}`).set(bearer(member)).expect(202);
          expect(bodyOf<JobResponse>(res)).toMatchObject({ id: jobId, cancelRequested: true, rowsWritten: 3000 });
          // The rest of the file, sent after the cancel, is not imported.
          upload.write(
            `\n${itemCsv(2000)
              .replace(/^sku,.*\n/, '')
              .replace(/^sku-/gm, 'late-')}`,
          );
          const job = await untilEnded(jobId);
          expect(job).toMatchObject({
            status: 'cancelled',
            cancelRequested: true,
            rowsRead: 3000,
            rowsWritten: 3000,
            rowsRejected: 0,
          });
          expect(job.finishedAt).toEqual(expect.any(String));
          expect(job.failure).toBeUndefined();
          expect(await count()).toBe(3000);
          const again = await t.http.delete(`/api/v1/jobs/${jobId}`).set(bearer(member)).expect(409);
          expect(errorOf(again)).toMatchObject({ code: 'job_finished', details: { status: 'cancelled' } });
        } finally {
          upload.destroy();
        }
      });

      it("rolls an all-or-nothing import back whole; an admin may cancel any key's job", async () => {
        const { jobId, upload } = await uploadImport('', itemCsv(2500));
        try {
          await eventually(async () => (await readJob(jobId)).rowsRead >= 2000, 20_000);
          const res = await t.http.delete(`/api/v1/jobs/${jobId}`).set(bearer(t.adminKey)).expect(202);
          expect(bodyOf<JobResponse>(res)).toMatchObject({ id: jobId, cancelRequested: true });
          const job = await untilEnded(jobId);
          expect(job).toMatchObject({ status: 'cancelled', atomic: true, rowsWritten: 0, rowsRejected: 0 });
          expect(job.rowsRead).toBeGreaterThanOrEqual(2000);
          expect(await count()).toBe(0);
        } finally {
          upload.destroy();
        }
      });

      it('stops at its next chunk boundary when the cancel is asked on another replica', async () => {
        const b = await startTestApp({ database: t.database });
        const { jobId, upload } = await uploadImport('?atomic=false', `${itemCsv(1000)}late-0,1`);
        try {
          await eventually(async () => (await readJob(jobId)).rowsWritten === 1000, 20_000);
          const res = await b.http.delete(`/api/v1/jobs/${jobId}`).set(bearer(member)).expect(202);
          expect(bodyOf<JobResponse>(res)).toMatchObject({ status: 'running', cancelRequested: true });
          // The replica running the job learns of it when it records the chunk it is writing.
          upload.write(
            `\n${itemCsv(1500)
              .replace(/^sku,.*\n/, '')
              .replace(/^sku-/gm, 'next-')}`,
          );
          const job = await untilEnded(jobId);
          expect(job).toMatchObject({ status: 'cancelled', rowsWritten: 2000 });
          expect(await count()).toBe(2000);
        } finally {
          upload.destroy();
          await b.close();
        }
      });

      it('answers 409 job_finished for an ended job, 404 for an unknown one', async () => {
        const done = await jobOf(await startImport(itemCsv(3)));
        expect(done.status).toBe('done');
        const res = await t.http.delete(`/api/v1/jobs/${done.id}`).set(bearer(member)).expect(409);
        expect(errorOf(res)).toMatchObject({ code: 'job_finished', details: { status: 'done' } });
        expect((await readJob(done.id)).status).toBe('done');
        await t.http.delete(`/api/v1/jobs/${done.id}`).set(bearer(other)).expect(404);
        await t.http.delete('/api/v1/jobs/not-a-uuid').set(bearer(member)).expect(404);
        await t.http.delete(`/api/v1/jobs/${done.id}`).expect(401);
      });
    });

    it('refuses bad input with a clear 4xx: not CSV, bad mapping, bad flags, malformed CSV, no key', async () => {
      const json = await t.http.post('/api/v1/objects/item/import').set(bearer(member)).send({ sku: 'x' });
      expect([json.status, errorOf(json).code]).toEqual([415, 'unsupported_media_type']);
      const mapping = await startImport('sku\nX\n', '?mapping=%7Bnot-json');
      expect([mapping.status, errorOf(mapping).code]).toEqual([400, 'invalid_mapping']);
      const mappingShape = await startImport('sku\nX\n', `?mapping=${encodeURIComponent('["sku"]')}`);
      expect([mappingShape.status, errorOf(mappingShape).code]).toEqual([400, 'invalid_mapping']);
      const missingColumn = await startImport('sku\nX\n', `?mapping=${encodeURIComponent('{"Nope":"sku"}')}`);
      expect([missingColumn.status, errorOf(missingColumn).code]).toEqual([400, 'invalid_mapping']);
      expect((await startImport('sku\nX\n', '?atomic=maybe')).status).toBe(400);
      const empty = await startImport('');
      expect([empty.status, errorOf(empty).code]).toEqual([400, 'invalid_csv']);
      const unknownObject = await startImport('sku\nX\n', '', member, 'nope');
      expect(unknownObject.status).toBe(404);
      const noKey = await t.http.post('/api/v1/objects/item/import').set('content-type', 'text/csv').send('sku\nX\n');
      expect(noKey.status).toBe(401);
      const malformed = await jobOf(await startImport('sku,notes\nA,"unterminated\n'));
      expect(malformed).toMatchObject({ status: 'failed', rowsWritten: 0, failure: { code: 'invalid_csv' } });
      expect(await count()).toBe(0);
    });
  });

  describe('export', () => {
    beforeEach(async () => {
      const job = await jobOf(
        await startImport(
          'sku,qty,price,active,tags,owner\nc,3,3.25,true,red;green,ann\na,1,1.5,false,,bob\nb,2,,true,blue,ann\nd,4,4,false,green,bob\n',
        ),
      );
      expect(job.rowsWritten).toBe(4);
    });

    it('streams the matching rows in order with the requested fields, formatted per type', async () => {
      const where = encodeURIComponent(JSON.stringify({ qty: { $lte: 3 } }));
      const orderBy = encodeURIComponent(JSON.stringify([{ field: 'qty', order: 'desc' }]));
      const res = await exportCsv(`?where=${where}&orderBy=${orderBy}&fields=sku,qty,price,active,tags`).expect(200);
      expect(res.headers['content-type']).toMatch(/^text\/csv/);
      expect(String(res.body)).toBe('sku,qty,price,active,tags\nc,3,3.25,true,red;green\nb,2,,true,blue\na,1,1.5,false,\n');
      const all = rowsOf(String((await exportCsv('').expect(200)).body));
      expect(all[0]).toEqual(['id', 'created_at', 'updated_at', ...FIELDS.map((f) => f.name)]);
      expect(all).toHaveLength(5);
    });

    it('applies a saved view: its filter, order and columns, and a where ANDed with it', async () => {
      await t.http
        .post('/api/v1/objects/item/views')
        .set(bearer(member))
        .send({
          name: 'cheap_first',
          label: 'Cheap first',
          where: { qty: { $lte: 3 } },
          orderBy: [{ field: 'qty', order: 'asc' }],
          fields: ['sku', 'qty'],
        })
        .expect(201);
      expect(String((await exportCsv('?view=cheap_first').expect(200)).body)).toBe('sku,qty\na,1\nb,2\nc,3\n');
      const where = encodeURIComponent(JSON.stringify({ qty: { $gte: 2 } }));
      expect(String((await exportCsv(`?view=cheap_first&where=${where}`).expect(200)).body)).toBe('sku,qty\nb,2\nc,3\n');
      expect((await exportCsv('?view=no_such_view')).status).toBe(404);
    });

    it("keeps to the caller's policy: its row filter and hidden fields", async () => {
      await t.http
        .post('/api/v1/policies')
        .set(bearer(t.adminKey))
        .send({ name: 'own-items', objects: { item: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['price'] } } })
        .expect(201);
      const ann = (await createApiKey(t, { name: 'ann', role: 'member', subject: 'ann', policies: ['own-items'] })).secret;
      const rows = rowsOf(String((await exportCsv(`?orderBy=${encodeURIComponent('[{"field":"sku"}]')}`, ann).expect(200)).body));
      expect(rows[0]).not.toContain('price');
      expect(rows.slice(1).map((r) => r[rows[0].indexOf('sku')])).toEqual(['b', 'c']);
      expect((await exportCsv('?fields=sku,price', ann)).status).toBe(400);
    });

    it('refuses a bad query with a JSON 4xx before streaming', async () => {
      const res = await t.http.get('/api/v1/objects/item/records/export.csv?where=%7Bbad').set(bearer(member));
      expect([res.status, errorOf(res).code]).toEqual([400, 'invalid_where']);
      expect((await exportCsv('?fields=nope')).status).toBe(400);
      expect((await exportCsv('?bom=maybe')).status).toBe(400);
      expect((await t.http.get('/api/v1/objects/item/records/export.csv')).status).toBe(401);
    });
  });

  it('round-trips quotes, commas, newlines and a BOM through export and import unchanged', async () => {
    const records = [
      {
        sku: 'q-1',
        notes: 'He said "hi", then\nleft\r\nagain',
        owner: ' spaced, ',
        meta: { a: [1, '"x"'], b: null },
        tags: ['red', 'blue'],
      },
      { sku: 'q-2', notes: 'Zoë ✓ — “curly”', meta: 'just text', qty: -5, price: 0.1, active: false },
      { sku: 'q,3', notes: '\uFEFFstarts with a BOM', due: '2026-02-28' },
    ];
    for (const record of records) await t.http.post('/api/v1/objects/item/records').set(bearer(member)).send(record).expect(201);
    const query = `?bom=true&orderBy=${encodeURIComponent('[{"field":"sku"}]')}&fields=${FIELDS.map((f) => f.name).join(',')}`;
    const first = String((await exportCsv(query).expect(200)).body);
    expect(first.startsWith('\uFEFFsku,')).toBe(true);
    const job = await jobOf(await startImport(first, '', member, 'copy'));
    expect(job).toMatchObject({ status: 'done', rowsWritten: 3, rowsRejected: 0 });
    const second = String((await exportCsv(query, member, 'copy').expect(200)).body);
    expect(second).toBe(first);
    const copied = bodyOf<{ records: Record<string, unknown>[] }>(
      await t.http
        .get(`/api/v1/objects/copy/records?orderBy=${encodeURIComponent('[{"field":"sku"}]')}`)
        .set(bearer(member))
        .expect(200),
    ).records;
    const bySku = new Map(copied.map((r) => [r.sku, r]));
    for (const record of records) expect(bySku.get(record.sku)).toMatchObject({ ...record, meta: record.meta ?? null });
  });
});
