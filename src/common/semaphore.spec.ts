import { keyShareOf, Semaphore } from './semaphore';

const aborted = () => new Error('aborted');

describe('Semaphore', () => {
  it('grants up to its size at once and the rest in arrival order', async () => {
    const semaphore = new Semaphore(2);
    const first = await semaphore.acquire(undefined, aborted);
    const second = await semaphore.acquire(undefined, aborted);
    const order: number[] = [];
    const third = semaphore.acquire(undefined, aborted).then((release) => (order.push(3), release));
    const fourth = semaphore.acquire(undefined, aborted).then((release) => (order.push(4), release));
    expect(semaphore.waiting).toBe(2);
    first();
    first(); // a second release of the same slot frees nothing more
    (await third)();
    second();
    (await fourth)();
    expect(order).toEqual([3, 4]);
    expect(semaphore.inUse).toBe(0);
  });

  it('lets a waiter leave when its signal aborts, without taking a slot', async () => {
    const semaphore = new Semaphore(1);
    const release = await semaphore.acquire(undefined, aborted);
    const controller = new AbortController();
    const waiting = semaphore.acquire(controller.signal, aborted);
    controller.abort();
    await expect(waiting).rejects.toThrow('aborted');
    expect(semaphore.waiting).toBe(0);
    release();
    expect(semaphore.inUse).toBe(0);
    await expect(semaphore.acquire(controller.signal, aborted)).rejects.toThrow('aborted');
  });

  it('runs work holding a slot and frees it when the work throws', async () => {
    const semaphore = new Semaphore(1);
    await expect(
      semaphore.run(undefined, aborted, () => {
        expect(semaphore.inUse).toBe(1);
        return Promise.reject(new Error('boom'));
      }),
    ).rejects.toThrow('boom');
    expect(semaphore.inUse).toBe(0);
  });

  describe('with a share per key', () => {
    const busy = () => new Error('busy');

    it("holds one key to its share while another key's call takes a free slot at once", async () => {
      const semaphore = new Semaphore(4, 2);
      const a1 = await semaphore.acquire(undefined, aborted, { key: 'a' });
      await semaphore.acquire(undefined, aborted, { key: 'a' });
      let a3Granted = false;
      const a3 = semaphore.acquire(undefined, aborted, { key: 'a' }).then((release) => ((a3Granted = true), release));
      const b1 = await semaphore.acquire(undefined, aborted, { key: 'b' });
      expect([semaphore.inUse, semaphore.waiting, a3Granted]).toEqual([3, 1, false]);
      // A slot of another key does not let `a` past its share; one of its own does.
      b1();
      await Promise.resolve();
      expect(a3Granted).toBe(false);
      a1();
      (await a3)();
      expect(semaphore.waiting).toBe(0);
    });

    it('gives a freed slot to the first waiter whose key is below its share', async () => {
      const semaphore = new Semaphore(2, 1);
      const a = await semaphore.acquire(undefined, aborted, { key: 'a' });
      const b = await semaphore.acquire(undefined, aborted, { key: 'b' });
      const order: string[] = [];
      const a2 = semaphore.acquire(undefined, aborted, { key: 'a' }).then((release) => (order.push('a2'), release));
      const c = semaphore.acquire(undefined, aborted, { key: 'c' }).then((release) => (order.push('c'), release));
      b();
      (await c)();
      a();
      (await a2)();
      expect(order).toEqual(['c', 'a2']);
      expect(semaphore.inUse).toBe(0);
    });

    it('counts calls without a key towards the size only', async () => {
      const semaphore = new Semaphore(2, 1);
      await semaphore.acquire(undefined, aborted);
      await semaphore.acquire(undefined, aborted);
      expect(semaphore.inUse).toBe(2);
    });

    it('ends a wait past timeoutMs with onTimeout(), leaving the queue', async () => {
      const semaphore = new Semaphore(2, 1);
      const release = await semaphore.acquire(undefined, aborted, { key: 'a' });
      await expect(semaphore.acquire(undefined, aborted, { key: 'a', timeoutMs: 10, onTimeout: busy })).rejects.toThrow('busy');
      expect(semaphore.waiting).toBe(0);
      release();
      expect(semaphore.inUse).toBe(0);
    });

    it.each([
      [10, 0.5, 5],
      [10, 0.3, 3],
      [4, 0.5, 2],
      [1, 0.5, 1],
      [3, 0.1, 1],
      [10, 1, 10],
    ])('gives one key of %i slots at share %d %i of them', (size, share, slots) => {
      expect(keyShareOf(size, share)).toBe(slots);
    });
  });
});
