import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { createApp, LISTEN_BACKLOG } from './app.factory';
import { ConfigError, configWarnings, loadConfig } from './config/app-config';
import { RunningPostgres, startEmbeddedPostgres } from './database/embedded-postgres.launcher';
import { configureLogging, mainLogger as log } from './observability/logger';

async function main(): Promise<void> {
  // Until the configuration is read: the defaults, so that a bad value is reported in the usual shape.
  configureLogging({ level: 'info', format: 'json' });
  let config;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      log.error({ msg: 'invalid configuration', variable: error.variable, error: error.message });
      process.exit(1);
    }
    throw error;
  }
  configureLogging({ level: config.logLevel, format: config.logFormat });
  for (const warning of configWarnings(process.env)) log.warn({ msg: warning });

  let postgres: RunningPostgres | undefined;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    log.info({ msg: 'starting embedded Postgres', dataDir: config.dataDir, port: config.embeddedPostgresPort });
    const postgresLogger = new Logger('postgres');
    postgres = await startEmbeddedPostgres({
      dataDir: config.dataDir,
      port: config.embeddedPostgresPort,
      log: (message) => postgresLogger.debug({ msg: message }),
    });
    databaseUrl = postgres.url;
  }

  const app = await createApp(config, databaseUrl).catch(async (error: unknown) => {
    await postgres?.stop();
    throw error;
  });
  await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
  const pages = config.playground ? 'playground at /, docs at /docs' : 'docs at /docs';
  log.info({ msg: `listening on http://${config.host}:${config.port} (${pages})` });

  // Shutdown order: stop taking requests and drain them, stop workers and the ORM, then Postgres.
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ msg: 'shutting down', signal });
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    try {
      await app.close();
      await postgres?.stop();
      log.info({ msg: 'stopped' });
      process.exit(0);
    } catch (error) {
      log.error({ msg: 'shutdown failed', err: error });
      process.exit(1);
    }
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch((error: unknown) => {
  log.fatal({ msg: 'start failed', err: error });
  process.exit(1);
});
