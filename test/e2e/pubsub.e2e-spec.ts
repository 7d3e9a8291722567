import { setTimeout as sleep } from 'node:timers/promises';
import { PgPubSub } from '../../src/database/pg-pubsub.service';
import { startTestApp, TestApp } from '../support/test-app';

describe('LISTEN/NOTIFY pub/sub', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  const listeners = async () =>
    Number(
      (
        await t.sql<{ n: string }>(
          `select count(*) as n from pg_stat_activity where datname = current_database() and query ilike 'listen %'`,
        )
      )[0].n,
    );

  async function received(type: string, within = 2000): Promise<number> {
    let count = 0;
    const unsubscribe = t.app.get(PgPubSub).subscribe((event) => {
      if (event.type === type) count++;
    });
    await t.app.get(PgPubSub).publish({ type });
    await sleep(within / 4);
    unsubscribe();
    return count;
  }

  it('delivers each event once', async () => {
    expect(await listeners()).toBe(1);
    expect(await received('probe_one')).toBe(1);
  });

  it('reconnects once after its connection is killed, without duplicate listeners or events', async () => {
    const resyncs: number[] = [];
    const unsubscribe = t.app.get(PgPubSub).subscribe((event) => {
      if (event.type === 'resync') resyncs.push(Date.now());
    });
    await t.sql(
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and query ilike 'listen %'`,
    );
    for (let i = 0; i < 50 && resyncs.length === 0; i++) await sleep(100);
    await sleep(1500);
    unsubscribe();
    expect(resyncs).toHaveLength(1);
    expect(await listeners()).toBe(1);
    expect(await received('probe_two')).toBe(1);
  });
});
