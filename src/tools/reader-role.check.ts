import { Injectable, OnModuleInit } from '@nestjs/common';
import { DataPool } from '../database/data-pool';
import { checkReaderRole } from './read-only-data';

/** Refuses to start when the data tools' SELECT-only role cannot be used (see checkReaderRole). */
@Injectable()
export class ReaderRoleCheck implements OnModuleInit {
  constructor(private readonly pool: DataPool) {}

  onModuleInit(): Promise<void> {
    return checkReaderRole(this.pool);
  }
}
