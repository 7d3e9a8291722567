import { AsyncLocalStorage } from 'node:async_hooks';
import { RequestContext, type EntityManager } from '@mikro-orm/core';

/**
 * A request's own EntityManager, forked from the global one the first time the request uses it. MikroORM's
 * middleware forks one for every request, eagerly; most requests never touch the ORM (keys, access and
 * metadata come from memory, records from the data pool), and a fork is a new identity map, unit of work
 * and copy of the filters.
 */
class LazyFork {
  private fork?: EntityManager;
  private forking = false;

  constructor(private readonly root: EntityManager) {}

  get(name: string): EntityManager | undefined {
    // While the fork is being built it asks for its context: none yet, as under MikroORM's own middleware.
    if (name !== this.root.name || this.forking) return undefined;
    if (!this.fork) {
      this.forking = true;
      try {
        // From the global EntityManager itself: resolving the context would ask for this very fork.
        this.fork = this.root.fork({ useContext: true, disableContextResolution: true });
      } finally {
        this.forking = false;
      }
    }
    return this.fork;
  }
}

const requests = new AsyncLocalStorage<LazyFork>();

/**
 * MikroORM's `context` option: the EntityManager the global one stands for in the current async context.
 * A context opened with MikroORM's own RequestContext (none in the app; a script may) comes first, then
 * the request's lazy fork; outside both, none (the global one, which refuses context-specific work).
 */
export function contextEntityManager(name: string): EntityManager | undefined {
  return RequestContext.getEntityManager(name) ?? requests.getStore()?.get(name);
}

/** Runs `next` (the rest of a request) in a context of its own whose EntityManager is forked from `root` on first use. */
export function runInRequestContext<T>(root: EntityManager, next: () => T): T {
  return requests.run(new LazyFork(root), next);
}
