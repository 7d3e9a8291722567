import { Injectable, Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { MIGRATIONS } from '../database/migrations';
import type { HealthResponse } from './health.dto';
import { HealthRepository } from './health.repository';

@Injectable()
export class HealthService {
  private readonly logger = new Logger(HealthService.name);

  constructor(private readonly repo: HealthRepository) {}

  /** ok when the database answers and holds every migration of this build. */
  async check(): Promise<HealthResponse> {
    let applied: number;
    try {
      applied = await this.repo.appliedMigrations();
    } catch (error) {
      // The 503 itself is logged as a failed request; this adds the cause, for whoever looks closer.
      this.logger.debug({ msg: 'health check failed', error: error instanceof Error ? error.message : String(error) });
      throw new DomainError('database_unavailable', 'The database is not reachable');
    }
    // Migrations are only ever added, so a newer replica's extra ones still count as migrated.
    if (applied < MIGRATIONS.length) {
      throw new DomainError('database_unavailable', 'The database is not migrated');
    }
    return { status: 'ok' };
  }
}
