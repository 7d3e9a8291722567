import { MigrationAccessPolicies } from './migration-20261125-access-policies';
import { MigrationAgentBuiltins } from './migration-20261130-agent-builtins';
import { MigrationRecordHistory } from './migration-20261201-record-history';
import { MigrationUserPrincipals } from './migration-20261202-user-principals';
import { MigrationRelatedFields } from './migration-20261205-related-fields';
import { MigrationFormulaFields } from './migration-20261203-formula-fields';
import { MigrationPrincipalOwners } from './migration-20261206-principal-owners';
import { MigrationSystemJobs } from './migration-20261209-system-jobs';
import { MigrationSchedules } from './migration-20261207-schedules';
import { MigrationLinksFields } from './migration-20261208-links-fields';
import { MigrationPendingDeliveries } from './migration-20261210-pending-deliveries';
import { MigrationTrashLinks } from './migration-20261211-trash-links';
import { MigrationLinkChanges } from './migration-20261212-link-changes';
import { MigrationLinksReader } from './migration-20261213-links-reader';
import { MigrationWebhooks } from './migration-20261204-webhooks';
import { MigrationAgentGrounding } from './migration-20261126-agent-grounding';
import { MigrationApprovals } from './migration-20261129-approvals';
import { MigrationAgents } from './migration-20261122-agents';
import { MigrationApiKeyLastUsed } from './migration-20261122-api-key-last-used';
import { MigrationChatClaims } from './migration-20261122-chat-claims';
import { MigrationChatClientIds } from './migration-20261124-chat-client-ids';
import { MigrationChatInFlight } from './migration-20261123-chat-in-flight';
import { MigrationChangeSequencer } from './migration-20261129-change-sequencer';
import { MigrationChats } from './migration-20261122-chats';
import { MigrationImportJobs } from './migration-20261127-import-jobs';
import { MigrationInitial } from './migration-20261122-initial';
import { MigrationJobCancel } from './migration-20261129-job-cancel';
import { MigrationKeysetIndexes } from './migration-20261128-keyset-indexes';
import { MigrationMetricDefinitions } from './migration-20261126-metric-definitions';
import { MigrationRecordChanges } from './migration-20261127-record-changes';
import { MigrationChatAdmission } from './migration-20261128-chat-admission';
import { MigrationStreamTokens } from './migration-20261124-stream-tokens';
import { MigrationViewOwnerKeys } from './migration-20261129-view-owner-keys';
import { MigrationTurnCallers } from './migration-20261129-turn-callers';
import { MigrationUniqueEmptyIndexes } from './migration-20261129-unique-empty-indexes';
import { MigrationChatEvents } from './migration-20261129-chat-events';
import { MigrationApprovalScopes } from './migration-20261129-approval-scopes';
import { MigrationMcpConfirmations } from './migration-20261129-mcp-confirmations';
import { MigrationMcpConfirmationCalls } from './migration-20261129-mcp-confirmation-calls';
import { MigrationViewsSearch } from './migration-20261127-views-search';
import { MigrationUsageAudit } from './migration-20261126-usage-audit';

/** Every migration, in order. Applied on start; committed with the code that needs it. */
export const MIGRATIONS = [
  MigrationInitial,
  MigrationAgents,
  MigrationChats,
  MigrationChatClaims,
  MigrationApiKeyLastUsed,
  MigrationChatInFlight,
  MigrationStreamTokens,
  MigrationChatClientIds,
  MigrationAccessPolicies,
  MigrationUsageAudit,
  MigrationAgentGrounding,
  MigrationMetricDefinitions,
  MigrationImportJobs,
  MigrationViewsSearch,
  MigrationRecordChanges,
  MigrationChatAdmission,
  MigrationKeysetIndexes,
  MigrationTurnCallers,
  MigrationViewOwnerKeys,
  MigrationJobCancel,
  MigrationUniqueEmptyIndexes,
  MigrationApprovals,
  MigrationChangeSequencer,
  MigrationChatEvents,
  MigrationApprovalScopes,
  MigrationMcpConfirmations,
  MigrationMcpConfirmationCalls,
  MigrationAgentBuiltins,
  MigrationRecordHistory,
  MigrationUserPrincipals,
  MigrationFormulaFields,
  MigrationWebhooks,
  MigrationRelatedFields,
  MigrationPrincipalOwners,
  MigrationSchedules,
  MigrationLinksFields,
  MigrationSystemJobs,
  MigrationPendingDeliveries,
  MigrationTrashLinks,
  MigrationLinkChanges,
  MigrationLinksReader,
];

/** What mikro_orm_migrations records for each of MIGRATIONS once applied: its `name` (read from an instance). */
export function migrationNames(): string[] {
  return MIGRATIONS.map((Migration) => new Migration(undefined as never, undefined as never).name);
}
