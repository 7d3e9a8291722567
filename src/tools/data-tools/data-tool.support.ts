import type { Caller } from '../../auth/caller';
import { DomainError } from '../../common/domain-error';
import type { DataPool, DataSession } from '../../database/data-pool';
import type { DataService } from '../../data/data.service';
import type { AccessService } from '../../governance/access.service';
import type { CallerAccess } from '../../governance/caller-access';
import type { HistoryService } from '../../history/history.service';
import type { MetadataService } from '../../metadata/metadata.service';
import type { ViewableQuery, ViewService } from '../../views/view.service';
import { mayUseObject } from '../tool.middlewares';
import { withReadOnlyData } from '../read-only-data';
import type { JsonSchema, ToolContext } from '../tool.types';

/** What the data tools need; built once by ToolsModule. */
export interface DataToolDeps {
  data: DataService;
  metadata: MetadataService;
  /** What the caller may see: objects and fields outside it are absent from every tool's answer. */
  access: AccessService;
  /** The data engine's pool; each record-reading call runs in a READ ONLY transaction of its own there. */
  pool: DataPool;
  /** Saved views, which query_records and aggregate_data apply by name. */
  views: ViewService;
  /** Record history (record_history), read as the caller. */
  history: HistoryService;
}

/** The `view` parameter of query_records and aggregate_data. */
export const VIEW_PARAM = {
  type: 'string',
  maxLength: 63,
  description:
    'Name of a saved view of this object, e.g. the view the user is looking at (named in the context). ' +
    "Applies the view's filter (your where is ANDed with it), so the answer covers exactly the rows of that view.",
} as const;

/**
 * `query` with the saved view `viewName` applied (ViewService.apply), resolved as the caller; no view:
 * the query as it is.
 */
export async function withView<Q extends ViewableQuery>(
  deps: DataToolDeps,
  ctx: ToolContext,
  objectName: string,
  viewName: string | undefined,
  query: Q,
): Promise<Q> {
  if (viewName === undefined) return query;
  return shapeErrors(ctx, () => deps.views.apply(callerOf(ctx), objectName, viewName, query));
}

/** The most field names an unknown_field error lists, so one typo does not flood the context. */
export const MAX_LISTED_FIELDS = 40;

/** The caller a data tool runs as; a call without one (no key behind it) reads nothing. */
export function callerOf(ctx: ToolContext): Caller {
  if (!ctx.caller) throw new DomainError('unauthorized', 'Data tools run as an API key; this call has none');
  return ctx.caller;
}

/** What the caller may see (objects, fields). */
export function accessOf(deps: DataToolDeps, ctx: ToolContext): Promise<CallerAccess> {
  return deps.access.forCaller(callerOf(ctx));
}

/**
 * Runs `fn` in a READ ONLY transaction (statement timeout, cancelled with the call's signal), and
 * shapes engine errors for the model.
 */
export async function readData<T>(deps: DataToolDeps, ctx: ToolContext, fn: (session: DataSession) => Promise<T>): Promise<T> {
  return shapeErrors(ctx, () =>
    withReadOnlyData(deps.pool, { signal: ctx.signal, background: ctx.background, key: ctx.caller?.keyId }, fn),
  );
}

/** Shapes errors for the model: field lists capped, object lists limited to what the agent may use. */
export async function shapeErrors<T>(ctx: ToolContext, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw error instanceof DomainError ? refineError(error, ctx) : error;
  }
}

function refineError(error: DomainError, ctx: ToolContext): DomainError {
  const details = (error.details ?? {}) as Record<string, unknown>;
  if (error.code === 'unknown_field' && Array.isArray(details.availableFields)) {
    const all = details.availableFields as string[];
    const shown = all.slice(0, MAX_LISTED_FIELDS);
    const more = all.length - shown.length;
    const message =
      `${error.message}. Available fields: ${shown.join(', ')}${more > 0 ? ` (and ${more} more)` : ''}. ` +
      'Call describe_object to see every field with its type.';
    return new DomainError(error.code, message, {
      ...details,
      availableFields: shown,
      ...(more > 0 ? { moreFields: more } : {}),
    });
  }
  if (error.code === 'object_not_found' && Array.isArray(details.availableObjects)) {
    const agent = ctx.agent;
    const available = (details.availableObjects as string[]).filter((name) => !agent || mayUseObject(agent.allowedObjects, name));
    return new DomainError(
      error.code,
      `${error.message}. Available objects: ${available.join(', ') || 'none'}. Call list_objects to see them.`,
      {
        ...details,
        availableObjects: available,
      },
    );
  }
  return error;
}

// ---------------------------------------------------------------------------------------------
// Schema fragments shared by the tools (what the model reads).

export const OBJECT_NAME_PARAM: JsonSchema = {
  type: 'string',
  description: 'API name of the object, e.g. "deal", as returned by list_objects.',
};

export const WHERE_PARAM: JsonSchema = {
  type: 'object',
  description:
    'Filter. Keys are field names (see describe_object); a plain value means equality. ' +
    'Field operators: $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $between ([low, high], inclusive), ' +
    '$contains, $notContains, $startsWith, $endsWith (case-insensitive text matching), $null (true = empty, false = set). ' +
    'Combine with $and: [...], $or: [...], $not: {...}; several keys in one object are ANDed. ' +
    'Dates as "YYYY-MM-DD", date-times as ISO 8601. Lookup fields hold the id of the referenced record. ' +
    'Examples: {"stage": "won"}; {"amount": {"$gte": 10000}, "close_date": {"$between": ["2025-01-01", "2025-03-31"]}}; ' +
    '{"$or": [{"stage": "won"}, {"stage": {"$in": ["proposal", "negotiation"]}}]}; {"name": {"$contains": "acme"}}.',
  additionalProperties: true,
};

export const FIELDS_PARAM: JsonSchema = {
  type: 'array',
  description:
    'Field names to return (id is always included). Omit to get every field; ask only for what you need to keep results small.',
  items: { type: 'string' },
  maxItems: 100,
};

export const SORT_ORDER_PARAM: JsonSchema = { type: 'string', enum: ['asc', 'desc'], description: 'Default "asc".' };
