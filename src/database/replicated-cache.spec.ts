import { fakePubSub } from '../../test/support/fake-pubsub';
import { ReplicatedCache } from './replicated-cache';

describe('ReplicatedCache', () => {
  /** A load the spec finishes by hand, counting how many were started. */
  function loads() {
    const started: Array<(value: string) => void> = [];
    return {
      started,
      load: () => new Promise<string>((resolve) => started.push(resolve)),
    };
  }

  it('makes one read for the reads of a key that miss while its load is under way', async () => {
    const bus = fakePubSub();
    const cache = new ReplicatedCache<string>(bus.pubsub, 'changed');
    const { started, load } = loads();
    const reads = [cache.get('k', load), cache.get('k', load), cache.get('k', load)];
    expect(started).toHaveLength(1);
    started[0]('v1');
    expect(await Promise.all(reads)).toEqual(['v1', 'v1', 'v1']);
    expect(await cache.get('k', load)).toBe('v1');
    expect(started).toHaveLength(1);
  });

  it('never shares a load started before a change with a read after it, nor keeps what it read', async () => {
    const bus = fakePubSub();
    const cache = new ReplicatedCache<string>(bus.pubsub, 'changed');
    const { started, load } = loads();
    const before = cache.get('k', load);
    bus.deliver({ type: 'changed' });
    const after = cache.get('k', load);
    expect(started).toHaveLength(2);
    started[0]('old');
    started[1]('new');
    expect([await before, await after]).toEqual(['old', 'new']);
    expect(await cache.get('k', load)).toBe('new');
    expect(started).toHaveLength(2);
  });
});
