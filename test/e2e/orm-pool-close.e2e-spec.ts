import { MikroORM } from '@mikro-orm/postgresql';
import { startTestApp } from '../support/test-app';

/**
 * A connection of the ORM pool checked out and never released (a read that began while the application was
 * closing, whose caller went away) must not keep the application from closing: pg-pool's end would wait for it.
 */
describe('closing with an ORM connection still checked out', () => {
  it('closes, cutting the connection once the grace period is over', async () => {
    const t = await startTestApp();
    const pool = await t.app.get(MikroORM).em.getConnection().getNativeClient();
    const held = await pool.connect();
    await held.query('select 1');
    const ended = new Promise<void>((resolve) => held.once('end', () => resolve()));
    await t.close();
    // The close returned: the held connection was cut, not waited for.
    await ended;
    expect(pool.totalCount).toBe(0);
  }, 30_000);
});
