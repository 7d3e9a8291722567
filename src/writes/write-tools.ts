import type { WriteOperation } from '../agents/agent.types';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import type { DataService } from '../data/data.service';
import type { ChangeSetService } from '../history/change-sets.service';
import { etagOf } from '../data/record-version';
import { requireField } from '../data/where.compiler';
import type { AccessService } from '../governance/access.service';
import type { ObjectMeta } from '../metadata/object-metadata.types';
import { callerOf, OBJECT_NAME_PARAM, shapeErrors, WHERE_PARAM } from '../tools/data-tools/data-tool.support';
import { defineTool } from '../tools/tool.define';
import type { JsonSchema, ProposedChange, ToolContext, ToolDefinition, WriteProposal } from '../tools/tool.types';
import type { ApprovalTokens } from './approval-tokens';

/** Most records one update_records proposal may change (one approval, one transaction). */
export const MAX_RECORDS_PER_PROPOSAL = 100;

/**
 * Most bytes of JSON one proposal's changes may hold: a proposal is shown and approved whole, and a client of
 * the OpenAI-compatible API sends it back whole (within the 2 MB request limit) to approve or reject it.
 */
export const MAX_PROPOSAL_BYTES = 512 * 1024;

export const WRITE_TOOL_NAMES = [
  'create_record',
  'update_record',
  'delete_record',
  'update_records',
  'revert_change_set',
] as const;
export type WriteToolName = (typeof WRITE_TOOL_NAMES)[number];

/**
 * The operation each write tool proposes. A revert writes records back to earlier values: offered with
 * `update`, and proposed only when the agent may also make every other operation the revert needs.
 */
export const WRITE_TOOL_OPERATION: Record<WriteToolName, WriteOperation> = {
  create_record: 'create',
  update_record: 'update',
  delete_record: 'delete',
  update_records: 'update',
  revert_change_set: 'update',
};

export interface WriteToolDeps {
  data: DataService;
  changeSets: ChangeSetService;
  access: AccessService;
  tokens: ApprovalTokens;
  /** Seconds a proposal waits for its approval (APPROVAL_TTL_S). */
  ttlSeconds: number;
}

export interface CreateRecordArgs {
  objectName: string;
  values: Record<string, unknown>;
}
export interface UpdateRecordArgs {
  objectName: string;
  recordId: string;
  values: Record<string, unknown>;
}
export interface DeleteRecordArgs {
  objectName: string;
  recordId: string;
}
export interface RevertChangeSetArgs {
  changeSetId: string;
}
export interface UpdateRecordsArgs {
  objectName: string;
  where?: Record<string, unknown>;
  ids?: string[];
  values: Record<string, unknown>;
}

const APPROVAL_NOTE =
  'Nothing is written when you call it: the call becomes a proposal that a person approves or rejects, and the ' +
  "chat waits for that decision. You then read the outcome as this call's result: written, rejected (with the " +
  "person's reason, if any), expired, or version_changed (the record changed since you proposed; nothing was " +
  'written; the result holds the current values, so propose again if the change still makes sense).';

const VALUES_PARAM: JsonSchema = {
  type: 'object',
  description:
    'Field values by field name (see describe_object), e.g. {"stage": "won", "amount": 12000}. Dates as "YYYY-MM-DD", ' +
    'date-times as ISO 8601, lookup fields as the id of the referenced record.',
  minProperties: 1,
  additionalProperties: true,
};

const RECORD_ID_PARAM: JsonSchema = { type: 'string', description: 'The record id (a UUID), e.g. from query_records.' };

/** The write tools. Each only proposes: see ApprovedWrites for what happens on approval. */
export function createWriteTools(deps: WriteToolDeps): ToolDefinition<never>[] {
  const tools = [
    defineTool<CreateRecordArgs>({
      name: 'create_record',
      description: `Propose creating one record of an object with the given field values. ${APPROVAL_NOTE}`,
      parameters: {
        type: 'object',
        properties: { objectName: OBJECT_NAME_PARAM, values: VALUES_PARAM },
        required: ['objectName', 'values'],
        additionalProperties: false,
      },
      scope: 'platform',
      needsApproval: true,
      holds: 'proposal',
      execute: (args, ctx) =>
        propose(deps, ctx, 'create_record', args, (object) => {
          checkValues(object, args.values);
          return Promise.resolve([{ id: null, etag: null, before: null, after: { ...args.values } }]);
        }),
    }),
    defineTool<UpdateRecordArgs>({
      name: 'update_record',
      description:
        'Propose changing some fields of one record; only the fields you give change. Read the record first ' +
        `(get_record) so that you propose from its current values. ${APPROVAL_NOTE}`,
      parameters: {
        type: 'object',
        properties: { objectName: OBJECT_NAME_PARAM, recordId: RECORD_ID_PARAM, values: VALUES_PARAM },
        required: ['objectName', 'recordId', 'values'],
        additionalProperties: false,
      },
      scope: 'platform',
      needsApproval: true,
      holds: 'proposal',
      execute: (args, ctx) =>
        propose(deps, ctx, 'update_record', args, async (object) => {
          checkValues(object, args.values);
          const { record, version } = await deps.data.findOneVersioned(callerOf(ctx), object.name, args.recordId, undefined, {
            fresh: true,
            signal: ctx.signal,
          });
          const change = diff(record, version, args.values);
          if (!change) throw nothingChanges();
          return [change];
        }),
    }),
    defineTool<DeleteRecordArgs>({
      name: 'delete_record',
      description: `Propose deleting one record. ${APPROVAL_NOTE}`,
      parameters: {
        type: 'object',
        properties: { objectName: OBJECT_NAME_PARAM, recordId: RECORD_ID_PARAM },
        required: ['objectName', 'recordId'],
        additionalProperties: false,
      },
      scope: 'platform',
      needsApproval: true,
      holds: 'proposal',
      execute: (args, ctx) =>
        propose(deps, ctx, 'delete_record', args, async (object) => {
          const { record, version } = await deps.data.findOneVersioned(callerOf(ctx), object.name, args.recordId, undefined, {
            fresh: true,
            signal: ctx.signal,
          });
          return [{ id: String(record.id), etag: etagOf(version), before: record, after: null }];
        }),
    }),
    defineTool<UpdateRecordsArgs>({
      name: 'update_records',
      description:
        `Propose setting the same field values on up to ${MAX_RECORDS_PER_PROPOSAL} records at once, chosen by a filter ` +
        '(where) or by their ids (give exactly one of the two). On approval all of them change in one transaction, or ' +
        `none does. More than ${MAX_RECORDS_PER_PROPOSAL} matching records is refused: narrow the filter. ${APPROVAL_NOTE}`,
      parameters: {
        type: 'object',
        properties: {
          objectName: OBJECT_NAME_PARAM,
          where: WHERE_PARAM,
          ids: {
            type: 'array',
            description: 'The ids of the records to change.',
            items: { type: 'string' },
            minItems: 1,
            maxItems: MAX_RECORDS_PER_PROPOSAL,
            uniqueItems: true,
          },
          values: VALUES_PARAM,
        },
        required: ['objectName', 'values'],
        additionalProperties: false,
      },
      scope: 'platform',
      needsApproval: true,
      holds: 'proposal',
      execute: (args, ctx) =>
        propose(deps, ctx, 'update_records', args, async (object) => {
          if ((args.where === undefined) === (args.ids === undefined)) {
            throw new DomainError('invalid_arguments', 'Give exactly one of where (a filter) or ids (a list of record ids)');
          }
          checkValues(object, args.values);
          const caller = callerOf(ctx);
          const where = args.ids ? { id: { $in: args.ids } } : args.where;
          const found = await deps.data.find(
            caller,
            object.name,
            {
              where,
              fields: ['id'],
              orderBy: [{ field: 'id', order: 'asc' }],
              limit: MAX_RECORDS_PER_PROPOSAL + 1,
              offset: 0,
              total: 'none',
            },
            { fresh: true, signal: ctx.signal },
          );
          if (found.records.length > MAX_RECORDS_PER_PROPOSAL) {
            throw new DomainError(
              'too_many_records',
              `More than ${MAX_RECORDS_PER_PROPOSAL} records match; one proposal changes at most ${MAX_RECORDS_PER_PROPOSAL}. Narrow the filter.`,
              { max: MAX_RECORDS_PER_PROPOSAL },
            );
          }
          const ids = found.records.map((record) => String(record.id));
          if (args.ids) {
            const missing = args.ids.filter((id) => !ids.includes(id));
            if (missing.length) {
              throw new DomainError(
                'record_not_found',
                `No "${object.name}" record has the id ${missing.slice(0, 10).join(', ')}`,
                {
                  missing: missing.slice(0, 100),
                },
              );
            }
          }
          if (!ids.length) throw new DomainError('record_not_found', `No "${object.name}" record matches the filter`);
          const changes: ProposedChange[] = [];
          for (const id of ids) {
            const { record, version } = await deps.data.findOneVersioned(caller, object.name, id, undefined, {
              fresh: true,
              signal: ctx.signal,
            });
            const change = diff(record, version, args.values);
            if (change) changes.push(change);
          }
          if (!changes.length) throw nothingChanges();
          return changes;
        }),
    }),
    defineTool<RevertChangeSetArgs>({
      name: 'revert_change_set',
      description:
        'Propose undoing a whole change set: every record it created goes to the trash, every record it deleted comes ' +
        'back, every field it updated takes its value from before. A write you made after an approval names its ' +
        'change set (changeSetId in the result); record_history names the change set of each version. All or nothing: ' +
        'if a record of the set changed since, nothing is reverted and the result lists each field with the value ' +
        `expected and the value now. ${APPROVAL_NOTE}`,
      parameters: {
        type: 'object',
        properties: { changeSetId: { type: 'string', description: 'The change set id (a UUID).' } },
        required: ['changeSetId'],
        additionalProperties: false,
      },
      scope: 'platform',
      needsApproval: true,
      holds: 'proposal',
      execute: async (args, ctx) => {
        const preview = await shapeErrors(ctx, () => deps.changeSets.preview(callerOf(ctx), args.changeSetId, ctx.signal));
        return propose(deps, ctx, 'revert_change_set', args, () => Promise.resolve(preview.changes), {
          objectName: preview.objectName,
          operations: preview.operations,
          revertOf: args.changeSetId,
        });
      },
    }),
  ];
  return tools;
}

/**
 * A proposal of `tool`: allowed by the agent's `writes`, granted to the caller (the same check as the
 * records API), the changes worked out from the records as they are now, and signed. Nothing is written.
 */
async function propose(
  deps: WriteToolDeps,
  ctx: ToolContext,
  tool: WriteToolName,
  args: object,
  changes: (object: ObjectMeta) => Promise<ProposedChange[]>,
  revert?: { objectName: string; operations: readonly WriteOperation[]; revertOf: string },
): Promise<WriteProposal> {
  return shapeErrors(ctx, async () => {
    const objectName = revert?.objectName ?? (args as { objectName: string }).objectName;
    const operation = WRITE_TOOL_OPERATION[tool];
    const { agent, approvalScope, toolCallId } = ctx;
    if (!agent || !approvalScope || !toolCallId) {
      throw new DomainError('tool_not_allowed', `Tool "${tool}" proposes writes only where a person can approve them`);
    }
    for (const needed of revert?.operations ?? [operation]) {
      if (!(agent.writes?.[objectName] ?? []).includes(needed)) {
        throw new DomainError(
          'write_not_allowed',
          `Agent "${agent.name}" may not propose to ${needed} "${objectName.slice(0, 100)}" records`,
          { object: objectName.slice(0, 100), operation: needed, writes: agent.writes ?? {} },
        );
      }
    }
    // The caller's view for the operation: an object it may not read is not found, an operation it is not granted forbidden.
    for (const needed of revert?.operations ?? []) await deps.access.view(callerOf(ctx), objectName, needed);
    const object = await deps.access.view(callerOf(ctx), objectName, operation);
    const proposed = await changes(object);
    const bytes = Buffer.byteLength(JSON.stringify(proposed), 'utf8');
    if (bytes > MAX_PROPOSAL_BYTES) {
      throw new DomainError(
        'proposal_too_large',
        `This change is too large to propose at once (${Math.ceil(bytes / 1024)} KB of values before and after; at most ` +
          `${MAX_PROPOSAL_BYTES / 1024} KB): propose it for fewer records at a time, or with shorter values.`,
        { bytes, maxBytes: MAX_PROPOSAL_BYTES },
      );
    }
    const expiresAt = new Date(Date.now() + deps.ttlSeconds * 1000);
    const signed: Omit<WriteProposal, 'token' | 'expiresAt'> = { objectName: object.name, operation, changes: proposed };
    if (revert) signed.revertOf = revert.revertOf;
    const token = deps.tokens.sign({ scope: approvalScope, toolCallId, tool, arguments: args, proposal: signed }, expiresAt);
    return { ...signed, token, expiresAt: expiresAt.toISOString() };
  });
}

/** Every value names a field the caller may write; system fields (id, created_at, updated_at) are the server's. */
function checkValues(object: ObjectMeta, values: Record<string, unknown>): void {
  if (!isPlainObject(values)) throw new DomainError('invalid_arguments', 'values must be an object of field values');
  for (const name of Object.keys(values)) {
    const field = requireField(object, name);
    if (field.system) throw new DomainError('read_only_field', `Field "${name}" is set by the server`, { field: name });
  }
}

/** Only the fields whose value changes, before and after; undefined when none does. */
function diff(record: Record<string, unknown>, version: string, values: Record<string, unknown>): ProposedChange | undefined {
  const before: Record<string, unknown> = {};
  const after: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(values)) {
    if (JSON.stringify(record[name] ?? null) === JSON.stringify(value ?? null)) continue;
    before[name] = record[name] ?? null;
    after[name] = value;
  }
  if (!Object.keys(after).length) return undefined;
  return { id: String(record.id), etag: etagOf(version), before, after };
}

function nothingChanges(): DomainError {
  return new DomainError('invalid_arguments', 'The values you gave are what the record already holds: nothing would change');
}
