import { Module } from '@nestjs/common';
import { AuditLog } from './audit-log.service';
import { AuditRepository } from './audit.repository';

/**
 * The audit trail (`audit_log`): admin changes, written by the service that makes them in its own
 * transaction, and tool calls, written in batches. Below auth and metadata, whose writes it records;
 * its read route (GET /audit) is governance's.
 */
@Module({
  providers: [AuditLog, AuditRepository],
  exports: [AuditLog],
})
export class AuditModule {}
