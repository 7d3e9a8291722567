import type { OpenAPIObject } from '@nestjs/swagger';
import { bodyOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';

describe('health and docs', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it('answers /health without a key once migrated', async () => {
    const res = await t.http.get('/health').expect(200);
    expect(res.body).toEqual({ status: 'ok' });
    const [row] = await t.sql<{ count: string }>(`select count(*) from mikro_orm_migrations`);
    expect(Number(row.count)).toBeGreaterThan(0);
  });

  it('serves the OpenAPI document without a key, listing the API routes', async () => {
    const res = await t.http.get('/docs-json').expect(200);
    expect(Object.keys(bodyOf<OpenAPIObject>(res).paths)).toEqual(
      expect.arrayContaining(['/api/v1/objects', '/api/v1/objects/{name}/records', '/api/v1/api-keys']),
    );
  });

  it('echoes a request id header', async () => {
    const res = await t.http.get('/health').set('x-request-id', 'abc-123').expect(200);
    expect(res.headers['x-request-id']).toBe('abc-123');
  });

  it('answers malformed JSON with a 400 invalid_json', async () => {
    const res = await t.http
      .post('/api/v1/objects')
      .set(bearer(t.adminKey))
      .set('content-type', 'application/json')
      .send('{bad')
      .expect(400);
    expect(res.body).toMatchObject({ code: 'invalid_json' });
  });
});
