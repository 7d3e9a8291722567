import { Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AgentService } from '../agents/agent.service';
import { ApiKeyService } from '../auth/api-key.service';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { projectRoot } from '../common/project-root';
import { DATABASE_URL } from '../database/database.constants';
import { ADVISORY_LOCK, withSessionLock } from '../database/advisory-locks';
import { DataPool } from '../database/data-pool';
import { DataService } from '../data/data.service';
import { SYSTEM_CALLER } from '../governance/access.service';
import { CreateObjectDto } from '../metadata/metadata.dto';
import { MetadataService } from '../metadata/metadata.service';
import { DomainError } from '../common/domain-error';
import { CreateMetricDto } from '../metrics/metric.dto';
import { MetricService } from '../metrics/metric.service';
import { generateCrmSample } from './crm-sample.data';

const INSERT_BATCH = 500;

/**
 * Start-up data: the admin key, then (SEED=true) the sample objects of seeds/ with their records and the
 * sample metrics, then the built-in agents.
 * Never overwrites: an object that exists is left alone, and records go only into objects created now.
 */
@Injectable()
export class SeedService implements OnApplicationBootstrap {
  private readonly logger = new Logger(SeedService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(DATABASE_URL) private readonly databaseUrl: string,
    private readonly keys: ApiKeyService,
    private readonly agents: AgentService,
    private readonly metadata: MetadataService,
    private readonly data: DataService,
    private readonly pool: DataPool,
    private readonly metrics: MetricService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await withSessionLock(this.databaseUrl, ADVISORY_LOCK.startup, async () => {
      await this.keys.ensureAdminKey();
      if (this.config.seed) {
        await this.seedObjects();
        await this.seedMetrics();
      }
      // Built-in agents exist even with SEED=false: the API promises data_chat.
      await this.agents.ensureBuiltIns();
    });
  }

  /** The sample metrics: each one only if no metric has its name, and only if its objects' fields fit it. */
  private async seedMetrics(): Promise<void> {
    const file = join(projectRoot(), 'seeds', 'metrics', 'metrics.json');
    const { metrics } = JSON.parse(await readFile(file, 'utf8')) as { metrics: CreateMetricDto[] };
    const existing = new Set((await this.metrics.list(SYSTEM_CALLER)).metrics.map((m) => m.name));
    for (const metric of metrics) {
      if (existing.has(metric.name)) continue;
      try {
        await this.metrics.create(metric);
      } catch (error) {
        // Objects changed by an admin (a field gone): the sample metric does not fit them; everything else starts.
        if (!(error instanceof DomainError) || !['invalid_metric', 'metric_exists'].includes(error.code)) throw error;
        this.logger.warn({ msg: 'sample metric not created', metric: metric.name, reason: error.message });
      }
    }
  }

  private async seedObjects(): Promise<void> {
    const dir = join(projectRoot(), 'seeds', 'objects');
    const manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as { objects: string[] };
    const existing = new Set((await this.metadata.listObjects()).map((o) => o.name));
    const created: string[] = [];
    for (const name of manifest.objects) {
      if (existing.has(name)) continue;
      const definition = JSON.parse(await readFile(join(dir, `${name}.json`), 'utf8')) as CreateObjectDto;
      await this.metadata.createObject(definition);
      created.push(name);
    }
    if (!created.length) return;
    if (created.length !== manifest.objects.length) {
      // Sample records link across all sample objects; with some of them pre-existing they cannot load cleanly.
      this.logger.warn({ msg: 'created sample objects without records: other sample objects already existed', objects: created });
      return;
    }
    const started = Date.now();
    const sample = generateCrmSample();
    await this.pool.transaction(async (session) => {
      for (const { name, records } of sample.objects) {
        for (let i = 0; i < records.length; i += INSERT_BATCH) {
          await this.data.insertMany(SYSTEM_CALLER, name, records.slice(i, i + INSERT_BATCH), { session });
        }
        this.logger.log({ msg: 'seeded records', object: name, count: records.length });
      }
    });
    this.logger.log({ msg: 'sample data loaded', durationMs: Date.now() - started });
  }
}
