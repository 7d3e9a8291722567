import { Controller, Get } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { EntityManager } from '@mikro-orm/postgresql';
import { Public } from '../auth/auth.decorators';
import { DomainError } from '../common/domain-error';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(private readonly em: EntityManager) {}

  /** 200 once the database answers (migrations ran before the server started listening). */
  @Get()
  @Public()
  async health(): Promise<{ status: 'ok' }> {
    try {
      await this.em.fork().execute('select 1');
    } catch {
      throw new DomainError('database_unavailable', 'The database is not reachable');
    }
    return { status: 'ok' };
  }
}
