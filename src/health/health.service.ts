import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { DomainError } from '../common/domain-error';

@Injectable()
export class HealthService {
  constructor(private readonly em: EntityManager) {}

  /** ok once the database answers (migrations ran before the server started listening). */
  async check(): Promise<{ status: 'ok' }> {
    try {
      await this.em.fork().execute('select 1');
    } catch {
      throw new DomainError('database_unavailable', 'The database is not reachable');
    }
    return { status: 'ok' };
  }
}
