import { HTTP_CODE_METADATA, METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { RequestMethod } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { DECORATORS, type OpenAPIObject } from '@nestjs/swagger';
import Ajv from 'ajv';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import type { ChatMessagesResponse } from '../../src/chats/durable/chat.dto';
import type { ChatPart } from '../../src/chats/durable/chat.types';
import { ERRORS } from '../../src/common/error-codes';
import { projectRoot } from '../../src/common/project-root';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, listen, waitForChat } from '../support/chat-helpers';
import { match } from '../support/matchers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import type { JsonSchema } from '../support/openapi-routes';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { createObject, fieldSpec } from '../support/fixtures';

const run = promisify(execFile);

interface Operation {
  summary?: string;
  security?: Array<Record<string, string[]>>;
  responses: Record<string, { description: string; content?: Record<string, { schema?: JsonSchema }> }>;
}

/** Every operation of the document as `GET /api/v1/objects/{name}` → its operation object. */
function operationsOf(docs: OpenAPIObject): Map<string, Operation> {
  const operations = new Map<string, Operation>();
  for (const [path, item] of Object.entries(docs.paths)) {
    for (const [method, operation] of Object.entries(item as Record<string, Operation>)) {
      operations.set(`${method.toUpperCase()} ${path}`, operation);
    }
  }
  return operations;
}

/**
 * Every route the app serves, as `GET /api/v1/objects/{name}` → the status a success answers with
 * (its @HttpCode, or Nest's 201 for POST and 200 otherwise), read from the controllers' metadata.
 */
function servedRoutes(t: TestApp): Map<string, number> {
  const routes = new Map<string, number>();
  for (const module of t.app.get(ModulesContainer).values()) {
    for (const { metatype } of module.controllers.values()) {
      if (!metatype || Reflect.getMetadata(DECORATORS.API_EXCLUDE_CONTROLLER, metatype)) continue;
      const prototype = metatype.prototype as Record<string, unknown>;
      const base = String(Reflect.getMetadata(PATH_METADATA, metatype) ?? '');
      for (const name of Object.getOwnPropertyNames(prototype)) {
        const handler = name === 'constructor' ? undefined : prototype[name];
        if (typeof handler !== 'function' || Reflect.getMetadata(PATH_METADATA, handler) === undefined) continue;
        // Left out of the document on purpose, where it says so (@ApiExcludeEndpoint).
        if ((Reflect.getMetadata(DECORATORS.API_EXCLUDE_ENDPOINT, handler) as { disable?: boolean })?.disable) continue;
        const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod];
        const path = `/${[base, String(Reflect.getMetadata(PATH_METADATA, handler))].join('/')}`
          .replace(/\/+/g, '/')
          .replace(/(.)\/$/, '$1')
          .replace(/:(\w+)/g, '{$1}');
        const status =
          (Reflect.getMetadata(HTTP_CODE_METADATA, handler) as number | undefined) ?? (method === 'POST' ? 201 : 200);
        routes.set(`${method} ${path}`, status);
      }
    }
  }
  return routes;
}

/** A script of the project's node_modules. */
function tool(script: string): string {
  return join(projectRoot(), 'node_modules', script);
}

/** Runs a Node script on the project's Node, in `cwd`. */
async function runNode(script: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  return run(process.execPath, [script, ...args], {
    cwd,
    env: { ...process.env, NODE_OPTIONS: '', ...env },
    maxBuffer: 20 * 1024 * 1024,
  });
}

/**
 * A client program written against the generated types: it lists objects, queries records with a
 * where, creates a durable chat and reads an error's code, and prints what it got. The
 * `@ts-expect-error` lines prove that the types are strict (they fail the compile if they stop
 * being errors).
 */
const CLIENT_PROGRAM = `
import createClient from 'openapi-fetch';
import type { components, paths } from './api.js';

type ErrorCode = components['schemas']['ErrorCode'];
type RecordResponse = components['schemas']['RecordResponse'];

const client = createClient<paths>({
  baseUrl: process.env.BASE_URL,
  headers: { Authorization: \`Bearer \${process.env.API_KEY}\` },
});

const objects = await client.GET('/api/v1/objects');
if (!objects.data) throw new Error('listing objects failed');
const objectNames: string[] = objects.data.objects.map((o) => o.name);

const where: components['schemas']['Where'] = { $or: [{ stage: 'won' }, { amount: { $gte: 5000 } }] };
const page = await client.GET('/api/v1/objects/{name}/records', {
  params: {
    path: { name: 'deal' },
    query: { where: JSON.stringify(where), orderBy: '[{"field":"name"}]', limit: 10, total: 'exact' },
  },
});
if (!page.data) throw new Error('querying records failed');
const records: RecordResponse[] = page.data.records;
const total: number | undefined = page.data.total;
const totalExact: boolean | undefined = page.data.totalExact;
const nextCursor: string | null = page.data.nextCursor;
if (nextCursor !== null) throw new Error("three won deals fit one page");

const chat = await client.POST('/api/v1/chats', { body: { agent: 'data_chat', message: 'How many deals did we win?' } });
if (!chat.data) throw new Error('creating a chat failed');
const status: 'waiting' | 'pending' | 'running' | 'requires_action' | 'requires_approval' | 'error' = chat.data.status;
const proposals: Array<{ toolCallId: string; token: string }> | undefined = chat.data.requiredAction?.proposals;
void proposals;

const missing = await client.GET('/api/v1/objects/{name}', { params: { path: { name: 'no_such_object' } } });
const code: ErrorCode | undefined = missing.error?.code;
const errorMessage: string | undefined = missing.error?.error;

export function neverCalled(): void {
  // @ts-expect-error: a decision is approve or reject
  void client.POST('/api/v1/chats/{id}/approvals', { params: { path: { id: 'x' } }, body: { toolCallId: 'c', decision: 'maybe', token: 't' } });
  // @ts-expect-error: limit is an integer, not text
  void client.GET('/api/v1/objects/{name}/records', { params: { path: { name: 'deal' }, query: { limit: 'ten' } } });
  // @ts-expect-error: total is exact, estimate or none
  void client.GET('/api/v1/objects/{name}/records', { params: { path: { name: 'deal' }, query: { total: 'all' } } });
  // @ts-expect-error: a chat needs its first message
  void client.POST('/api/v1/chats', { body: { agent: 'data_chat' } });
  // @ts-expect-error: not a code of the catalog
  const wrong: ErrorCode = 'no_such_code';
  void wrong;
}

console.log(JSON.stringify({
  objectNames,
  names: records.map((r) => r.name),
  total,
  totalExact,
  chat: { id: chat.data.id, status, httpStatus: chat.response.status },
  error: { code, errorMessage, httpStatus: missing.response.status },
}));
`;

describe('OpenAPI document', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let docs: OpenAPIObject;
  let dir: string;

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm());
    docs = bodyOf<OpenAPIObject>(await t.http.get('/docs-json').expect(200));
    dir = await mkdtemp(join(tmpdir(), 'data-copilot-openapi-'));
    await writeFile(join(dir, 'openapi.json'), JSON.stringify(docs));
    await createObject(t, 'deal', [
      fieldSpec('name', 'text'),
      fieldSpec('stage', 'select', { options: ['open', 'won', 'lost'] }),
      fieldSpec('amount', 'currency'),
    ]);
    for (const record of [
      { name: 'Acme', stage: 'won', amount: 1200 },
      { name: 'Globex', stage: 'lost', amount: 9000 },
      { name: 'Initech', stage: 'open', amount: 300 },
      { name: 'Umbrella', stage: 'won', amount: 50 },
    ]) {
      await t.http.post('/api/v1/objects/deal/records').set(bearer(t.adminKey)).send(record).expect(201);
    }
  });
  beforeEach(() => llm.reset());
  afterAll(async () => {
    await t.close();
    await llm.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('describes every route the app serves, with the success status the route answers with', () => {
    const documented = new Map([...operationsOf(docs)].map(([key, op]) => [key, successStatus(op)]));
    expect(Object.fromEntries(documented)).toEqual(Object.fromEntries(servedRoutes(t)));
  });

  it('gives every operation a summary, a typed success body and the shared error body on every error status', () => {
    const problems: string[] = [];
    for (const [key, op] of operationsOf(docs)) {
      const isApi = key.split(' ')[1].startsWith('/api/');
      if (!op.summary?.trim()) problems.push(`${key}: no summary`);
      const status = successStatus(op);
      const success = op.responses[String(status)];
      const content = success?.content ?? {};
      if (status === 204) {
        if (success?.content) problems.push(`${key}: a 204 with a body`);
      } else if (
        status !== 202 &&
        !content['application/json']?.schema &&
        !content['text/event-stream'] &&
        !content['text/csv'] &&
        !content['image/svg+xml']
      ) {
        problems.push(`${key}: ${status} has no JSON schema`);
      }
      const stream = content['text/event-stream'];
      if (stream && !/`\w+`/.test(typeof stream.schema?.description === 'string' ? stream.schema.description : ''))
        problems.push(`${key}: event stream names no events`);
      const errors = Object.keys(op.responses).filter((s) => Number(s) >= 400);
      if (!errors.some((s) => Number(s) < 500) && isApi) problems.push(`${key}: no 4xx response`);
      for (const s of errors) {
        const schema = op.responses[s].content?.['application/json']?.schema;
        if (schema?.$ref !== '#/components/schemas/ErrorResponse') problems.push(`${key}: ${s} is not an ErrorResponse`);
        const codes = [...op.responses[s].description.matchAll(/`(\w+)`/g)].map((m) => m[1]);
        if (!codes.length) problems.push(`${key}: ${s} names no error code`);
        for (const code of codes) {
          if ((ERRORS as Record<string, number>)[code] !== Number(s)) problems.push(`${key}: ${code} is not a ${s}`);
        }
      }
      const security = JSON.stringify(op.security);
      if (isApi && security !== '[{"apiKey":[]}]') problems.push(`${key}: security ${security}`);
      if (isApi && !op.responses['401']) problems.push(`${key}: no 401`);
      if (!isApi && security !== '[]') problems.push(`${key}: open route with security ${security}`);
    }
    expect(problems).toEqual([]);
  });

  it('documents the chart route as producing image/svg+xml', () => {
    const op = docs.paths['/api/v1/chats/{id}/charts/{toolCallId}.svg']?.get;
    const success = op?.responses['200'] as { content?: Record<string, unknown> } | undefined;
    expect(Object.keys(success?.content ?? {})).toEqual(['image/svg+xml']);
    expect(op?.parameters?.map((p) => ('name' in p ? p.name : undefined))).toEqual(['id', 'toolCallId']);
  });

  it('declares the API key as an http bearer scheme and the error body with the catalog of codes', () => {
    expect(Object.keys(docs.components?.securitySchemes ?? {})).toEqual(['apiKey']);
    expect(docs.components?.securitySchemes?.apiKey).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'API key' });
    expect(docs.components?.schemas?.ErrorResponse).toMatchObject({
      type: 'object',
      required: ['error', 'code'],
      properties: { error: { type: 'string' }, code: { allOf: [{ $ref: '#/components/schemas/ErrorCode' }] } },
    });
    expect(docs.components?.schemas?.ErrorCode).toMatchObject({ type: 'string', enum: Object.keys(ERRORS) });
  });

  it('passes redocly lint with the recommended rules', async () => {
    const { stdout } = await runNode(
      tool('@redocly/cli/bin/cli.js'),
      ['lint', join(dir, 'openapi.json'), '--config', join(projectRoot(), 'redocly.yaml'), '--format', 'json'],
      dir,
      { REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', REDOCLY_SUPPRESS_NOTIFICATIONS: 'true' },
    ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
    const report = JSON.parse(stdout) as {
      totals: { errors: number };
      problems: Array<{ ruleId: string; severity: string; message: string }>;
    };
    expect(report.problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
    expect(report.totals.errors).toBe(0);
  });

  it('generates TypeScript types that a strict client program compiles against, and that program works', async () => {
    llm.enqueue(MockReply.text('Two.'));

    await runNode(tool('openapi-typescript/bin/cli.js'), ['openapi.json', '--output', 'api.ts'], dir);
    await writeFile(join(dir, 'client.mts'), CLIENT_PROGRAM);
    await symlink(join(projectRoot(), 'node_modules'), join(dir, 'node_modules'), 'dir');
    const compiled = await runNode(
      tool('typescript/bin/tsc'),
      // The generated types are a .ts source, so they are checked in full while libraries are skipped.
      ['--strict', '--noEmit', '--module', 'nodenext', '--target', 'es2023', '--types', 'node', '--skipLibCheck', 'client.mts'],
      dir,
    ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? 'tsc failed' }));
    expect(compiled.stdout).toBe('');

    const js = ts.transpileModule(await readFile(join(dir, 'client.mts'), 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2023 },
    });
    await writeFile(join(dir, 'client.mjs'), js.outputText);
    const baseUrl = await listen(t);
    const { stdout } = await runNode(join(dir, 'client.mjs'), [], dir, { BASE_URL: baseUrl, API_KEY: t.adminKey }).catch(
      (error: { stderr?: string }) => {
        throw new Error(`the client program failed: ${error.stderr}`);
      },
    );
    const out = JSON.parse(stdout) as {
      objectNames: string[];
      names: string[];
      total: number;
      totalExact: boolean;
      chat: { id: string; status: string; httpStatus: number };
      error: { code: string; errorMessage: string; httpStatus: number };
    };
    const missing = errorOf(await t.http.get('/api/v1/objects/no_such_object').set(bearer(t.adminKey)).expect(404));
    expect(out).toEqual({
      objectNames: ['deal'],
      names: ['Acme', 'Globex', 'Umbrella'],
      total: 3,
      totalExact: true,
      chat: { id: match.any(String), status: 'pending', httpStatus: 201 },
      error: { code: 'object_not_found', errorMessage: missing.error, httpStatus: 404 },
    });
    expect(missing.code).toBe(out.error.code);
    const chat = await t.http.get(`/api/v1/chats/${out.chat.id}`).set(bearer(t.adminKey)).expect(200);
    expect(chat.body).toMatchObject({ agent: 'data_chat' });
    // Its answer uses the step scripted here: the next test's script must not be taken by a late run.
    await waitForChat(t, out.chat.id, hasStatus('waiting'));
  });

  it('documents bodies that the server really sends: answers validate against their schemas', async () => {
    const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
    ajv.addSchema({ components: docs.components }, 'docs');
    const operations = operationsOf(docs);
    /** Checks that `res` has the status expected and a body valid against what `route` documents for it. */
    const check = (route: string, status: number, res: { status: number; body: unknown }) => {
      const schema = operations.get(route)?.responses[String(res.status)]?.content?.['application/json']?.schema;
      const validate = schema && ajv.compile(rebase(schema));
      const errors = !validate ? 'no JSON body documented' : validate(res.body) ? null : validate.errors;
      expect({ route, status: res.status, errors }).toEqual({ route, status, errors: null });
    };
    const key = bearer(t.adminKey);
    const http = t.http;
    check('GET /health', 200, await http.get('/health'));
    check('GET /api/v1/objects', 200, await http.get('/api/v1/objects').set(key));
    check('GET /api/v1/objects', 401, await http.get('/api/v1/objects').set(bearer('not-a-key')));
    check('GET /api/v1/objects/{name}', 200, await http.get('/api/v1/objects/deal').set(key));
    check('GET /api/v1/objects/{name}', 404, await http.get('/api/v1/objects/nope').set(key));
    const records = '/api/v1/objects/deal/records';
    check('GET /api/v1/objects/{name}/records', 200, await http.get(records).query({ where: '{"amount":{"$gt":100}}' }).set(key));
    check('GET /api/v1/objects/{name}/records', 400, await http.get(records).query({ where: '{"colour":"red"}' }).set(key));
    const created = await http.post(records).set(key).send({ name: 'Hooli', amount: 10 });
    check('POST /api/v1/objects/{name}/records', 201, created);
    const record = `${records}/${idOf(created)}`;
    check('GET /api/v1/objects/{name}/records/{id}', 200, await http.get(record).set(key));
    check('PATCH /api/v1/objects/{name}/records/{id}', 200, await http.patch(record).set(key).send({ amount: 11 }));
    check(
      'PATCH /api/v1/objects/{name}/records/{id}',
      412,
      await http.patch(record).set(key).set('if-match', '"1"').send({ amount: 12 }),
    );
    check(
      'POST /api/v1/objects/{name}/aggregate',
      200,
      await http
        .post('/api/v1/objects/deal/aggregate')
        .set(key)
        .send({ groupBy: ['stage'], aggregations: [{ function: 'sum', field: 'amount', alias: 'total' }] }),
    );
    check('GET /api/v1/ai/tools', 200, await http.get('/api/v1/ai/tools').set(key));
    check(
      'POST /api/v1/ai/tools/{name}/execute',
      200,
      await http
        .post('/api/v1/ai/tools/query_records/execute')
        .set(key)
        .send({ arguments: { objectName: 'deal' } }),
    );
    check('GET /api/v1/ai/agents', 200, await http.get('/api/v1/ai/agents').set(key));
    check('GET /api/v1/ai/agents/{name}', 200, await http.get('/api/v1/ai/agents/data_chat').set(key));
    check('GET /api/v1/api-keys', 200, await http.get('/api/v1/api-keys').set(key));

    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_1', name: 'query_records', arguments: { objectName: 'deal', limit: 1 } }]),
      MockReply.text('One deal.'),
      MockReply.text('Hello.'),
    );
    const chat = await http.post('/api/v1/chats').set(key).send({ agent: 'data_chat', message: 'One deal?' });
    check('POST /api/v1/chats', 201, chat);
    check('POST /api/v1/chats', 400, await http.post('/api/v1/chats').set(key).send({ agent: 'data_chat' }));
    await waitForChat(t, idOf(chat), hasStatus('waiting'));
    check('GET /api/v1/chats/{id}', 200, await http.get(`/api/v1/chats/${idOf(chat)}`).set(key));
    check('GET /api/v1/chats', 200, await http.get('/api/v1/chats').set(key));
    const messages = await http.get(`/api/v1/chats/${idOf(chat)}/messages`).set(key);
    const partTypes = bodyOf<ChatMessagesResponse>(messages).messages.flatMap((m) => m.parts.map((p) => (p as ChatPart).type));
    expect(partTypes).toEqual(['text', 'tool-call', 'tool-result', 'text']);
    check('GET /api/v1/chats/{id}/messages', 200, messages);
    check(
      'POST /api/v1/ai/agents/{agentName}/chat',
      200,
      await http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(key)
        .send({ messages: [{ role: 'user', content: 'Hi' }] }),
    );

    // A durable useChat chat: its stream ends with the turn, then its history as UI messages.
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_2', name: 'query_records', arguments: { objectName: 'deal', limit: 1 } }]),
      MockReply.text('One deal.'),
    );
    const uiChats = '/api/v1/ai/agents/data_chat/chats';
    const userMessage = { id: 'm1', role: 'user', parts: [{ type: 'text', text: 'One deal?' }] };
    const streamed = await http
      .post(uiChats)
      .set(key)
      .send({ id: 'docs-chat', trigger: 'submit-message', messages: [userMessage] });
    expect(streamed.status).toBe(200);
    expect(streamed.headers['content-type']).toContain('text/event-stream');
    check('POST /api/v1/ai/agents/{agentName}/chats', 400, await http.post(uiChats).set(key).send({ id: 'a/b', messages: [] }));
    const uiHistory = await http.get(`${uiChats}/docs-chat/messages`).set(key);
    expect(
      bodyOf<{ messages: Array<{ parts: Array<{ type: string }> }> }>(uiHistory).messages[1].parts.map((p) => p.type),
    ).toEqual(['step-start', 'tool-query_records', 'step-start', 'text', 'data-grounding']);
    check('GET /api/v1/ai/agents/{agentName}/chats/{id}/messages', 200, uiHistory);
    check('GET /api/v1/ai/agents/{agentName}/chats/{id}/messages', 404, await http.get(`${uiChats}/nope/messages`).set(key));
    expect((await http.get(`${uiChats}/docs-chat/stream`).set(key)).status).toBe(204);
  });
});

/** The documented success status: the operation's one 2xx response. */
function successStatus(op: Operation): number {
  const statuses = Object.keys(op.responses).filter((s) => /^2\d\d$/.test(s));
  return statuses.length === 1 ? Number(statuses[0]) : NaN;
}

/** A schema of the document whose `#/components/...` references point into the schema Ajv knows as `docs`. */
function rebase(schema: JsonSchema): JsonSchema {
  return JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, '"docs#/components/')) as JsonSchema;
}
