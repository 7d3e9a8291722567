import { sql as sqlAt } from './pg-query';
import { execFile } from 'node:child_process';
import { appendFile, chmod, chown, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { RunningPostgres, startEmbeddedPostgres } from '../../src/database/embedded-postgres.launcher';
import { freePort } from './free-port';

/** A primary and a hot standby streaming from it, both the embedded Postgres, each on a port of its own. */
export interface StreamingReplica {
  primary: RunningPostgres;
  replica: RunningPostgres;
  /** Runs one statement on a server (as its superuser, in `database`), and ends the connection. */
  sql<T = Record<string, unknown>>(
    server: 'primary' | 'replica',
    text: string,
    params?: unknown[],
    database?: string,
  ): Promise<T[]>;
  /** Resolves once the replica replayed everything the primary had written when called. */
  caughtUp(timeoutMs?: number): Promise<void>;
  /** Stops both servers and removes their files. */
  stop(): Promise<void>;
}

/**
 * Starts a primary, takes a base backup of it and starts that as a streaming replica. The embedded
 * binaries have no pg_basebackup: the backup is a copy of the cleanly stopped primary's files (a
 * complete, consistent cluster), to which `standby.signal` and `primary_conninfo` make it a standby.
 * PostgreSQL's defaults stream already (wal_level replica, max_wal_senders 10, and initdb's pg_hba
 * admits replication connections from 127.0.0.1 with the cluster's password method); they are
 * checked rather than assumed. `settings` (e.g. shared_preload_libraries) apply to both servers.
 */
export async function startStreamingReplica(options: { settings?: Record<string, string> } = {}): Promise<StreamingReplica> {
  const root = await mkdtemp(join(tmpdir(), 'data-copilot-replica-'));
  // As root, Postgres runs as the `postgres` user, which must be able to reach both clusters.
  await chmod(root, 0o711);
  const primaryDir = join(root, 'primary');
  const replicaDir = join(root, 'replica');
  const primaryPort = await freePort();
  let primary = await startEmbeddedPostgres({ dataDir: primaryDir, port: primaryPort }).catch(async (error: unknown) => {
    await rm(root, { recursive: true, force: true });
    throw error;
  });
  let replica: RunningPostgres | undefined;
  try {
    const [settings] = await sqlAt<{ wal_level: string; senders: number; hba: number }>(
      primary.url,
      `select current_setting('wal_level') as wal_level, current_setting('max_wal_senders')::int as senders,
        (select count(*)::int from pg_hba_file_rules where 'replication' = any(database) and type = 'host') as hba`,
    );
    if (settings.wal_level === 'minimal' || settings.senders < 1 || settings.hba < 1) {
      throw new Error(`the primary cannot stream: ${JSON.stringify(settings)}`);
    }
    // Server settings of both (ALTER SYSTEM writes postgresql.auto.conf, which the copy takes along).
    for (const [name, value] of Object.entries(options.settings ?? {})) {
      await sqlAt(primary.url, `alter system set ${name} = '${value.replace(/'/g, "''")}'`);
    }
    await primary.stop();

    const cluster = join(replicaDir, 'postgres');
    await promisify(execFile)('cp', ['-a', primaryDir, replicaDir]);
    // The copy keeps the files' owner (the `postgres` user when we are root) and the password file.
    const secret = decodeURIComponent(new URL(primary.url).password);
    const owner = await stat(cluster);
    await writeFile(join(cluster, 'standby.signal'), '');
    await chown(join(cluster, 'standby.signal'), owner.uid, owner.gid);
    await appendFile(
      join(cluster, 'postgresql.auto.conf'),
      `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres password=${secret} application_name=read_replica'\n`,
    );

    primary = await startEmbeddedPostgres({ dataDir: primaryDir, port: primaryPort });
    replica = await startEmbeddedPostgres({ dataDir: replicaDir, port: await freePort() });
  } catch (error) {
    await replica?.stop();
    await primary.stop();
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  const servers = { primary, replica };
  const sql = <T>(server: 'primary' | 'replica', text: string, params: unknown[] = [], database = 'postgres') =>
    sqlAt<T>(servers[server].urlFor(database), text, params);

  const pair: StreamingReplica = {
    primary,
    replica,
    sql,
    async caughtUp(timeoutMs = 20_000) {
      const [{ lsn }] = await sql<{ lsn: string }>('primary', 'select pg_current_wal_lsn()::text as lsn');
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [{ done }] = await sql<{ done: boolean }>('replica', 'select pg_last_wal_replay_lsn() >= $1::pg_lsn as done', [
          lsn,
        ]);
        if (done) return;
        if (Date.now() > deadline) throw new Error(`the replica did not replay ${lsn} within ${timeoutMs} ms`);
        await sleep(20);
      }
    },
    async stop() {
      await replica.stop();
      await primary.stop();
      await rm(root, { recursive: true, force: true });
    },
  };
  // Streaming, not just started: the primary sees its WAL sender.
  const deadline = Date.now() + 20_000;
  while ((await sql('primary', `select 1 from pg_stat_replication where state = 'streaming'`)).length === 0) {
    if (Date.now() > deadline) {
      await pair.stop();
      throw new Error('the replica did not start streaming from the primary');
    }
    await sleep(50);
  }
  return pair;
}
