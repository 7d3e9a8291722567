import { loadConfig } from '../config/app-config';
import { CommitAnnouncer, COMMITTED_EVENT, type CommitSignal } from './commit-announcer.service';
import { fakePubSub } from '../../test/support/fake-pubsub';

function announcer(windowMs: number) {
  const bus = fakePubSub();
  const config = loadConfig({ EVENTS_ANNOUNCE_WINDOW_MS: String(windowMs), EVENTS_POLL_INTERVAL_MS: '600000' });
  const subject = new CommitAnnouncer(bus.pubsub, config);
  const signals: CommitSignal[] = [];
  subject.subscribe((signal) => signals.push(signal));
  subject.onModuleInit();
  return { subject, signals, ...bus };
}

describe('CommitAnnouncer', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('tells local readers at once and the other replicas once per window, with the newest event id', async () => {
    const { subject, signals, published } = announcer(10);
    subject.committed({ chatEvents: 7 });
    subject.committed({ chatEvents: 9 });
    subject.committed({ chatEvents: 8, changes: true });
    expect(signals).toEqual([
      { source: 'local', chatEvents: 7 },
      { source: 'local', chatEvents: 9 },
      { source: 'local', chatEvents: 8, changes: true },
    ]);
    expect(published).toEqual([]);
    await jest.advanceTimersByTimeAsync(10);
    expect(published).toEqual([{ type: COMMITTED_EVENT, replica: subject.replicaId, chatEvents: 9, changes: true }]);
    subject.committed({ chatEvents: 10 });
    await jest.advanceTimersByTimeAsync(10);
    expect(published).toHaveLength(2);
    expect(published[1]).toEqual({ type: COMMITTED_EVENT, replica: subject.replicaId, chatEvents: 10 });
    subject.onApplicationShutdown();
  });

  it('names the objects whose feeds the commits of a window appended to, and none once a commit did not say', async () => {
    const { subject, signals, published, deliver } = announcer(10);
    subject.committed({ changes: true, objects: ['deal'] });
    subject.committed({ changes: true, objects: ['account', 'deal'] });
    expect(signals.map((s) => s.objects)).toEqual([['deal'], ['account', 'deal']]);
    await jest.advanceTimersByTimeAsync(10);
    expect(published[0]).toMatchObject({ changes: true, objects: ['deal', 'account'] });
    subject.committed({ changes: true, objects: ['deal'] });
    subject.committed({ changes: true });
    subject.committed({ changes: true, objects: ['account'] });
    await jest.advanceTimersByTimeAsync(10);
    expect(published[1]).toEqual({ type: COMMITTED_EVENT, replica: subject.replicaId, changes: true });
    deliver({ type: COMMITTED_EVENT, replica: 'another', changes: true, objects: ['deal', 7] });
    expect(signals.at(-1)).toEqual({ source: 'remote', chatEvents: undefined, changes: true, objects: ['deal'] });
    subject.onApplicationShutdown();
  });

  it("passes on the other replicas' announcements, not its own, and a resync", () => {
    const { subject, signals, deliver } = announcer(10);
    deliver({ type: COMMITTED_EVENT, replica: subject.replicaId, chatEvents: 3 });
    deliver({ type: COMMITTED_EVENT, replica: 'another', chatEvents: 4 });
    deliver({ type: COMMITTED_EVENT, replica: 'another', changes: true });
    deliver({ type: 'resync' });
    deliver({ type: 'access_changed' });
    expect(signals).toEqual([
      { source: 'remote', chatEvents: 4, changes: false },
      { source: 'remote', chatEvents: undefined, changes: true },
      { source: 'resync' },
    ]);
    subject.onApplicationShutdown();
  });

  it('announces what is pending at once when the replica shuts down, and what it commits while it stops', async () => {
    const { subject, published } = announcer(600_000);
    subject.committed({ chatEvents: 5 });
    await subject.beforeApplicationShutdown();
    expect(published).toEqual([{ type: COMMITTED_EVENT, replica: subject.replicaId, chatEvents: 5 }]);
    subject.committed({ chatEvents: 6 });
    await Promise.resolve();
    expect(published.at(-1)).toEqual({ type: COMMITTED_EVENT, replica: subject.replicaId, chatEvents: 6 });
    subject.onApplicationShutdown();
  });
});
