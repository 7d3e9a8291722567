import { DomainError } from '../common/domain-error';
import { fakePubSub } from '../../test/support/fake-pubsub';
import { lagCheckIntervalMs, parseLsn, ReadReplica, ReplicaUnavailable } from './read-replica';
import { StandaloneConnection } from './standalone-connection';

const PRIMARY = 'postgres://app@primary/app';
const REPLICA = 'postgres://app@replica/app';

function pgError(code: string): Error {
  return Object.assign(new Error(`pg ${code}`), { code });
}

describe('ReadReplica', () => {
  /** What the two servers answer to the lag check: the primary's position, the replica's replayed one. */
  let servers: { primaryLsn: string; replayed: string | null; standby: boolean; replayAgeMs: number | null; down: boolean };
  let now: number;
  let watch: ReadReplica;
  let bus: ReturnType<typeof fakePubSub>;

  beforeEach(async () => {
    servers = { primaryLsn: '0/10', replayed: '0/10', standby: true, replayAgeMs: 60_000, down: false };
    now = 1_000_000;
    // The checks run when a test calls them: the watch's own timer never fires.
    jest.useFakeTimers({ doNotFake: ['Date', 'nextTick', 'queueMicrotask'] });
    jest.spyOn(Date, 'now').mockImplementation(() => now);
    jest.spyOn(StandaloneConnection.prototype, 'query').mockImplementation(function (this: StandaloneConnection) {
      const url = (this as unknown as { databaseUrl: string }).databaseUrl;
      if (url === PRIMARY) return Promise.resolve([{ lsn: servers.primaryLsn }]);
      if (servers.down) return Promise.reject(new Error('connect ECONNREFUSED'));
      return Promise.resolve([{ standby: servers.standby, replayed: servers.replayed, replay_age_ms: servers.replayAgeMs }]);
    });
    bus = fakePubSub();
    watch = new ReadReplica(PRIMARY, REPLICA, 2_000, bus.pubsub);
    await watch.start();
    // Past the start's window, in which every read stays on the primary.
    now += watch.stickyMs * 2;
    await check();
  });

  afterEach(async () => {
    await watch.stop();
    jest.restoreAllMocks();
    jest.useRealTimers();
  });

  const check = () => watch['check']();

  it('checks every quarter of READ_MAX_LAG_MS, between 50 ms and 1 s; reads pg_lsn text', () => {
    expect([lagCheckIntervalMs(0), lagCheckIntervalMs(2_000), lagCheckIntervalMs(60_000)]).toEqual([50, 500, 1_000]);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) | 0xb374d848n);
    expect(parseLsn('0/10') < parseLsn('0/9A')).toBe(true);
  });

  it('reads a keyed read on a caught-up replica, and a read without a key or that must be fresh on the primary', () => {
    expect(watch.current()).toEqual({ state: 'ok', lagMs: 0 });
    expect(watch.route('key-a')).toBe('replica');
    expect(watch.route(undefined)).toBe('primary');
    expect(watch.route('key-a', true)).toBe('primary');
    expect(watch.fallbacks()).toEqual({ lagging: 0, down: 0, error: 0 });
  });

  it("measures the lag as the age of the newest check whose primary position the replica replayed, not the last transaction's age", async () => {
    // The primary writes while the replica stops replaying at 0/10 (the position of the check above).
    const replayedCheckAt = now;
    for (const lsn of ['0/20', '0/30', '0/40', '0/50', '0/60']) {
      now += 500;
      servers.primaryLsn = lsn;
      await check();
    }
    expect(watch.current()).toEqual({ state: 'lagging', lagMs: now - replayedCheckAt });
    expect(watch.route('key-a')).toBe('primary');
    // It replays up to the previous check's position: behind by one interval, within READ_MAX_LAG_MS.
    servers.replayed = '0/60';
    now += 500;
    servers.primaryLsn = '0/70';
    await check();
    expect(watch.current()).toEqual({ state: 'ok', lagMs: 500 });
    expect(watch.fallbacks()).toMatchObject({ lagging: 1 });
  });

  it('is down when unreachable, not a standby, or not checked lately; and reads go to the primary, counted', async () => {
    servers.down = true;
    await check();
    expect(watch.current()).toEqual({ state: 'down', lagMs: null });
    expect(watch.route('key-a')).toBe('primary');
    servers.down = false;
    servers.standby = false;
    await check();
    expect(watch.current().state).toBe('down');
    servers.standby = true;
    await check();
    expect(watch.route('key-a')).toBe('replica');
    now += 3 * watch.intervalMs + 1;
    expect(watch.current().state).toBe('down');
    expect(watch.route('key-a')).toBe('primary');
    expect(watch.fallbacks()).toEqual({ lagging: 0, down: 2, error: 0 });
  });

  it('keeps a key that wrote on the primary for its window, and tells the other app replicas once per half window', async () => {
    await watch.wrote('key-a');
    await watch.wrote('key-a');
    expect(bus.published).toEqual([{ type: 'key_wrote', keyId: 'key-a' }]);
    expect(watch.route('key-a')).toBe('primary');
    expect(watch.route('key-b')).toBe('replica');
    now += watch.stickyMs / 2 + 1;
    await watch.wrote('key-a');
    expect(bus.published).toHaveLength(2);
    now += watch.stickyMs + 1;
    await check();
    expect(watch.route('key-a')).toBe('replica');
  });

  it("takes another app replica's mark, and sends every read to the primary for a while after a lost LISTEN connection", async () => {
    bus.deliver({ type: 'key_wrote', keyId: 'key-b' });
    expect(watch.route('key-b')).toBe('primary');
    // It covers writes until that app replica's next event, half a window later.
    now += watch.stickyMs;
    await check();
    expect(watch.route('key-b')).toBe('primary');
    bus.deliver({ type: 'resync' });
    expect(watch.route('key-c')).toBe('primary');
    now += watch.stickyMs * 1.5 + 1;
    await check();
    expect(watch.route('key-b')).toBe('replica');
    expect(watch.route('key-c')).toBe('replica');
  });

  it('runs a read again on the primary when the replica, not the read, failed it; an unreachable replica is down', () => {
    const signal = new AbortController().signal;
    for (const error of [pgError('42P01'), pgError('42703'), pgError('40001')]) expect(watch.failed(error, signal)).toBe(true);
    expect(watch.current().state).toBe('ok');
    for (const error of [pgError('23505'), pgError('22P02'), new DomainError('query_timeout', 'slow'), new TypeError('bug')]) {
      expect(watch.failed(error, signal)).toBe(false);
    }
    const aborted = new AbortController();
    aborted.abort();
    expect(watch.failed(pgError('57P01'), aborted.signal)).toBe(false);
    expect(watch.failed(new Error('Connection terminated unexpectedly'), signal)).toBe(true);
    expect(watch.current().state).toBe('down');
    expect(watch.failed(new ReplicaUnavailable(new Error('ECONNREFUSED')), signal)).toBe(true);
    expect(watch.failed(pgError('57P01'), signal)).toBe(true);
    expect(watch.fallbacks().error).toBe(6);
  });
});
