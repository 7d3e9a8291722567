import 'reflect-metadata';
import { createApp } from './app.factory';
import { ConfigError, loadConfig } from './config/app-config';
import { RunningPostgres, startEmbeddedPostgres } from './database/embedded-postgres.launcher';

function log(level: 'info' | 'error', msg: string, extra: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ level, time: new Date().toISOString(), context: 'main', msg, ...extra }) + '\n');
}

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      log('error', error.message, { variable: error.variable });
      process.exit(1);
    }
    throw error;
  }

  let postgres: RunningPostgres | undefined;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    log('info', `starting embedded Postgres in ${config.dataDir} on port ${config.embeddedPostgresPort}`);
    postgres = await startEmbeddedPostgres({
      dataDir: config.dataDir,
      port: config.embeddedPostgresPort,
      log: (message) => { if (config.logLevel === 'debug') log('info', message, { context: 'postgres' }); },
    });
    databaseUrl = postgres.url;
  }

  const app = await createApp(config, databaseUrl).catch(async (error: unknown) => {
    await postgres?.stop();
    throw error;
  });
  await app.listen({ port: config.port, host: config.host });
  log('info', `listening on http://${config.host}:${config.port} (docs at /docs)`);

  // Shutdown order: stop taking requests and drain them, stop workers and the ORM, then Postgres.
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log('info', `${signal} received, shutting down`);
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    try {
      await app.close();
      await postgres?.stop();
      log('info', 'stopped');
      process.exit(0);
    } catch (error) {
      log('error', 'shutdown failed', { err: String(error) });
      process.exit(1);
    }
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch((error: unknown) => {
  log('error', 'start failed', { err: error instanceof Error ? error.stack ?? error.message : String(error) });
  process.exit(1);
});
