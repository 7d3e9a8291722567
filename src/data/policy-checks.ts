import { Injectable } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { SqlParams } from '../database/sql-params';
import { readsOtherRecords, whereFieldNames } from '../metadata/computed-fields';
import { AccessPolicyService } from '../governance/access-policy.service';
import { compileWhere, requireField } from './where.compiler';

/** Hands governance the data engine's checks of a policy's row filters and hidden fields. */
@Injectable()
export class PolicyChecksRegistration {
  constructor(policies: AccessPolicyService) {
    policies.useChecks({
      rowFilter: (object, where) => {
        // A row filter is read beneath every caller's view: a field computed from other records has no view there.
        for (const name of whereFieldNames(where)) {
          const field = object.fields.find((f) => f.name === name);
          if (field && readsOtherRecords(object, field)) {
            throw new DomainError('invalid_policy', `A row filter cannot name "${name}": it is computed from other records`, {
              field: name,
            });
          }
        }
        compileWhere(object, where, new SqlParams(), { placeholders: 'validate' });
      },
      field: (object, name) => void requireField(object, name),
    });
  }
}
