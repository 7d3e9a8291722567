import fc from 'fast-check';
import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import { ERRORS } from '../../src/common/error-codes';
import type { ErrorBody } from '../../src/common/http-exception.filter';
import { FIELD_TYPES } from '../../src/metadata/object-metadata.types';
import type { ToolListResponse } from '../../src/tools/tools.dto';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import type { DeliveriesResponse } from '../../src/webhooks/webhook.dto';
import { eventually, hasStatus, waitForChat } from '../support/chat-helpers';
import {
  aggregationsArb,
  brokenJsonText,
  clientToolSchema,
  fieldName,
  fieldValue,
  FuzzField,
  identifier,
  nastyString,
  nastyValue,
  objectFrom,
  objectOf,
  oneIn,
  orderByArb,
  percentEncode,
  shaped,
  validAggregateArb,
  validFieldArb,
  validWhereArb,
  ShapeHints,
  toJsonText,
  whereArb,
  wildString,
} from '../support/fuzz-arbitraries';
import { DynamicStep, MockLlmServer, MockReply } from '../support/mock-llm.server';
import { BodyRoute, documentedBodyRoutes, JsonSchema } from '../support/openapi-routes';
import { bodyOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';

/** FUZZ_SEED and FUZZ_RUNS explore further by hand (FUZZ_REPORT=1 prints the answers per route); the suite runs the defaults. */
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_123);
const TOTAL_RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const ERROR_CODE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;

/** In the order they run: records and chats first, then the routes that change the metadata the others use. */
const TARGETS = [
  'GET /api/v1/objects/{name}/records',
  'POST /api/v1/objects/{name}/records',
  'PATCH /api/v1/objects/{name}/records/{id}',
  'POST /api/v1/objects/{name}/records/batch',
  'POST /api/v1/objects/{name}/import',
  'POST /api/v1/objects/{name}/aggregate',
  'POST /api/v1/objects/{name}/views',
  'PUT /api/v1/objects/{name}/views/{view}',
  'POST /api/v1/ai/tools/{name}/execute',
  'POST /api/v1/ai/agents/{agentName}/chat',
  'POST /api/v1/chats',
  'POST /api/v1/chats/{id}/messages',
  'POST /api/v1/chats/{id}/tool-results',
  'POST /api/v1/chats/{id}/approvals',
  'POST /api/v1/chats/{id}/interrupt',
  'POST /api/v1/chats/{id}/receipts/replay',
  'POST /api/v1/ai/agents/{agentName}/chats',
  'POST /api/v1/ai/agents/{agentName}/chats/{id}/receipts/replay',
  'POST /api/v1/stream-tokens',
  'POST /api/v1/api-keys',
  'POST /api/v1/ai/agents',
  'PUT /api/v1/ai/agents/{name}',
  'POST /api/v1/objects',
  'PATCH /api/v1/objects/{name}',
  'POST /api/v1/objects/{name}/fields',
  'PATCH /api/v1/objects/{name}/fields/{field}',
  'POST /api/v1/policies',
  'PUT /api/v1/policies/{name}',
  'POST /api/v1/metrics',
  'PUT /api/v1/metrics/{name}',
  'PATCH /api/v1/api-keys/{id}',
  'POST /api/v1/objects/{name}/records/{id}/restore',
  'POST /api/v1/objects/{name}/trash/{id}/restore',
  'POST /api/v1/change-sets/{id}/revert',
  'PUT /api/v1/identity/mapping',
  'POST /api/v1/identity/revocations',
  'PATCH /api/v1/identity/users/{id}',
  'POST /api/v1/webhooks',
  'PATCH /api/v1/webhooks/{id}',
  'POST /api/v1/webhooks/{id}/deliveries/{deliveryId}/redeliver',
  'POST /api/v1/schedules',
  'PATCH /api/v1/schedules/{id}',
  'POST /api/v1/schedules/{id}/run',
] as const;
type Target = (typeof TARGETS)[number];

/**
 * Routes no generated request may get through: a decision on a write proposal needs the single-use token of a
 * proposal waiting in the chat, which nothing generated can forge (approvals.e2e-spec covers its success path); a
 * replay needs a data result stored in the chat, which these chats have none of (figure-references.e2e-spec).
 */
const NEVER_ACCEPTED: ReadonlySet<Target> = new Set([
  // This app trusts no identity provider: there is no issuer to revoke a user of, and no user to change.
  'POST /api/v1/identity/revocations',
  'PATCH /api/v1/identity/users/{id}',
  'POST /api/v1/chats/{id}/approvals',
  'POST /api/v1/chats/{id}/receipts/replay',
  'POST /api/v1/ai/agents/{agentName}/chats/{id}/receipts/replay',
]);

/**
 * Webhook URLs: a closed port on the loopback (deliveries fail at once, never leave the machine; the fuzzed app
 * allows private addresses for it), and URLs that are refused.
 */
const WEBHOOK_URLS = [
  'http://127.0.0.1:9/fuzz',
  'http://[::1]:9/fuzz',
  'ftp://127.0.0.1/x',
  'not a url',
  'http://u:p@127.0.0.1:9/',
];

/** An even share of the total for each target; the first ones take the remainder. */
const runsOf = (index: number) => Math.floor(TOTAL_RUNS / TARGETS.length) + (index < TOTAL_RUNS % TARGETS.length ? 1 : 0);

/** Stands for the id of the chat's pending client tool call, filled in just before the request is sent. */
const PENDING_CALL = '<pending-call-id>';
const CLIENT_TOOL = 'fuzz_client_tool';

type Role = 'admin' | 'member';
interface FuzzRequest {
  role: Role;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH';
  url: string;
  /** A value for toJsonText; undefined sends no body. */
  body?: unknown;
  /** Sent as is with Content-Type text/csv instead of a JSON body (CSV imports). */
  csv?: string;
}

/** What the requests refer to: set up once, before the fuzzing. */
interface World {
  keys: Record<Role, string>;
  objects: Record<string, FuzzField[]>;
  recordIds: Record<string, string[]>;
  tools: Array<{ name: string; parameters: JsonSchema }>;
  agents: string[];
  chats: Record<Role, { talk: string; action: string }>;
  /** A member key no other target uses, for PATCH /api-keys (its policies change what it sees). */
  spareKeyId: string;
  /** History: a record and its versions, records in the trash, change sets nothing else touches (revertable once). */
  restorable: string;
  versions: string[];
  trashed: Record<string, string[]>;
  changeSets: string[];
  /** A webhook (of the admin key) on fuzz_parent and one of its deliveries, failed (its receiver refuses connections). */
  webhookId: string;
  deliveryId: string;
  /** A schedule of the admin key: an hourly question to fuzz_agent, delivered to the webhook. */
  scheduleId: string;
}

const ITEM_FIELDS = [
  { name: 'title', label: 'Title', type: 'text', searchable: true },
  { name: 'code', label: 'Code', type: 'text', unique: true },
  { name: 'notes', label: 'Notes', type: 'textarea' },
  { name: 'email', label: 'Email', type: 'email' },
  { name: 'site', label: 'Site', type: 'url' },
  { name: 'phone', label: 'Phone', type: 'phone' },
  { name: 'qty', label: 'Quantity', type: 'integer', indexed: true },
  { name: 'amount', label: 'Amount', type: 'number' },
  { name: 'price', label: 'Price', type: 'currency' },
  { name: 'ratio', label: 'Ratio', type: 'percent' },
  { name: 'done', label: 'Done', type: 'boolean' },
  { name: 'due', label: 'Due', type: 'date' },
  { name: 'at', label: 'At', type: 'datetime' },
  { name: 'stage', label: 'Stage', type: 'select', options: ['new', 'open', 'won'] },
  { name: 'tags', label: 'Tags', type: 'multiselect', options: ['red', 'green', 'blue'] },
  { name: 'meta', label: 'Meta', type: 'json' },
  { name: 'parent', label: 'Parent', type: 'lookup', reference: 'fuzz_parent' },
];

const pick = <T>(values: readonly T[]) => fc.constantFrom(...values);

/** Path values that name nothing (never long: they go into the URL). */
const strangePathValue = fc.oneof(wildString, fc.constantFrom('', 'nope', '..', '%'));

/** A URL from literal parts and path values (the odd arguments), each value percent-encoded. */
const url = (...segments: string[]) => segments.map((s, i) => (i % 2 ? percentEncode(s) : s)).join('');

/**
 * Requests over the path values of a route: one arbitrary per value, built once (building arbitraries
 * while generating, as `chain` does, makes generation slower than the requests), and now and then a
 * path value that names nothing, with the first value's body.
 */
function overValues<T>(values: readonly string[], build: (value: fc.Arbitrary<string>, known: string) => fc.Arbitrary<T>) {
  return fc.oneof(
    { weight: 9, arbitrary: fc.oneof(...values.map((value) => build(fc.constant(value), value))) },
    { weight: 1, arbitrary: build(strangePathValue, values[0]) },
  );
}

/** A body the route should accept (once in three), or one from its schema. */
const validOr = (valid: fc.Arbitrary<unknown>, other: fc.Arbitrary<unknown>) =>
  fc.oneof({ weight: 1, arbitrary: valid }, { weight: 2, arbitrary: other });

/**
 * A body shaped by the route's schema: half of them right in every value (they should pass the DTO
 * checks), the others wrong here and there or everywhere; now and then not JSON at all.
 */
const bodyFor = (schema: JsonSchema | undefined, hints: ShapeHints = {}) =>
  fc.oneof(
    { weight: 8, arbitrary: shaped(schema, { hints, wrongWeight: 0 }) },
    { weight: 5, arbitrary: shaped(schema, { hints, wrongWeight: 1 }) },
    { weight: 2, arbitrary: shaped(schema, { hints, wrongWeight: 3 }) },
    { weight: 1, arbitrary: brokenJsonText },
  );

function generators(world: World, routes: Map<Target, BodyRoute>): Record<Target, fc.Arbitrary<FuzzRequest>> {
  const schemaOf = (target: Target) => routes.get(target)?.schema;
  const objectNames = Object.keys(world.objects);
  const itemFields = world.objects.fuzz_item;
  const allIds = Object.values(world.recordIds).flat();
  const names = fieldName(itemFields);
  const toolNames = [...world.tools.map((t) => t.name), 'ask_user', 'nope'];

  /** A request of a route whose path does not depend on the key: admin keys reach everything, member keys check the role guard. */
  const request = (method: FuzzRequest['method'], path: fc.Arbitrary<string>, body?: fc.Arbitrary<unknown>) =>
    fc.record({
      role: pick<Role>(['admin', 'admin', 'member']),
      method: fc.constant(method),
      url: path,
      ...(body ? { body } : {}),
    }) as fc.Arbitrary<FuzzRequest>;
  /** The same for a path that depends on the key (a chat is its owner's): one arbitrary per key. */
  const requestAs = (
    method: FuzzRequest['method'],
    build: (role: Role) => { path: fc.Arbitrary<string>; body?: fc.Arbitrary<unknown> },
  ) =>
    fc.oneof(
      ...(['admin', 'admin', 'member'] as const).map((role) => {
        const { path, body } = build(role);
        return fc.record({
          role: fc.constant(role),
          method: fc.constant(method),
          url: path,
          ...(body ? { body } : {}),
        });
      }),
    );

  const dataHints: ShapeHints = {
    objectName: fc.oneof({ weight: 9, arbitrary: pick(objectNames) }, { weight: 1, arbitrary: strangePathValue }),
    where: fc.oneof(
      { weight: 3, arbitrary: validWhereArb(itemFields, allIds) },
      { weight: 2, arbitrary: whereArb(itemFields, allIds) },
    ),
    fields: fc.array(names, { maxLength: 4 }),
    orderBy: orderByArb(fc.oneof(names, identifier)),
    groupBy: fc.array(names, { maxLength: 4 }),
    aggregations: aggregationsArb(itemFields),
    recordId: fc.oneof(pick(allIds), fc.uuid(), nastyString),
  };
  const agentHints: ShapeHints = {
    name: fc.oneof(fc.stringMatching(/^[a-z][a-z0-9_-]{0,20}$/), pick(world.agents)),
    tools: fc.array(pick(toolNames), { maxLength: 4 }),
    allowedObjects: fc.array(fc.oneof(pick([...objectNames, '*', 'nope']), nastyString), { maxLength: 3 }),
  };
  const metadataHints: ShapeHints = {
    name: identifier,
    reference: fc.oneof(pick(objectNames), identifier),
    options: fc.array(fc.oneof(fc.string({ maxLength: 8 }), nastyString), { maxLength: 5 }),
  };
  /**
   * `expression` and `resultType` are for formula fields only (the world has none): left out of most PATCH
   * bodies, or nearly none would be accepted; still sent, and refused, in the others.
   */
  const rarely = (arbitrary: fc.Arbitrary<unknown>) =>
    fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary });
  const fieldPatchHints: ShapeHints = {
    ...metadataHints,
    expression: rarely(fc.oneof(fc.string({ maxLength: 20 }), nastyString)),
    resultType: rarely(fc.constantFrom('number', 'text', 'date', 'nope')),
  };
  /** Webhook bodies: URLs of every kind (only IP literals: no DNS), the objects and events there are and some there are not. */
  const webhookHints: ShapeHints = {
    url: pick(WEBHOOK_URLS),
    objects: fc.subarray(['fuzz_item', 'fuzz_parent', 'nope']),
    events: fc.subarray(['create', 'update', 'delete', 'insert']),
    where: fc.oneof(whereArb(itemFields, allIds), fc.constant(null)),
    status: pick(['active', 'disabled', 'nope']),
  };
  /** Schedule bodies: timings, zones, agents, targets and conditions that exist and some that do not. */
  const scheduleAction = fc.oneof(
    fc.record(
      { type: fc.constant('question'), agent: pick([...world.agents, 'nope']), message: fc.string({ maxLength: 40 }) },
      { requiredKeys: ['type'] },
    ),
    fc.record(
      {
        type: fc.constant('metric_alert'),
        metric: pick(['nope', 'fuzz_metric']),
        groupBy: fc.subarray(['title', 'nope']),
        where: whereArb(itemFields, allIds),
        condition: fc.record({ op: pick(['>', '<=', 'change_pct_gt', '!=']), value: fc.double(), period: pick(['day', 'year']) }),
      },
      { requiredKeys: ['type'] },
    ),
  );
  const scheduleHints: ShapeHints = {
    every: pick(['15m', '1h', '1d', '30s', '0m', 'soon']),
    cron: pick(['0 9 * * 1-5', '*/5 * * * *', '61 * * * *', '0 0 9 * * 1', 'nope']),
    timezone: pick(['UTC', 'Europe/Paris', 'Mars/Olympus', '']),
    action: scheduleAction,
    deliver: fc.array(
      fc.oneof(
        fc.record({ webhook: pick([world.webhookId, '00000000-0000-4000-8000-000000000000', 'nope']) }),
        fc.record({ email: pick(['ops@example.com', 'nope', '']) }),
      ),
      { maxLength: 3 },
    ),
    status: pick(['active', 'disabled', 'nope']),
  };
  const contextHints: ShapeHints = { objectName: fc.oneof(pick(objectNames), identifier) };
  const validField = validFieldArb(FIELD_TYPES, objectNames);
  /** A grant of a policy: sometimes naming fields the object lacks, placeholders the key lacks, operators that do not fit. */
  const policyGrant = fc.record(
    {
      read: fc.boolean(),
      create: fc.boolean(),
      update: fc.boolean(),
      delete: fc.boolean(),
      rowFilter: fc.constantFrom(
        { title: '$subject' },
        { qty: { $gt: '$attr.level' } },
        { title: { $in: ['$attr.region', 'x'] } },
        { $or: [{ title: '$subject' }, { qty: { $null: true } }] },
        { nope: 1 },
      ),
      hiddenFields: fc.subarray(['title', 'qty', 'code', 'nope']),
    },
    { requiredKeys: [] },
  );
  const validPolicy = (named: boolean) =>
    fc.record(
      {
        ...(named ? { name: fc.stringMatching(/^[a-z][a-z0-9_-]{2,20}$/) } : {}),
        description: fc.string({ maxLength: 40 }),
        objects: fc.dictionary(pick(['fuzz_item', 'fuzz_parent', '*', 'nope']), policyGrant, { maxKeys: 3 }),
      },
      { requiredKeys: named ? ['name', 'objects'] : ['objects'] },
    );
  const policyBody = (method: 'POST' | 'PUT') =>
    bodyFor(schemaOf(method === 'POST' ? 'POST /api/v1/policies' : 'PUT /api/v1/policies/{name}'), {
      name: fc.oneof(fc.stringMatching(/^[a-z][a-z0-9_-]{0,20}$/), nastyString),
    });
  /** A simple metric over fuzz_item that fits its fields (the schema-shaped bodies try everything else). */
  const validMetric = (named: boolean) =>
    fc.record(
      {
        ...(named ? { name: fc.stringMatching(/^[a-z][a-z0-9_]{2,20}$/) } : {}),
        label: fc.string({ minLength: 1, maxLength: 20 }),
        object: fc.constant('fuzz_item'),
        type: fc.constant('simple'),
        measure: fc.oneof(
          fc.constant({ function: 'count' }),
          fc.record({ function: pick(['sum', 'avg', 'min', 'max', 'count_distinct']), field: pick(['qty', 'amount', 'price']) }),
        ),
        filter: validWhereArb(itemFields, allIds),
        timeField: pick(['due', 'at', 'created_at']),
        dimensions: fc.subarray(['stage', 'title', 'qty', 'done', 'parent.title']),
        synonyms: fc.array(fc.string({ minLength: 1, maxLength: 20 }), { maxLength: 3 }),
      },
      { requiredKeys: named ? ['name', 'label', 'object', 'type', 'measure'] : ['label', 'object', 'type', 'measure'] },
    );
  /** A saved view of fuzz_item that fits its fields (the schema-shaped bodies try everything else). */
  const validView = (named: boolean) =>
    fc.record(
      {
        ...(named ? { name: fc.stringMatching(/^[a-z][a-z0-9_]{2,20}$/) } : {}),
        label: fc.string({ minLength: 1, maxLength: 20 }),
        description: fc.string({ maxLength: 40 }),
        where: validWhereArb(itemFields, allIds),
        orderBy: fc.uniqueArray(fc.record({ field: pick(['title', 'qty', 'due', 'stage']), order: pick(['asc', 'desc']) }), {
          maxLength: 2,
          selector: (o: { field: string }) => o.field,
        }),
        fields: fc.subarray(itemNames),
        groupBy: fc.subarray(['stage', 'qty', 'done'], { maxLength: 3 }),
        shared: fc.boolean(),
      },
      { requiredKeys: named ? ['name', 'label'] : ['label'] },
    );
  const viewBody = (method: 'POST' | 'PUT') =>
    bodyFor(schemaOf(method === 'POST' ? 'POST /api/v1/objects/{name}/views' : 'PUT /api/v1/objects/{name}/views/{view}'), {
      name: fc.oneof(fc.stringMatching(/^[a-z][a-z0-9_]{0,20}$/), nastyString),
    });
  const metricBody = (method: 'POST' | 'PUT') =>
    bodyFor(schemaOf(method === 'POST' ? 'POST /api/v1/metrics' : 'PUT /api/v1/metrics/{name}'), {
      name: fc.oneof(fc.stringMatching(/^[a-z][a-z0-9_]{0,20}$/), nastyString),
    });
  const validAgent = fc.record(
    {
      name: fc.stringMatching(/^[a-z][a-z0-9_-]{2,20}$/),
      label: fc.string({ minLength: 1, maxLength: 20 }),
      instructions: fc.string({ minLength: 1, maxLength: 200 }),
      tools: fc.subarray(world.tools.map((t) => t.name)),
      allowedObjects: fc.oneof(fc.constant(['*']), fc.subarray(objectNames)),
      planning: fc.record({ maxIterations: fc.integer({ min: 1, max: 50 }) }),
      active: fc.boolean(),
    },
    { requiredKeys: ['name', 'label', 'instructions'] },
  );
  const itemNames = itemFields.map((f) => f.name);
  /** Arguments each tool should accept, on the sample objects. */
  const validArguments: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
    list_objects: fc.constant({}),
    describe_object: pick(objectNames).map((objectName) => ({ objectName })),
    get_record: fc.record(
      { objectName: pick(objectNames), recordId: pick(allIds), fields: fc.subarray(itemNames) },
      { requiredKeys: ['objectName', 'recordId'] },
    ),
    query_records: fc.record(
      {
        objectName: fc.constant('fuzz_item'),
        where: validWhereArb(itemFields, allIds),
        fields: fc.subarray(itemNames),
        orderBy: fc.array(fc.record({ field: pick(itemNames), order: pick(['asc', 'desc']) }), { maxLength: 2 }),
        limit: fc.integer({ min: 1, max: 200 }),
        offset: fc.nat({ max: 5 }),
      },
      { requiredKeys: ['objectName'] },
    ),
    aggregate_data: validAggregateArb(itemFields, allIds).map((query) => ({ ...query, objectName: 'fuzz_item', limit: 10 })),
    list_metrics: fc.constant({}),
    query_metric: fc.record(
      {
        metrics: fc.constant(['fuzz_metric']),
        groupBy: fc.subarray(['stage', 'parent.title', 'qty']),
        timeGrain: pick(['day', 'week', 'month', 'quarter', 'year']),
        from: pick(['2024-01-01', '2025-06-30']),
        to: pick(['2025-12-31', '2024-02-29']),
        where: fc.oneof(fc.constant({ stage: 'won' }), fc.constant({ 'parent.title': { $contains: 'p' } })),
        orderBy: fc.array(fc.record({ field: pick(['fuzz_metric', 'stage', 'period']), order: pick(['asc', 'desc']) }), {
          maxLength: 2,
        }),
        limit: fc.integer({ min: 1, max: 200 }),
      },
      { requiredKeys: ['metrics'] },
    ),
  };

  const messages = fc.oneof(
    {
      weight: 3,
      arbitrary: fc.array(fc.record({ role: pick(['user', 'assistant']), content: fc.string({ minLength: 1 }) }), {
        minLength: 1,
        maxLength: 3,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.array(
        fc.oneof(
          {
            weight: 5,
            arbitrary: fc.record(
              {
                role: pick(['user', 'assistant', 'system', 'tool', 'x']),
                content: fc.oneof(fc.string(), nastyString, nastyValue),
              },
              { requiredKeys: [] },
            ),
          },
          { weight: 1, arbitrary: nastyValue },
        ),
        { maxLength: 4 },
      ),
    },
  );
  const dynamicTools = fc.array(
    fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record(
          {
            name: fc.oneof(fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_-]{0,20}$/), pick([CLIENT_TOOL, 'query_records', 'ask_user'])),
            description: nastyString,
            inputSchema: clientToolSchema,
          },
          { requiredKeys: ['name'] },
        ),
      },
      {
        weight: 1,
        arbitrary: fc.record(
          { type: pick(['custom', 'function', 'other']), name: fc.stringMatching(/^[a-z]{1,10}$/), description: nastyString },
          { requiredKeys: ['name'] },
        ),
      },
      { weight: 1, arbitrary: nastyValue },
    ),
    { maxLength: 4 },
  );
  const validChat = fc.record(
    {
      agent: pick(world.agents),
      message: fc.string({ minLength: 1, maxLength: 200 }),
      title: fc.string({ maxLength: 40 }),
      context: fc.record(
        { objectName: pick(objectNames), recordId: fc.uuid(), viewName: fc.string({ maxLength: 20 }) },
        { requiredKeys: [] },
      ),
      dynamicTools: fc.uniqueArray(
        fc.record({
          name: fc.stringMatching(/^[a-z][a-z0-9_]{2,12}$/),
          description: fc.string({ maxLength: 40 }),
          inputSchema: clientToolSchema,
        }),
        { maxLength: 3, selector: (tool) => tool.name },
      ),
    },
    { requiredKeys: ['agent', 'message'] },
  );
  const chatHints: ShapeHints = { agent: fc.oneof(pick(world.agents), nastyString), dynamicTools, ...contextHints };

  /** AI SDK chat ids: short, so that some repeat and reach a chat that exists (waiting, or waiting for its client tool). */
  const clientChatId = fc.stringMatching(/^[A-Za-z0-9_-]{1,3}$/);
  const uiUserMessage = (text: fc.Arbitrary<unknown>) =>
    fc.record({
      id: fc.stringMatching(/^[A-Za-z0-9]{1,16}$/),
      role: fc.constant('user'),
      parts: fc.tuple(fc.record({ type: fc.constant('text'), text })),
    });
  /** An assistant UI message with tool parts: outputs of client tool calls, or parts that cannot be. */
  const uiToolOutputs = fc.record(
    {
      id: fc.stringMatching(/^[A-Za-z0-9]{1,16}$/),
      role: pick(['assistant', 'user', 'system']),
      parts: fc.array(
        fc.oneof(
          fc.constant({ type: 'step-start' }),
          fc.record(
            {
              type: pick([`tool-${CLIENT_TOOL}`, 'dynamic-tool', 'tool-', 'tool-a b', 'text']),
              toolName: fc.oneof(pick([CLIENT_TOOL, 'query_records']), nastyString),
              toolCallId: fc.oneof(fc.stringMatching(/^call_[a-z0-9]{1,8}$/), nastyString),
              state: pick(['output-available', 'output-error', 'input-available', 'x']),
              input: nastyValue,
              output: nastyValue,
              errorText: fc.oneof(nastyString, nastyValue),
              text: fc.oneof(fc.string(), nastyValue),
            },
            { requiredKeys: ['type'] },
          ),
          nastyValue,
        ),
        { maxLength: 4 },
      ),
    },
    { requiredKeys: [] },
  );
  const uiMessages = fc.array(
    fc.oneof(
      { weight: 3, arbitrary: uiUserMessage(fc.oneof(fc.string({ minLength: 1 }), nastyString, nastyValue)) },
      { weight: 2, arbitrary: uiToolOutputs },
      { weight: 1, arbitrary: nastyValue },
    ),
    { maxLength: 3 },
  );
  const validUiChat = fc.record(
    {
      id: clientChatId,
      trigger: fc.constant('submit-message'),
      messages: fc.tuple(uiUserMessage(fc.string({ minLength: 1, maxLength: 200 }))),
      messageId: fc.stringMatching(/^[A-Za-z0-9]{1,16}$/),
      context: validChat.map((chat) => chat.context ?? {}),
      dynamicTools: fc.oneof(
        validChat.map((chat) => chat.dynamicTools ?? []),
        fc.constant([{ name: CLIENT_TOOL, inputSchema: { type: 'object', properties: {} } }]),
      ),
    },
    { requiredKeys: ['id', 'trigger', 'messages'] },
  );

  /** A record body for one object: some of its fields with right (or also wrong) values, now and then more keys. */
  const recordBody = (object: string) => {
    const fields = world.objects[object];
    const known = (hostile: boolean) =>
      fc.record(Object.fromEntries(fields.map((f) => [f.name, fieldValue(f, allIds, hostile)])), { requiredKeys: [] });
    const withExtras = fc
      .tuple(known(true), oneIn(3, objectOf(fieldName(fields), nastyValue, 3)))
      .map(([value, more]) => objectFrom([...Object.entries(value), ...Object.entries(more ?? {})]));
    return fc.oneof(
      { weight: 6, arbitrary: known(false) },
      { weight: 6, arbitrary: withExtras },
      { weight: 2, arbitrary: nastyValue },
      { weight: 1, arbitrary: brokenJsonText },
    );
  };
  const recordBodies = Object.fromEntries(objectNames.map((name) => [name, recordBody(name)]));

  /** A records query: where, orderBy, fields, limit and offset as a client would send them, and worse. */
  const jsonParam = (value: fc.Arbitrary<unknown>) =>
    fc.oneof(
      { weight: 6, arbitrary: value.map(toJsonText) },
      { weight: 2, arbitrary: nastyString },
      { weight: 1, arbitrary: brokenJsonText.map((r) => r.text) },
    );
  const numberParam = fc.oneof(
    { weight: 4, arbitrary: fc.nat({ max: 60 }).map(String) },
    { weight: 1, arbitrary: fc.nat().map(String) },
    { weight: 1, arbitrary: pick(['-1', '0', '1e3', ' 5', '', '1.5', 'abc', '99999999999999999999999', '0x10']) },
  );
  const query = (object: string) => {
    const fields = world.objects[object];
    const fieldNames = fieldName(fields);
    return fc
      .tuple(
        fc.record(
          {
            where: jsonParam(
              fc.oneof(
                { weight: 3, arbitrary: validWhereArb(fields, allIds) },
                { weight: 2, arbitrary: whereArb(fields, allIds) },
              ),
            ),
            orderBy: jsonParam(
              fc.oneof(
                fc.array(fc.record({ field: pick(fields.map((f) => f.name)), order: pick(['asc', 'desc']) }), { maxLength: 3 }),
                orderByArb(fieldNames),
              ),
            ),
            fields: fc.oneof(
              { weight: 4, arbitrary: fc.array(fieldNames, { maxLength: 4 }).map((list) => list.join(',')) },
              { weight: 1, arbitrary: nastyString },
            ),
            limit: numberParam,
            offset: numberParam,
            view: fc.oneof(pick(['fuzz_view', 'nope']), nastyString),
            q: fc.oneof(fc.string({ maxLength: 10 }), nastyString),
          },
          { requiredKeys: [] },
        ),
        // Parameters that repeat, nest, or do not decode.
        oneIn(
          6,
          pick([
            'where=%',
            'where=%ZZ',
            'limit=%ED%A0%80',
            'where=%00',
            'where=a&where=b',
            'orderBy[]=x',
            'where[a]=1',
            '__proto__=1',
            'constructor=x',
            'fields=',
          ]),
        ),
      )
      .map(([params, raw]) =>
        [...Object.entries(params).map(([k, v]) => `${k}=${percentEncode(v)}`), ...(raw ? [raw] : [])].join('&'),
      );
  };

  const executeSchema = schemaOf('POST /api/v1/ai/tools/{name}/execute');
  return {
    'GET /api/v1/objects/{name}/records': overValues(objectNames, (name, known) =>
      request(
        'GET',
        fc.tuple(name, query(known)).map(([n, q]) => `${url('/api/v1/objects/', n, '/records')}?${q}`),
      ),
    ),
    'POST /api/v1/objects/{name}/records': overValues(objectNames, (name, known) =>
      request(
        'POST',
        name.map((n) => url('/api/v1/objects/', n, '/records')),
        recordBodies[known],
      ),
    ),
    'PATCH /api/v1/objects/{name}/records/{id}': fc.oneof(
      ...objectNames.map((name) =>
        request(
          'PATCH',
          fc
            .oneof(
              { weight: 6, arbitrary: pick(world.recordIds[name]) },
              { weight: 1, arbitrary: fc.uuid() },
              { weight: 1, arbitrary: strangePathValue },
            )
            .map((id) => url('/api/v1/objects/', name, '/records/', id)),
          recordBodies[name],
        ),
      ),
    ),
    'POST /api/v1/objects/{name}/records/batch': overValues(objectNames, (name, known) => {
      const id = fc.oneof(
        { weight: 6, arbitrary: pick(world.recordIds[known]) },
        { weight: 1, arbitrary: fc.uuid() },
        { weight: 1, arbitrary: nastyString },
      );
      const operation = fc.oneof(
        fc.record({ op: fc.constant('create'), record: recordBodies[known] }),
        fc.record(
          { op: fc.constant('update'), id, record: recordBodies[known], ifMatch: fc.constant('"1"') },
          { requiredKeys: ['op', 'id', 'record'] },
        ),
        fc.record({ op: fc.constant('delete'), id }),
        nastyValue,
      );
      return request(
        'POST',
        name.map((n) => url('/api/v1/objects/', n, '/records/batch')),
        validOr(
          fc.record(
            { operations: fc.array(operation, { minLength: 1, maxLength: 6 }), atomic: fc.boolean() },
            { requiredKeys: ['operations'] },
          ),
          bodyFor(schemaOf('POST /api/v1/objects/{name}/records/batch'), dataHints),
        ),
      );
    }),
    'POST /api/v1/objects/{name}/records/{id}/restore': request(
      'POST',
      fc
        .oneof({ weight: 6, arbitrary: fc.constant(world.restorable) }, { weight: 1, arbitrary: strangePathValue })
        .map((id) => url('/api/v1/objects/', 'fuzz_parent', '/records/', id, '/restore')),
      validOr(
        fc.record({ version: fc.oneof(pick(world.versions), fc.constantFrom('1', '999999999')) }),
        bodyFor(schemaOf('POST /api/v1/objects/{name}/records/{id}/restore')),
      ),
    ),
    'POST /api/v1/objects/{name}/trash/{id}/restore': fc.oneof(
      ...objectNames.map((name) =>
        request(
          'POST',
          fc
            .oneof(
              { weight: 4, arbitrary: pick([...world.trashed[name], ...world.recordIds[name]]) },
              { weight: 1, arbitrary: fc.uuid() },
              { weight: 1, arbitrary: strangePathValue },
            )
            .map((id) => url('/api/v1/objects/', name, '/trash/', id, '/restore')),
          // The route takes no body: none, or anything.
          oneIn(2, fc.oneof(nastyValue, brokenJsonText)),
        ),
      ),
    ),
    'POST /api/v1/change-sets/{id}/revert': request(
      'POST',
      fc
        .oneof(
          { weight: 4, arbitrary: pick(world.changeSets) },
          { weight: 1, arbitrary: fc.uuid() },
          { weight: 1, arbitrary: strangePathValue },
        )
        .map((id) => url('/api/v1/change-sets/', id, '/revert')),
      oneIn(2, fc.oneof(nastyValue, brokenJsonText)),
    ),
    'PUT /api/v1/identity/mapping': request(
      'PUT',
      fc.constant('/api/v1/identity/mapping'),
      validOr(
        fc.record(
          {
            subject: fc.constantFrom('sub', 'email', 'https://example.com/claims/user'),
            attributes: fc.dictionary(fc.constantFrom('region', 'team'), fc.constantFrom('region', 'org.team')),
            role: fc.record({ admin: fc.array(fc.constantFrom('admins', 'ops'), { maxLength: 2 }) }),
            policies: fc.dictionary(fc.constantFrom('sales', 'support'), fc.constant(['fuzz-policy'])),
            claim: fc.constantFrom('groups', 'roles'),
          },
          { requiredKeys: [] },
        ),
        bodyFor(schemaOf('PUT /api/v1/identity/mapping')),
      ),
    ),
    'POST /api/v1/identity/revocations': request(
      'POST',
      fc.constant('/api/v1/identity/revocations'),
      bodyFor(schemaOf('POST /api/v1/identity/revocations')),
    ),
    'POST /api/v1/webhooks': request(
      'POST',
      fc.constant('/api/v1/webhooks'),
      validOr(
        fc.record(
          {
            url: pick(WEBHOOK_URLS.slice(0, 2)),
            objects: fc.subarray(['fuzz_item', 'fuzz_parent']),
            events: fc.subarray(['create', 'update', 'delete']),
            where: whereArb(itemFields, allIds),
            description: fc.string({ maxLength: 40 }),
          },
          { requiredKeys: ['url', 'objects', 'events'] },
        ),
        bodyFor(schemaOf('POST /api/v1/webhooks'), webhookHints),
      ),
    ),
    'POST /api/v1/schedules': request(
      'POST',
      fc.constant('/api/v1/schedules'),
      validOr(
        fc.record(
          {
            name: fc.string({ minLength: 1, maxLength: 40 }),
            every: scheduleHints.every,
            timezone: scheduleHints.timezone,
            action: scheduleAction,
            deliver: scheduleHints.deliver,
          },
          { requiredKeys: ['name', 'action', 'deliver'] },
        ),
        bodyFor(schemaOf('POST /api/v1/schedules'), scheduleHints),
      ),
    ),
    'PATCH /api/v1/schedules/{id}': overValues([world.scheduleId], (id) =>
      request(
        'PATCH',
        id.map((i) => url('/api/v1/schedules/', i)),
        bodyFor(schemaOf('PATCH /api/v1/schedules/{id}'), scheduleHints),
      ),
    ),
    'POST /api/v1/schedules/{id}/run': overValues([world.scheduleId], (id) =>
      request(
        'POST',
        id.map((i) => url('/api/v1/schedules/', i, '/run')),
        // The route takes no body: none, or anything.
        oneIn(2, fc.oneof(nastyValue, brokenJsonText)),
      ),
    ),
    'PATCH /api/v1/webhooks/{id}': overValues([world.webhookId], (id) =>
      request(
        'PATCH',
        id.map((i) => url('/api/v1/webhooks/', i)),
        bodyFor(schemaOf('PATCH /api/v1/webhooks/{id}'), webhookHints),
      ),
    ),
    'POST /api/v1/webhooks/{id}/deliveries/{deliveryId}/redeliver': overValues([world.deliveryId], (delivery) =>
      request(
        'POST',
        delivery.map((d) => url('/api/v1/webhooks/', world.webhookId, '/deliveries/', d, '/redeliver')),
        oneIn(2, fc.oneof(nastyValue, brokenJsonText)),
      ),
    ),
    'PATCH /api/v1/identity/users/{id}': request(
      'PATCH',
      fc.oneof(fc.uuid(), strangePathValue).map((id) => url('/api/v1/identity/users/', id)),
      bodyFor(schemaOf('PATCH /api/v1/identity/users/{id}')),
    ),
    'POST /api/v1/objects/{name}/import': overValues(objectNames, (name, known) => {
      const fields = world.objects[known];
      const columns = [...fields.map((f) => f.name), 'id', 'created_at', 'Title', 'QUANTITY', 'nope'];
      const cell = fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom('', '1', '-2.5', 'true', 'no', 'red;blue', '["red"]', '2026-01-31', '{"a":1}') },
        { weight: 3, arbitrary: nastyString },
        { weight: 1, arbitrary: fc.uuid() },
      );
      const quote = (text: string) => (/[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text);
      const table = fc
        .tuple(
          fc.uniqueArray(pick(columns), { minLength: 1, maxLength: 5 }),
          fc.array(fc.array(cell, { maxLength: 6 }), { maxLength: 5 }),
        )
        .map(([header, rows]) => [header, ...rows].map((row) => row.map(quote).join(',')).join('\r\n'));
      const query = fc
        .record(
          {
            dryRun: fc.constantFrom('true', 'true', 'false', 'maybe'),
            atomic: fc.constantFrom('true', 'false', '1'),
            mapping: fc.oneof(
              fc
                .dictionary(pick(columns), pick([...fields.map((f) => f.name), 'nope']), { maxKeys: 3 })
                .map((m) => JSON.stringify(m)),
              nastyString,
            ),
          },
          { requiredKeys: [] },
        )
        .map((params) => {
          const search = Object.entries(params).map(([key, value]) => `${key}=${percentEncode(value)}`);
          return search.length ? `?${search.join('&')}` : '';
        });
      return fc.record({
        role: pick<Role>(['admin', 'admin', 'member']),
        method: fc.constant('POST' as const),
        url: fc.tuple(name, query).map(([n, q]) => url('/api/v1/objects/', n, '/import') + q),
        csv: fc.oneof({ weight: 5, arbitrary: table }, { weight: 1, arbitrary: nastyString }),
      });
    }),
    'POST /api/v1/objects/{name}/aggregate': overValues(objectNames, (name, known) =>
      request(
        'POST',
        name.map((n) => url('/api/v1/objects/', n, '/aggregate')),
        validOr(
          validAggregateArb(world.objects[known], allIds),
          bodyFor(schemaOf('POST /api/v1/objects/{name}/aggregate'), dataHints),
        ),
      ),
    ),
    'POST /api/v1/ai/tools/{name}/execute': overValues(toolNames, (name, known) => {
      const parameters = world.tools.find((t) => t.name === known)?.parameters;
      // The tool's own JSON Schema in place of the DTO's "any object" for arguments.
      const schema =
        executeSchema && parameters
          ? { ...executeSchema, properties: { ...executeSchema.properties, arguments: parameters } }
          : executeSchema;
      const valid = validArguments[known] ?? fc.constant({});
      return request(
        'POST',
        name.map((n) => url('/api/v1/ai/tools/', n, '/execute')),
        validOr(
          valid.map((args) => ({ arguments: args })),
          bodyFor(schema, dataHints),
        ),
      );
    }),
    'POST /api/v1/ai/agents/{agentName}/chat': request(
      'POST',
      fc
        .oneof({ weight: 9, arbitrary: pick(world.agents) }, { weight: 1, arbitrary: strangePathValue })
        .map((n) => url('/api/v1/ai/agents/', n, '/chat')),
      bodyFor(schemaOf('POST /api/v1/ai/agents/{agentName}/chat'), { messages, ...contextHints }),
    ),
    'POST /api/v1/chats': request(
      'POST',
      fc.constant('/api/v1/chats'),
      validOr(validChat, bodyFor(schemaOf('POST /api/v1/chats'), chatHints)),
    ),
    'POST /api/v1/chats/{id}/messages': requestAs('POST', (role) => ({
      // Mostly the key's own chat; sometimes the other key's, which must be as unknown as a missing one.
      path: fc
        .oneof(
          { weight: 6, arbitrary: fc.constant(world.chats[role].talk) },
          { weight: 2, arbitrary: fc.constant(world.chats[role === 'admin' ? 'member' : 'admin'].talk) },
          { weight: 1, arbitrary: strangePathValue },
        )
        .map((id) => url('/api/v1/chats/', id, '/messages')),
      body: bodyFor(schemaOf('POST /api/v1/chats/{id}/messages')),
    })),
    'POST /api/v1/chats/{id}/tool-results': requestAs('POST', (role) => ({
      path: fc
        .oneof({ weight: 9, arbitrary: fc.constant(world.chats[role].action) }, { weight: 1, arbitrary: strangePathValue })
        .map((id) => url('/api/v1/chats/', id, '/tool-results')),
      body: validOr(
        fc.record({
          results: fc.tuple(
            fc.record(
              { toolCallId: fc.constant(PENDING_CALL), output: nastyValue, isError: fc.boolean() },
              { requiredKeys: ['toolCallId', 'output'] },
            ),
          ),
        }),
        bodyFor(schemaOf('POST /api/v1/chats/{id}/tool-results'), {
          toolCallId: fc.oneof({ weight: 4, arbitrary: fc.constant(PENDING_CALL) }, { weight: 1, arbitrary: nastyString }),
          output: nastyValue,
        }),
      ),
    })),
    'POST /api/v1/chats/{id}/approvals': requestAs('POST', (role) => ({
      // No proposal waits in these chats: every well-formed decision is refused, and nothing else may fail worse.
      path: fc
        .oneof(
          { weight: 9, arbitrary: pick([world.chats[role].talk, world.chats[role].action]) },
          { weight: 1, arbitrary: strangePathValue },
        )
        .map((id) => url('/api/v1/chats/', id, '/approvals')),
      body: bodyFor(schemaOf('POST /api/v1/chats/{id}/approvals')),
    })),
    'POST /api/v1/chats/{id}/interrupt': requestAs('POST', (role) => ({
      path: fc
        .oneof(
          { weight: 9, arbitrary: pick([world.chats[role].talk, world.chats[role].action]) },
          { weight: 1, arbitrary: strangePathValue },
        )
        .map((id) => url('/api/v1/chats/', id, '/interrupt')),
      // The route takes no body: none, or anything.
      body: oneIn(2, fc.oneof(nastyValue, brokenJsonText)),
    })),
    'POST /api/v1/chats/{id}/receipts/replay': requestAs('POST', (role) => ({
      // These chats hold no data result: every well-formed call id is not found, and nothing may fail worse.
      path: fc
        .oneof(
          { weight: 9, arbitrary: pick([world.chats[role].talk, world.chats[role].action]) },
          { weight: 1, arbitrary: strangePathValue },
        )
        .map((id) => url('/api/v1/chats/', id, '/receipts/replay')),
      body: bodyFor(schemaOf('POST /api/v1/chats/{id}/receipts/replay'), {
        toolCallId: fc.oneof({ weight: 2, arbitrary: fc.constant(PENDING_CALL) }, { weight: 3, arbitrary: nastyString }),
      }),
    })),
    'POST /api/v1/ai/agents/{agentName}/chats': request(
      'POST',
      fc
        .oneof({ weight: 9, arbitrary: pick(world.agents) }, { weight: 1, arbitrary: strangePathValue })
        .map((n) => url('/api/v1/ai/agents/', n, '/chats')),
      validOr(
        validUiChat,
        bodyFor(schemaOf('POST /api/v1/ai/agents/{agentName}/chats'), {
          id: fc.oneof({ weight: 3, arbitrary: clientChatId }, { weight: 1, arbitrary: nastyString }),
          messages: uiMessages,
          trigger: pick(['submit-message', 'regenerate-message', 'resume-stream']),
          dynamicTools,
          ...contextHints,
        }),
      ),
    ),
    'POST /api/v1/ai/agents/{agentName}/chats/{id}/receipts/replay': request(
      'POST',
      fc
        .tuple(
          fc.oneof({ weight: 9, arbitrary: pick(world.agents) }, { weight: 1, arbitrary: strangePathValue }),
          fc.oneof({ weight: 3, arbitrary: clientChatId }, { weight: 1, arbitrary: strangePathValue }),
        )
        .map(([agent, id]) => url('/api/v1/ai/agents/', agent, '/chats/', id, '/receipts/replay')),
      bodyFor(schemaOf('POST /api/v1/ai/agents/{agentName}/chats/{id}/receipts/replay'), { toolCallId: nastyString }),
    ),
    'POST /api/v1/stream-tokens': requestAs('POST', (role) => {
      const own = pick([world.chats[role].talk, world.chats[role].action]);
      return {
        path: fc.constant('/api/v1/stream-tokens'),
        body: validOr(
          fc.record({ chatId: own }, { requiredKeys: [] }),
          bodyFor(schemaOf('POST /api/v1/stream-tokens'), {
            // Mostly the key's own chats; sometimes the other key's, which must be as unknown as a missing one.
            chatId: fc.oneof(
              { weight: 4, arbitrary: own },
              { weight: 2, arbitrary: fc.constant(world.chats[role === 'admin' ? 'member' : 'admin'].talk) },
              { weight: 1, arbitrary: fc.uuid() },
              { weight: 1, arbitrary: nastyString },
            ),
          }),
        ),
      };
    }),
    'POST /api/v1/api-keys': request('POST', fc.constant('/api/v1/api-keys'), bodyFor(schemaOf('POST /api/v1/api-keys'))),
    'POST /api/v1/ai/agents': request(
      'POST',
      fc.constant('/api/v1/ai/agents'),
      validOr(validAgent, bodyFor(schemaOf('POST /api/v1/ai/agents'), agentHints)),
    ),
    'PUT /api/v1/ai/agents/{name}': overValues(['fuzz_agent'], (name) =>
      request(
        'PUT',
        name.map((n) => url('/api/v1/ai/agents/', n)),
        validOr(
          validAgent.map((spec) => ({ ...spec, name: 'fuzz_agent' })),
          bodyFor(schemaOf('PUT /api/v1/ai/agents/{name}'), agentHints),
        ),
      ),
    ),
    'POST /api/v1/objects': request(
      'POST',
      fc.constant('/api/v1/objects'),
      validOr(
        fc.record(
          { name: identifier, label: fc.string({ minLength: 1, maxLength: 20 }), fields: fc.array(validField, { maxLength: 4 }) },
          { requiredKeys: ['name', 'label'] },
        ),
        bodyFor(schemaOf('POST /api/v1/objects'), metadataHints),
      ),
    ),
    'PATCH /api/v1/objects/{name}': overValues(objectNames, (name) =>
      request(
        'PATCH',
        name.map((n) => url('/api/v1/objects/', n)),
        bodyFor(schemaOf('PATCH /api/v1/objects/{name}')),
      ),
    ),
    'POST /api/v1/objects/{name}/fields': overValues(objectNames, (name) =>
      request(
        'POST',
        name.map((n) => url('/api/v1/objects/', n, '/fields')),
        validOr(validField, bodyFor(schemaOf('POST /api/v1/objects/{name}/fields'), metadataHints)),
      ),
    ),
    'PATCH /api/v1/objects/{name}/fields/{field}': fc.oneof(
      ...objectNames.map((name) =>
        overValues(
          world.objects[name].map((f) => f.name),
          (field) =>
            request(
              'PATCH',
              field.map((f) => url('/api/v1/objects/', name, '/fields/', f)),
              bodyFor(schemaOf('PATCH /api/v1/objects/{name}/fields/{field}'), fieldPatchHints),
            ),
        ),
      ),
    ),
    'POST /api/v1/policies': request('POST', fc.constant('/api/v1/policies'), validOr(validPolicy(true), policyBody('POST'))),
    'PUT /api/v1/policies/{name}': overValues(['fuzz-policy'], (name) =>
      request(
        'PUT',
        name.map((n) => url('/api/v1/policies/', n)),
        validOr(validPolicy(false), policyBody('PUT')),
      ),
    ),
    'POST /api/v1/objects/{name}/views': overValues(objectNames, (name, known) =>
      request(
        'POST',
        name.map((n) => url('/api/v1/objects/', n, '/views')),
        known === 'fuzz_item' ? validOr(validView(true), viewBody('POST')) : viewBody('POST'),
      ),
    ),
    'PUT /api/v1/objects/{name}/views/{view}': overValues(['fuzz_view'], (view) =>
      request(
        'PUT',
        view.map((v) => url('/api/v1/objects/', 'fuzz_item', '/views/', v)),
        validOr(validView(false), viewBody('PUT')),
      ),
    ),
    'POST /api/v1/metrics': request('POST', fc.constant('/api/v1/metrics'), validOr(validMetric(true), metricBody('POST'))),
    'PUT /api/v1/metrics/{name}': overValues(['fuzz_metric'], (name) =>
      request(
        'PUT',
        name.map((n) => url('/api/v1/metrics/', n)),
        validOr(validMetric(false), metricBody('PUT')),
      ),
    ),
    'PATCH /api/v1/api-keys/{id}': overValues([world.spareKeyId], (id) =>
      request(
        'PATCH',
        id.map((i) => url('/api/v1/api-keys/', i)),
        validOr(
          fc.record(
            {
              subject: fc.string({ minLength: 1, maxLength: 20 }),
              policies: fc.subarray(['fuzz-policy']),
              attributes: fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9_]{0,10}$/), fc.oneof(fc.string(), fc.integer())),
            },
            { requiredKeys: [] },
          ),
          bodyFor(schemaOf('PATCH /api/v1/api-keys/{id}')),
        ),
      ),
    ),
  };
}

/** Why a response breaks the property, or undefined when it keeps it. */
function problemOf(status: number, text: string): string | undefined {
  if (status >= 500) return `status ${status}`;
  if (status >= 200 && status < 300) return undefined;
  if (status < 400) return `status ${status}: neither a success nor a client error`;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return 'the error body is not JSON';
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'the error body is not an object';
  const { error, code, details, ...rest } = body as Record<string, unknown>;
  if (typeof error !== 'string' || !error) return '`error` is not a non-empty string';
  if (typeof code !== 'string' || !ERROR_CODE.test(code)) return '`code` is not a snake_case string';
  if (!(code in ERRORS)) return `code "${code}" is not in the error catalog`;
  const catalogStatus: number = ERRORS[code as keyof typeof ERRORS];
  if (catalogStatus !== status) return `code "${code}" has status ${catalogStatus} in the catalog`;
  if (Object.keys(rest).length)
    return `unexpected members ${Object.keys(rest).join(', ')} beside error, code${details === undefined ? '' : ', details'}`;
  return undefined;
}

const clip = (text: string, max = 1500) => (text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text);

/**
 * Property: whatever the body (or records query), the server never answers 5xx, and every error is
 * `{ error, code[, details] }` with a code from the catalog and the catalog's status. 10,000 generated
 * requests over every POST, PUT and PATCH route of the OpenAPI document and GET records, with an admin
 * or a member key. The seed is fixed, so a failure comes back on every run; fast-check prints the seed
 * and the path of the failing run, and the message names the request, the body sent, the answer and the
 * server's log lines for it.
 */
describe('fuzzing every body-taking route (fast-check)', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let world: World;
  let routes: BodyRoute[];
  let arbitraries: Record<Target, fc.Arbitrary<FuzzRequest>>;
  let sent = 0;
  const logLines: string[] = [];
  const logDestination = { write: (line: string) => void logLines.push(line) };

  /** The server's log lines of one request (warnings and errors: LOG_LEVEL is warn). */
  const serverLog = (requestId: string | undefined) => logLines.filter((l) => requestId && l.includes(requestId)).join('');

  /** Fills in the id of the pending client tool call, as a client answering it would. */
  async function resolvePlaceholders(req: FuzzRequest, payload: string): Promise<string> {
    if (!payload.includes(PENDING_CALL)) return payload;
    const chat = await t.app.inject({
      method: 'GET',
      url: req.url.replace(/\/tool-results$/, ''),
      headers: bearer(world.keys[req.role]),
    });
    const id = chat.statusCode === 200 ? (JSON.parse(chat.body) as ChatResponse).pendingToolCalls?.[0]?.id : undefined;
    return payload.replaceAll(PENDING_CALL, JSON.stringify(id ?? 'no-pending-call').slice(1, -1));
  }

  async function send(target: Target, req: FuzzRequest, answers: Map<string, number>): Promise<void> {
    sent++;
    const payload = req.csv ?? (req.body === undefined ? undefined : await resolvePlaceholders(req, toJsonText(req.body)));
    const contentType = req.csv !== undefined ? 'text/csv' : 'application/json';
    const res = await t.app.inject({
      method: req.method,
      url: req.url,
      headers: { ...bearer(world.keys[req.role]), ...(payload === undefined ? {} : { 'content-type': contentType }) },
      payload,
    });
    const problem = problemOf(res.statusCode, res.body);
    if (problem) {
      const requestId = res.headers['x-request-id'] as string | undefined;
      throw new Error(
        [
          `${target} (seed ${SEED}): ${problem}`,
          `request: ${req.method} ${clip(req.url, 500)} as ${req.role}`,
          `body sent: ${payload === undefined ? '(none)' : clip(payload)}`,
          `answer: ${res.statusCode} ${clip(res.body)}`,
          `server log: ${clip(serverLog(requestId), 4000) || '(nothing)'}`,
        ].join('\n'),
      );
    }
    const answer =
      res.statusCode < 400 ? String(res.statusCode) : `${res.statusCode} ${(JSON.parse(res.body) as ErrorBody).code}`;
    answers.set(answer, (answers.get(answer) ?? 0) + 1);
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: {
        LOG_LEVEL: 'warn',
        CHAT_POLL_INTERVAL_MS: '500',
        CHAT_HEARTBEAT_INTERVAL_MS: '500',
        // Webhooks to a closed port of the loopback: one attempt each, failed at once.
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_MAX_ATTEMPTS: '1',
        JOB_POLL_INTERVAL_MS: '500',
      },
      logDestination,
    }));
    // Every model call is answered at once and the step re-queues itself, so any number of calls works.
    // Chats that declare the client tool always call it, so they keep coming back to requires_action.
    const step: DynamicStep = (request) => {
      llm.enqueue(step);
      const tools = (request.body?.tools ?? []) as Array<{ function?: { name?: string } }>;
      return tools.some((tool) => tool.function?.name === CLIENT_TOOL)
        ? MockReply.toolCall(CLIENT_TOOL, {})
        : MockReply.text('ok');
    };
    llm.enqueue(step);

    const admin = bearer(t.adminKey);
    const post = async (path: string, body: unknown, key = t.adminKey) =>
      bodyOf<Record<string, unknown>>(
        await t.http
          .post(path)
          .set(bearer(key))
          .send(body as object)
          .expect(201),
      );
    const member = (await post('/api/v1/api-keys', { name: 'fuzz member', role: 'member' })) as unknown as CreatedApiKeyResponse;
    await post('/api/v1/objects', {
      name: 'fuzz_parent',
      label: 'Fuzz parent',
      fields: [{ name: 'title', label: 'Title', type: 'text' }],
    });
    await post('/api/v1/objects', { name: 'fuzz_item', label: 'Fuzz item', fields: ITEM_FIELDS });
    const parentId = String((await post('/api/v1/objects/fuzz_parent/records', { title: 'p1' })).id);
    const itemId = String(
      (await post('/api/v1/objects/fuzz_item/records', { title: 'i1', code: 'c1', qty: 1, parent: parentId, tags: ['red'] })).id,
    );
    await post('/api/v1/ai/agents', {
      name: 'fuzz_agent',
      label: 'Fuzz agent',
      instructions: 'Answer with data.',
      tools: ['list_objects', 'describe_object', 'query_records', 'get_record', 'aggregate_data'],
      allowedObjects: ['*'],
    });
    const tools = bodyOf<ToolListResponse>(await t.http.get('/api/v1/ai/tools').set(admin).expect(200)).tools;

    const chatsOf = async (key: string) => {
      const talk = String((await post('/api/v1/chats', { agent: 'data_chat', message: 'hello' }, key)).id);
      const action = String(
        (
          await post(
            '/api/v1/chats',
            {
              agent: 'data_chat',
              message: 'call it',
              dynamicTools: [{ name: CLIENT_TOOL, inputSchema: { type: 'object', properties: {} } }],
            },
            key,
          )
        ).id,
      );
      await waitForChat(t, talk, hasStatus('waiting'), key);
      await waitForChat(t, action, hasStatus('requires_action'), key);
      return { talk, action };
    };
    await post('/api/v1/policies', { name: 'fuzz-policy', objects: { fuzz_item: { read: true } } });
    await post('/api/v1/objects/fuzz_item/views', {
      name: 'fuzz_view',
      label: 'Fuzz view',
      where: { qty: { $gt: 0 } },
      shared: true,
    });
    await post('/api/v1/metrics', {
      name: 'fuzz_metric',
      label: 'Fuzz metric',
      object: 'fuzz_item',
      type: 'simple',
      measure: { function: 'sum', field: 'qty' },
      timeField: 'due',
      dimensions: ['stage', 'parent.title', 'qty'],
    });
    const spare = (await post('/api/v1/api-keys', { name: 'fuzz spare', role: 'member' })) as unknown as CreatedApiKeyResponse;
    // A record of its own (no other target names it, so no batch deletes it), with a few versions to restore.
    const restorable = String((await post('/api/v1/objects/fuzz_parent/records', { title: 'v0' })).id);
    for (const title of ['v1', 'v2']) {
      await t.http.patch(`/api/v1/objects/fuzz_parent/records/${restorable}`).set(bearer(t.adminKey)).send({ title }).expect(200);
    }
    const history = await t.http
      .get(`/api/v1/objects/fuzz_parent/records/${restorable}/history`)
      .set(bearer(t.adminKey))
      .expect(200);
    const trashed: string[] = [];
    const changeSets: string[] = [];
    for (let i = 0; i < 3; i++) {
      const made = await post('/api/v1/objects/fuzz_parent/records', { title: `trash ${i}` });
      await t.http
        .delete(`/api/v1/objects/fuzz_parent/records/${String(made.id)}`)
        .set(bearer(t.adminKey))
        .expect(204);
      trashed.push(String(made.id));
      changeSets.push(String((await post('/api/v1/objects/fuzz_parent/records', { title: `revertable ${i}` })).changeSetId));
    }
    const webhookId = String(
      (await post('/api/v1/webhooks', { url: WEBHOOK_URLS[0], objects: ['fuzz_parent'], events: ['create'] })).id,
    );
    await post('/api/v1/objects/fuzz_parent/records', { title: 'webhook' });
    let deliveryId = '';
    await eventually(async () => {
      const log = await t.http.get(`/api/v1/webhooks/${webhookId}/deliveries?status=failed`).set(bearer(t.adminKey)).expect(200);
      deliveryId = bodyOf<DeliveriesResponse>(log).deliveries[0]?.id ?? '';
      return deliveryId !== '';
    }, 20_000);
    const scheduleId = String(
      (
        await post('/api/v1/schedules', {
          name: 'fuzz',
          every: '1h',
          action: { type: 'question', agent: 'fuzz_agent', message: 'How many items?' },
          deliver: [{ webhook: webhookId }],
        })
      ).id,
    );
    world = {
      webhookId,
      deliveryId,
      scheduleId,
      restorable,
      versions: bodyOf<{ versions: Array<{ version: string }> }>(history).versions.map((v) => v.version),
      trashed: { fuzz_item: [], fuzz_parent: trashed },
      changeSets,
      spareKeyId: spare.id,
      keys: { admin: t.adminKey, member: member.secret },
      objects: {
        fuzz_item: ITEM_FIELDS.map(({ name, type, options }) => ({ name, type, options })),
        fuzz_parent: [{ name: 'title', type: 'text' }],
      },
      recordIds: { fuzz_item: [itemId], fuzz_parent: [parentId] },
      tools: tools.map((tool) => ({ name: tool.name, parameters: tool.parameters })),
      agents: ['data_chat', 'fuzz_agent'],
      chats: { admin: await chatsOf(t.adminKey), member: await chatsOf(member.secret) },
    };
    routes = await documentedBodyRoutes(t);
    arbitraries = generators(
      world,
      new Map(routes.map((route) => [`${route.method.toUpperCase()} ${route.template}` as Target, route])),
    );
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });

  it(`covers every POST, PUT and PATCH route of the OpenAPI document, and splits ${TOTAL_RUNS} runs over them and GET records`, () => {
    const documented = routes.map((route) => `${route.method.toUpperCase()} ${route.template}`).sort();
    expect(documented.length).toBeGreaterThan(15);
    expect(documented).toEqual(TARGETS.filter((target) => !target.startsWith('GET ')).sort());
    expect(TARGETS.reduce((sum, _, index) => sum + runsOf(index), 0)).toBe(TOTAL_RUNS);
  });

  it.each(TARGETS.map((target, index) => [target, runsOf(index)] as const))(
    '%s: %i generated requests, none answered 5xx, every error { error, code }, some accepted (none where none may be)',
    async (target, numRuns) => {
      const answers = new Map<string, number>();
      await fc.assert(
        fc.asyncProperty(arbitraries[target], (req) => send(target, req, answers)),
        // No shrinking: each step would be another request, and the first failure with its seed and path is enough.
        { seed: SEED, numRuns, endOnFailure: true },
      );
      if (process.env.FUZZ_REPORT) process.stderr.write(`${target}: ${JSON.stringify(Object.fromEntries(answers))}\n`);
      // The generators reach the handler's success path, not only its validation (or never get past it, by design).
      const accepted = [...answers].filter(([answer]) => answer.startsWith('2')).reduce((sum, [, n]) => sum + n, 0);
      if (NEVER_ACCEPTED.has(target)) expect(accepted).toBe(0);
      else expect(accepted).toBeGreaterThan(0);
    },
  );

  it(`sent all ${TOTAL_RUNS} requests`, () => {
    expect(sent).toBe(TOTAL_RUNS);
  });
});
