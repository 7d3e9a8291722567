import { ApiProperty } from '@nestjs/swagger';

export class HealthResponse {
  @ApiProperty({ enum: ['ok'] }) status: 'ok';
}

/** Each check of GET /health/ready; a 503 carries the same object in `details.checks`. */
export class ReadinessChecks {
  @ApiProperty({ enum: ['ok', 'unreachable'], description: 'The database answered within 3 s' })
  database: 'ok' | 'unreachable';

  @ApiProperty({
    enum: ['ok', 'pending', 'unknown'],
    description: 'Every migration of this build is applied (`unknown` while the database is unreachable)',
  })
  migrations: 'ok' | 'pending' | 'unknown';

  @ApiProperty({
    enum: ['ok', 'stopped', 'disabled'],
    description: 'The durable chat worker runs (`disabled` with CHAT_WORKER_ENABLED=false, `stopped` while shutting down)',
  })
  worker: 'ok' | 'stopped' | 'disabled';

  @ApiProperty({
    enum: ['ok', 'stopped', 'unreachable'],
    description:
      'The job queue (webhook deliveries): `ok` when its workers run and its tables answer, `stopped` while shutting down, `unreachable` when its tables do not answer',
  })
  jobQueue: 'ok' | 'stopped' | 'unreachable';

  @ApiProperty({
    enum: ['ok', 'lagging', 'down', 'disabled'],
    description:
      'The read replica (DATABASE_READ_URL) at its last lag check: `lagging` above READ_MAX_LAG_MS, `down` when unreachable; ' +
      'reads then go to the primary, so neither makes the app not ready (`disabled` without a read replica)',
  })
  readReplica: 'ok' | 'lagging' | 'down' | 'disabled';
}

export class ReadinessResponse {
  @ApiProperty({ enum: ['ok'] }) status: 'ok';
  @ApiProperty({ type: ReadinessChecks }) checks: ReadinessChecks;
  @ApiProperty({
    required: false,
    nullable: true,
    type: Number,
    description: 'With a read replica: its replay lag at the last check, milliseconds (0: caught up; null: unknown, down)',
  })
  readReplicaLagMs?: number | null;
}
