import type { Response } from 'supertest';
import { bodyOf, errorOf, idOf, type RecordBody } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey, createObject, fieldSpec } from '../support/fixtures';

const UNKNOWN_ID = '7d1c4c36-1b7a-4d5e-9a60-3a1f2b9c8e01';

/** A strong entity tag, as the records API sends them. */
const STRONG_ETAG = /^"\d+"$/;

function etagOf(res: Response): string {
  const etag = res.headers.etag as string | undefined;
  expect(etag).toMatch(STRONG_ETAG);
  return etag!;
}

describe('lost updates: records carry a version, and If-Match makes writes conditional (finding 10)', () => {
  let t: TestApp;
  let member: string;

  const path = (id: string) => `/api/v1/objects/counter/records/${id}`;
  const read = (id: string) => t.http.get(path(id)).set(bearer(member));
  const patch = (id: string, body: unknown, ifMatch?: string) => {
    const req = t.http.patch(path(id)).set(bearer(member));
    return (ifMatch === undefined ? req : req.set('If-Match', ifMatch)).send(body as object);
  };
  const remove = (id: string, ifMatch?: string) => {
    const req = t.http.delete(path(id)).set(bearer(member));
    return ifMatch === undefined ? req : req.set('If-Match', ifMatch);
  };
  const create = async (value = 0) =>
    t.http.post('/api/v1/objects/counter/records').set(bearer(member)).send({ label: 'c', value }).expect(201);

  beforeAll(async () => {
    // Its contention test makes thousands of requests a minute with one member key: not what the rate limit is for.
    t = await startTestApp({ env: { RATE_LIMIT_PER_MINUTE: '0' } });
    await createObject(t, 'counter', [fieldSpec('label', 'text'), fieldSpec('value', 'integer')]);
    member = (await createApiKey(t, { name: 'ui', role: 'member' })).secret;
  });
  afterAll(() => t.close());

  it('answers create (201), get and patch (200) with a strong ETag that changes with every write', async () => {
    const created = await create();
    const id = idOf(created);
    const etag = etagOf(created);
    expect(etagOf(await read(id).expect(200))).toBe(etag);
    const patched = await patch(id, { value: 1 }).expect(200);
    const next = etagOf(patched);
    expect(next).not.toBe(etag);
    expect(etagOf(await read(id).expect(200))).toBe(next);
    // A write that sets the same value is still a write: its version is new too.
    expect(etagOf(await patch(id, { value: 1 }).expect(200))).not.toBe(next);
  });

  it('ends 100 concurrent read-then-PATCH increments with If-Match, retried on 412, at exactly +100', async () => {
    const id = idOf(await create(0));
    let refused = 0;
    const increment = async () => {
      for (;;) {
        const current = await read(id).expect(200);
        const value = bodyOf<RecordBody>(current).value as number;
        const res = await patch(id, { value: value + 1 }, etagOf(current));
        if (res.status === 200) return;
        expect(res.status).toBe(412);
        expect(errorOf(res).code).toBe('precondition_failed');
        refused++;
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20));
      }
    };
    await Promise.all(Array.from({ length: 100 }, increment));
    expect(bodyOf<RecordBody>(await read(id).expect(200)).value).toBe(100);
    // The test only proves something if writers really raced.
    expect(refused).toBeGreaterThan(0);
  }, 120_000);

  it('refuses a PATCH with a stale If-Match with 412 precondition_failed and leaves the record unchanged', async () => {
    const id = idOf(await create(5));
    const stale = etagOf(await read(id).expect(200));
    const other = await patch(id, { value: 6 }).expect(200);
    const res = await patch(id, { value: 50, label: 'lost' }, stale).expect(412);
    expect(errorOf(res)).toEqual({ error: expect.stringContaining('If-Match') as unknown, code: 'precondition_failed' });
    const now = await read(id).expect(200);
    // The write's answer also names its change set; the record itself is what a read returns.
    const { changeSetId, ...written } = bodyOf<RecordBody>(other);
    expect(changeSetId).toBe(other.headers['change-set-id']);
    expect(bodyOf<RecordBody>(now)).toEqual(written);
    expect(etagOf(now)).toBe(etagOf(other));
  });

  it('refuses a DELETE with a stale If-Match with 412, keeps the record, and deletes with the current one (204)', async () => {
    const id = idOf(await create(1));
    const stale = etagOf(await read(id).expect(200));
    const current = etagOf(await patch(id, { value: 2 }).expect(200));
    const res = await remove(id, stale).expect(412);
    expect(errorOf(res).code).toBe('precondition_failed');
    expect(bodyOf<RecordBody>(await read(id).expect(200)).value).toBe(2);
    await remove(id, current).expect(204);
    await read(id).expect(404);
  });

  it('applies a PATCH whose If-Match is current, one of a list, or "*"', async () => {
    const id = idOf(await create(0));
    let etag = etagOf(await patch(id, { value: 1 }, etagOf(await read(id))).expect(200));
    etag = etagOf(await patch(id, { value: 2 }, `"0", W/"1",${etag} , "a,b"`).expect(200));
    await patch(id, { value: 3 }, '*').expect(200);
    expect(bodyOf<RecordBody>(await read(id).expect(200)).value).toBe(3);
    expect(etag).not.toBe(etagOf(await read(id)));
  });

  it('never matches a weak tag (If-Match compares strongly): 412 even for the current version', async () => {
    const id = idOf(await create(0));
    const etag = etagOf(await read(id).expect(200));
    expect(errorOf(await patch(id, { value: 9 }, `W/${etag}`).expect(412)).code).toBe('precondition_failed');
    expect(errorOf(await remove(id, `W/${etag}`).expect(412)).code).toBe('precondition_failed');
    expect(bodyOf<RecordBody>(await read(id).expect(200)).value).toBe(0);
  });

  it('answers 412 to a well-formed tag it never issued', async () => {
    const id = idOf(await create(0));
    expect(errorOf(await patch(id, { value: 9 }, '"not-a-version"').expect(412)).code).toBe('precondition_failed');
  });

  it.each([
    ['an unquoted tag', '1234'],
    ['an empty value', ''],
    ['only commas', ' , ,'],
    ['tags without a comma between them', '"1" "2"'],
    ['"*" in a list', '*, "1"'],
    ['an unterminated tag', '"1234'],
    ['a lowercase weak prefix', 'w/"1"'],
  ])('refuses %s in If-Match with 400 invalid_if_match and changes nothing', async (_label, ifMatch) => {
    const id = idOf(await create(0));
    const before = etagOf(await read(id).expect(200));
    expect(errorOf(await patch(id, { value: 1 }, ifMatch).expect(400))).toMatchObject({ code: 'invalid_if_match' });
    expect(errorOf(await remove(id, ifMatch).expect(400))).toMatchObject({ code: 'invalid_if_match' });
    expect(etagOf(await read(id).expect(200))).toBe(before);
  });

  it('answers 404 record_not_found for a missing record whatever If-Match says', async () => {
    const id = idOf(await create(0));
    const etag = etagOf(await read(id).expect(200));
    await remove(id, etag).expect(204);
    for (const ifMatch of [etag, '"1"', '*']) {
      expect(errorOf(await patch(id, { value: 1 }, ifMatch).expect(404)).code).toBe('record_not_found');
      expect(errorOf(await remove(id, ifMatch).expect(404)).code).toBe('record_not_found');
    }
    expect(errorOf(await patch(UNKNOWN_ID, { value: 1 }, etag).expect(404)).code).toBe('record_not_found');
    expect(errorOf(await patch('not-a-uuid', { value: 1 }, etag).expect(404)).code).toBe('record_not_found');
  });

  it('keeps last write wins without If-Match', async () => {
    const id = idOf(await create(0));
    await patch(id, { value: 1 }).expect(200);
    await patch(id, { value: 2 }).expect(200);
    expect(bodyOf<RecordBody>(await read(id).expect(200)).value).toBe(2);
    await remove(id).expect(204);
  });

  it('documents ETag and If-Match in the OpenAPI document', async () => {
    type Operation = { parameters?: Array<{ name: string; in: string }>; responses: Record<string, { headers?: object }> };
    const paths = bodyOf<{ paths: Record<string, Record<string, Operation>> }>(await t.http.get('/docs-json').expect(200)).paths;
    const one = paths['/api/v1/objects/{name}/records/{id}'];
    const headersOf = (operation: Operation, status: string) => Object.keys(operation.responses[status].headers ?? {});
    expect(headersOf(paths['/api/v1/objects/{name}/records'].post, '201')).toEqual(['ETag', 'Change-Set-Id']);
    expect(headersOf(one.get, '200')).toEqual(['ETag']);
    expect(headersOf(one.patch, '200')).toEqual(['ETag', 'Change-Set-Id']);
    for (const operation of [one.patch, one.delete]) {
      expect(operation.parameters?.find((parameter) => parameter.name === 'If-Match')).toMatchObject({ in: 'header' });
      expect(operation.responses['412']).toBeDefined();
    }
  });
});
