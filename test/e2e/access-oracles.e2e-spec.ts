import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import type { BatchRecordsResponse } from '../../src/records/records.dto';
import type { ImportStartedResponse, JobResponse } from '../../src/transfer/transfer.dto';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, finishedJob } from '../support/fixtures';

/**
 * What a key under row filters can learn of records it may not read, through the writes it may make:
 * a lookup to such a record, a chosen id, a unique value. Ann (policy `rep`) reads accounts of her
 * region and writes her own deals and contacts; she may not read `vault` at all.
 */
describe('access oracles: what a write tells of records the key may not read', () => {
  let t: TestApp;
  let ann: string;
  let plain: string;
  let emea: string;
  let apac: string;
  let vault: string;

  const post = (object: string, record: Record<string, unknown>, key = ann) =>
    t.http.post(`/api/v1/objects/${object}/records`).set(bearer(key)).send(record);
  const batch = (operations: unknown[], atomic: boolean, key = ann) =>
    t.http.post('/api/v1/objects/deal/records/batch').set(bearer(key)).send({ operations, atomic });
  const importCsv = async (object: string, csv: string, query: string, key = ann): Promise<JobResponse> => {
    const res = await t.http
      .post(`/api/v1/objects/${object}/import${query}`)
      .set(bearer(key))
      .set('content-type', 'text/csv')
      .send(csv);
    expect(res.status).toBe(202);
    return finishedJob(t, bodyOf<ImportStartedResponse>(res).jobId, key);
  };
  /** A refusal without what tells one refused value from another. */
  const refusal = (res: Response) => ({ status: res.status, body: errorOf(res) });
  const NOT_THERE = { code: 'invalid_reference', field: 'account' };
  /** The refusal of a lookup to no record (word for word). */
  const gone = (field: string) => ({
    error: `Lookup "${field}" points to a "${field}" record that does not exist`,
    code: 'invalid_reference',
    details: { field },
  });

  beforeAll(async () => {
    t = await startTestApp();
    const define = (name: string, fields: unknown[]) =>
      t.http.post('/api/v1/objects').set(asAdmin(t)).send({ name, label: name, fields }).expect(201);
    await define('account', [
      { name: 'name', label: 'Name', type: 'text' },
      { name: 'region', label: 'Region', type: 'text' },
    ]);
    await define('vault', [{ name: 'code', label: 'Code', type: 'text' }]);
    await define('deal', [
      { name: 'title', label: 'Title', type: 'text' },
      { name: 'owner', label: 'Owner', type: 'text' },
      { name: 'account', label: 'Account', type: 'lookup', reference: 'account' },
      { name: 'vault', label: 'Vault', type: 'lookup', reference: 'vault' },
    ]);
    await define('contact', [
      { name: 'email', label: 'Email', type: 'email', unique: true },
      { name: 'owner', label: 'Owner', type: 'text' },
    ]);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'rep',
        objects: {
          account: { read: true, rowFilter: { region: '$attr.region' } },
          deal: { read: true, create: true, update: true, rowFilter: { owner: '$subject' } },
          contact: { read: true, create: true, rowFilter: { owner: '$subject' } },
        },
      })
      .expect(201);
    ann = (
      await createApiKey(t, { name: 'ann', role: 'member', subject: 'ann', attributes: { region: 'emea' }, policies: ['rep'] })
    ).secret;
    plain = (await createApiKey(t, { name: 'plain', role: 'member' })).secret;
    emea = idOf(await post('account', { name: 'Acme EU', region: 'emea' }, t.adminKey).expect(201));
    apac = idOf(await post('account', { name: 'Acme JP', region: 'apac' }, t.adminKey).expect(201));
    vault = idOf(await post('vault', { code: 'x' }, t.adminKey).expect(201));
  });
  afterAll(() => t.close());

  describe('a lookup to a record outside the key’s row filter is refused exactly like one to no record', () => {
    it('on create', async () => {
      const missing = refusal(await post('deal', { title: 'a', owner: 'ann', account: randomUUID() }));
      expect(missing).toEqual({ status: 400, body: gone('account') });
      expect(refusal(await post('deal', { title: 'a', owner: 'ann', account: apac }))).toEqual(missing);
      await post('deal', { title: 'a', owner: 'ann', account: emea }).expect(201);
      // An object the key may not read at all: every id of it is missing.
      const noVault = refusal(await post('deal', { title: 'a', owner: 'ann', vault: randomUUID() }));
      expect(noVault).toEqual({ status: 400, body: gone('vault') });
      expect(refusal(await post('deal', { title: 'a', owner: 'ann', vault }))).toEqual(noVault);
      await post('deal', { title: 'a', owner: 'ann', vault: null }).expect(201);
      // A key without policies still points anywhere.
      await post('deal', { title: 'a', owner: 'ann', account: apac, vault }, plain).expect(201);
      expect(await t.sql(`select 1 from data.deal where account = $1 and owner = 'ann'`, [apac])).toHaveLength(1);
    });

    it('on update, where a value the record already holds stays allowed', async () => {
      const id = idOf(await post('deal', { title: 'b', owner: 'ann', account: emea }).expect(201));
      const patch = (record: Record<string, unknown>) =>
        t.http.patch(`/api/v1/objects/deal/records/${id}`).set(bearer(ann)).send(record);
      const missing = refusal(await patch({ account: randomUUID() }));
      expect(missing).toEqual({ status: 400, body: gone('account') });
      expect(refusal(await patch({ account: apac }))).toEqual(missing);
      expect(refusal(await patch({ vault }))).toEqual(refusal(await patch({ vault: randomUUID() })));
      expect((await t.sql<{ account: string }>(`select account from data.deal where id = $1`, [id]))[0].account).toBe(emea);
      // The admin moved it to an account Ann cannot read: she still saves the record as she reads it.
      await t.http.patch(`/api/v1/objects/deal/records/${id}`).set(asAdmin(t)).send({ account: apac, vault }).expect(200);
      await patch({ title: 'b2', account: apac, vault }).expect(200);
    });

    it('in a batch, all or nothing and operation by operation', async () => {
      const own = idOf(await post('deal', { title: 'c', owner: 'ann' }).expect(201));
      const operations = [
        { op: 'create', record: { title: 'ok', owner: 'ann', account: emea } },
        { op: 'create', record: { title: 'hidden', owner: 'ann', account: apac } },
        { op: 'create', record: { title: 'missing', owner: 'ann', account: randomUUID() } },
        { op: 'update', id: own, record: { account: apac } },
        { op: 'update', id: own, record: { account: randomUUID() } },
        { op: 'create', record: { title: 'vault', owner: 'ann', vault } },
      ];
      const atomic = await batch(operations, true).expect(400);
      expect(errorOf<{ errors: unknown[] }>(atomic).details.errors).toEqual(
        [1, 2, 3, 4, 5].map((index) => ({
          index,
          code: 'invalid_reference',
          field: index === 5 ? 'vault' : 'account',
          error: gone(index === 5 ? 'vault' : 'account').error,
        })),
      );
      const { results } = bodyOf<BatchRecordsResponse>(await batch(operations, false).expect(200));
      expect(results.map((r) => r.status)).toEqual([201, 400, 400, 400, 400, 400]);
      expect(results[1].error).toEqual(results[2].error);
      expect(results[1].error).toEqual({ code: 'invalid_reference', field: 'account', error: gone('account').error });
      expect(results[3].error).toEqual(results[4].error);
      expect(await t.sql(`select title from data.deal where owner = 'ann' and title in ('hidden', 'missing', 'vault')`)).toEqual(
        [],
      );
    });

    it('in a CSV import, dry run or not', async () => {
      const csv = `title,owner,account\nin,ann,${emea}\nhidden,ann,${apac}\nmissing,ann,${randomUUID()}\n`;
      for (const query of ['?dryRun=true', '?atomic=false']) {
        const job = await importCsv('deal', csv, query);
        expect(job).toMatchObject({ status: 'done', rowsRead: 3, rowsRejected: 2 });
        const [hidden, missing] = job.errors;
        expect(hidden).toEqual({ ...missing, row: 3 });
        expect(missing).toMatchObject({ row: 4, ...NOT_THERE });
      }
      expect(await t.sql(`select title from data.deal where title in ('in', 'hidden', 'missing')`)).toEqual([{ title: 'in' }]);
    });
  });

  describe('a key under a row filter cannot choose a record’s id', () => {
    it('is 400 validation_failed on create, batch create and import, whether or not a record has that id', async () => {
      const theirs = idOf(await post('deal', { title: 'theirs', owner: 'bob' }, t.adminKey).expect(201));
      for (const id of [theirs, randomUUID()]) {
        const res = await post('deal', { id, title: 'mine', owner: 'ann' }).expect(400);
        expect(errorOf(res)).toMatchObject({ code: 'validation_failed', details: { field: 'id' } });
        const { results } = bodyOf<BatchRecordsResponse>(
          await batch([{ op: 'create', record: { id, title: 'mine', owner: 'ann' } }], false).expect(200),
        );
        expect(results[0]).toMatchObject({ status: 400, error: { code: 'validation_failed', field: 'id' } });
      }
      const job = await importCsv('deal', `id,title,owner\n${theirs},x,ann\n${randomUUID()},y,ann\n,z,ann\n`, '?atomic=false');
      expect(job).toMatchObject({ rowsWritten: 1, rowsRejected: 2 });
      expect(job.errors.map((e) => [e.row, e.field, e.code])).toEqual([
        [2, 'id', 'validation_failed'],
        [3, 'id', 'validation_failed'],
      ]);
      expect(await t.sql(`select title, owner from data.deal where id = $1`, [theirs])).toEqual([
        { title: 'theirs', owner: 'bob' },
      ]);
    });

    it('keeps ids for keys without a row filter on the object: an admin, a member without policies', async () => {
      for (const key of [t.adminKey, plain]) {
        const id = randomUUID();
        await post('deal', { id, title: 'chosen', owner: 'ann' }, key).expect(201);
        expect(idOf(await t.http.get(`/api/v1/objects/deal/records/${id}`).set(bearer(ann)).expect(200))).toBe(id);
      }
    });
  });

  describe('a unique value', () => {
    const clash = { code: 'unique_violation', field: 'email', error: 'Another "contact" record already has this email' };

    it('clashes in a dry-run import naming only the CSV row and the field, not the record it clashes with', async () => {
      const theirs = idOf(await post('contact', { email: 'kept@example.com', owner: 'bob' }, t.adminKey).expect(201));
      const csv = 'email,owner\nnew@example.com,ann\nkept@example.com,ann\ntwice@example.com,ann\ntwice@example.com,ann\n';
      for (const query of ['?dryRun=true', '?dryRun=true&atomic=false', '?atomic=false']) {
        const job = await importCsv('contact', csv, query);
        expect(job.errors).toEqual([
          { row: 3, ...clash },
          { row: 5, ...clash },
        ]);
        expect(JSON.stringify(job)).not.toMatch(new RegExp(`${theirs}|bob|row 4|"row":4`));
      }
      const single = await post('contact', { email: 'kept@example.com', owner: 'ann' }).expect(409);
      expect(errorOf(single)).toEqual({ error: clash.error, code: clash.code, details: { field: 'email' } });
    });
  });
});
