import { MikroORM } from '@mikro-orm/postgresql';
import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import type { PoolClient } from 'pg';

/** How long the ORM pool's end waits for connections still checked out before it cuts them. */
export const ORM_POOL_END_GRACE_MS = 5_000;

/** The parts of pg-pool's state the cut needs (not in its typings): every client, the idle ones, and the queue's pulse. */
interface PoolInternals {
  _clients: PoolClient[];
  _idle: Array<{ client: PoolClient }>;
  _remove(client: PoolClient): void;
  _pulseQueue(): void;
}

/**
 * The ORM pool's end cannot wait for ever. pg-pool's `end()` waits until every checked-out connection is
 * released, and a read that acquired one while the application was closing may never release it (its
 * caller gone with the service that started it): the process would then hang on shutdown, holding its
 * LISTEN connection and the HTTP port's successor waiting. After ORM_POOL_END_GRACE_MS such connections
 * are closed and dropped from the pool, with a warning, so that the end completes.
 */
@Injectable()
export class OrmPoolCloser implements BeforeApplicationShutdown {
  private readonly logger = new Logger(OrmPoolCloser.name);

  constructor(private readonly orm: MikroORM) {}

  /** Before MikroORM's own onApplicationShutdown ends the pool: wraps that end. */
  async beforeApplicationShutdown(): Promise<void> {
    const pool = await this.orm.em.getConnection().getNativeClient();
    const end = pool.end.bind(pool);
    pool.end = () => {
      const ended = end();
      const timer = setTimeout(() => this.cut(pool as unknown as PoolInternals), ORM_POOL_END_GRACE_MS);
      timer.unref();
      return ended.finally(() => clearTimeout(timer));
    };
  }

  private cut(pool: PoolInternals): void {
    const idle = new Set(pool._idle.map((item) => item.client));
    const held = pool._clients.filter((client) => !idle.has(client));
    if (!held.length) return;
    this.logger.warn({ msg: 'closing ORM connections still checked out at shutdown', connections: held.length });
    for (const client of held) pool._remove(client);
    pool._pulseQueue();
  }
}
