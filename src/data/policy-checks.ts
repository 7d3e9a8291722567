import { Injectable } from '@nestjs/common';
import { SqlParams } from '../database/sql-params';
import { AccessPolicyService } from '../governance/access-policy.service';
import { compileWhere, requireField } from './where.compiler';

/** Hands governance the data engine's checks of a policy's row filters and hidden fields. */
@Injectable()
export class PolicyChecksRegistration {
  constructor(policies: AccessPolicyService) {
    policies.useChecks({
      rowFilter: (object, where) => void compileWhere(object, where, new SqlParams(), { placeholders: 'validate' }),
      field: (object, name) => void requireField(object, name),
    });
  }
}
