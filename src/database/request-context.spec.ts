import type { EntityManager } from '@mikro-orm/core';
import { contextEntityManager, runInRequestContext } from './request-context';

/** The global EntityManager as the context sees it: a name, and forks (recorded). */
function fakeRoot() {
  const forks: Array<{ options: unknown }> = [];
  const root = {
    name: 'default',
    fork: jest.fn((options: unknown) => {
      const fork = { options };
      forks.push(fork);
      return fork;
    }),
  };
  return { root: root as unknown as EntityManager, fork: root.fork, forks };
}

describe('the request context of the ORM', () => {
  it('forks nothing for a request that never uses the ORM', async () => {
    const { root, fork } = fakeRoot();
    await runInRequestContext(root, async () => {
      await Promise.resolve();
    });
    expect(fork).not.toHaveBeenCalled();
  });

  it("forks the request's EntityManager from the global one on first use, then keeps it across awaits", async () => {
    const { root, fork, forks } = fakeRoot();
    await runInRequestContext(root, async () => {
      const first = contextEntityManager('default');
      await new Promise((resolve) => setTimeout(resolve, 1));
      expect(contextEntityManager('default')).toBe(first);
      expect(first).toBe(forks[0]);
    });
    expect(fork).toHaveBeenCalledTimes(1);
    expect(fork).toHaveBeenCalledWith({ useContext: true, disableContextResolution: true });
  });

  it('gives each request its own fork, and none outside a request or for another ORM', async () => {
    const { root } = fakeRoot();
    const seen = await Promise.all(
      [1, 2].map((i) =>
        runInRequestContext(root, async () => {
          await new Promise((resolve) => setTimeout(resolve, 3 - i));
          return contextEntityManager('default');
        }),
      ),
    );
    expect(seen[0]).toBeDefined();
    expect(seen[0]).not.toBe(seen[1]);
    expect(contextEntityManager('default')).toBeUndefined();
    runInRequestContext(root, () => expect(contextEntityManager('other')).toBeUndefined());
  });

  it('finds no context while the fork is being built (the EntityManager constructor asks for it)', () => {
    let seenWhileForking: unknown = 'not asked';
    const fork = jest.fn(() => {
      seenWhileForking = contextEntityManager('default');
      return {};
    });
    const root = { name: 'default', fork } as unknown as EntityManager;
    runInRequestContext(root, () => expect(contextEntityManager('default')).toEqual({}));
    expect(seenWhileForking).toBeUndefined();
    expect(fork).toHaveBeenCalledTimes(1);
  });
});
