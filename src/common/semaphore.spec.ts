import { Semaphore } from './semaphore';

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
});
