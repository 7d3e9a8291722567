import type { OpenAPIObject } from '@nestjs/swagger';
import type { ReadinessResponse } from '../../src/health/health.dto';
import { bodyOf, errorOf } from '../support/responses';
import { allowConnections } from '../support/test-database';
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

  describe('liveness and readiness', () => {
    type NotReady = { checks: ReadinessResponse['checks']; pendingMigrations?: string[] };

    it('answers /health/live and /health/ready without a key', async () => {
      expect((await t.http.get('/health/live').expect(200)).body).toEqual({ status: 'ok' });
      expect(bodyOf<ReadinessResponse>(await t.http.get('/health/ready').expect(200))).toEqual({
        status: 'ok',
        checks: { database: 'ok', migrations: 'ok', worker: 'ok', jobQueue: 'ok', readReplica: 'disabled' },
      });
    });

    it('is not ready while a migration of this build is missing from the database', async () => {
      const [last] = await t.sql<{ name: string }>(`select name from mikro_orm_migrations order by id desc limit 1`);
      await t.sql(`update mikro_orm_migrations set name = name || '_gone' where name = $1`, [last.name]);
      try {
        const res = await t.http.get('/health/ready').expect(503);
        expect(errorOf<NotReady>(res)).toMatchObject({
          code: 'not_ready',
          details: {
            checks: { database: 'ok', migrations: 'pending', worker: 'ok', jobQueue: 'ok', readReplica: 'disabled' },
            pendingMigrations: [last.name],
          },
        });
      } finally {
        await t.sql(`update mikro_orm_migrations set name = $1 where name = $1 || '_gone'`, [last.name]);
      }
      await t.http.get('/health/ready').expect(200);
    });

    it('is not ready while the database refuses connections, and live all along', async () => {
      await allowConnections(t.database, false);
      try {
        // The check's own connection is gone too: it must connect anew, and cannot.
        await t.sql(
          `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and application_name = 'data-copilot:health'`,
        );
        const res = await t.http.get('/health/ready').expect(503);
        expect(errorOf<NotReady>(res)).toMatchObject({
          code: 'not_ready',
          details: { checks: { database: 'unreachable', migrations: 'unknown', worker: 'ok', readReplica: 'disabled' } },
        });
        await t.http.get('/health/live').expect(200);
      } finally {
        await allowConnections(t.database, true);
      }
      await t.http.get('/health/ready').expect(200);
      // GET /health is unchanged: the same body as always.
      expect((await t.http.get('/health').expect(200)).body).toEqual({ status: 'ok' });
    });
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
