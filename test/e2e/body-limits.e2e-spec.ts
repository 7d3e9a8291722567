import { MAX_BODY_DEPTH, MAX_BODY_NODES } from '../../src/common/json-body.parser';
import { documentedBodyRoutes, fillPath } from '../support/openapi-routes';
import { errorOf } from '../support/responses';
import { startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createObject, fieldSpec } from '../support/fixtures';

/** Plausible values for the path parameters of every route; the body is refused before they matter. */
const PATH_VALUES: Record<string, string> = {
  name: 'widget',
  field: 'title',
  id: '7d1c4c36-1b7a-4d5e-9a60-3a1f2b9c8e01',
  agentName: 'data_chat',
};

/** Nesting of objects and arrays, the outermost counting 1. */
function depthOf(value: unknown): number {
  return typeof value === 'object' && value !== null ? 1 + Math.max(0, ...Object.values(value).map(depthOf)) : 0;
}

/** `{"a": [[[...]]]}` with `levels` nested containers in all, as raw JSON text. */
function nestedJson(levels: number): string {
  return `{"a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
}

describe('JSON body limits', () => {
  let t: TestApp;
  let bodyRoutes: Array<{ method: 'post' | 'put' | 'patch'; path: string }>;

  const sendRaw = (method: 'post' | 'put' | 'patch', path: string, json: string) =>
    t.http[method](path).set(asAdmin(t)).set('content-type', 'application/json').send(json);

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'widget', [fieldSpec('title', 'text')]);
    bodyRoutes = (await documentedBodyRoutes(t)).map(({ method, template }) => ({
      method,
      path: fillPath(template, PATH_VALUES),
    }));
  });
  afterAll(() => t.close());

  it('finds the body-taking routes in the OpenAPI document', () => {
    expect(bodyRoutes.length).toBeGreaterThan(15);
    expect(bodyRoutes).toEqual(
      expect.arrayContaining([
        { method: 'post', path: '/api/v1/objects/widget/records' },
        { method: 'patch', path: '/api/v1/objects/widget/fields/title' },
        { method: 'put', path: '/api/v1/ai/agents/widget' },
        { method: 'post', path: '/api/v1/ai/agents/data_chat/chat' },
      ]),
    );
  });

  it('answers a body nested 5,000 levels deep with 400 validation_failed on every POST, PUT and PATCH route', async () => {
    const deep = nestedJson(5000);
    const answers: Array<[string, number, string, string]> = [];
    for (const { method, path } of bodyRoutes) {
      const res = await sendRaw(method, path, deep);
      answers.push([`${method.toUpperCase()} ${path}`, res.status, errorOf(res).code, errorOf(res).error]);
    }
    const expected = `body is nested deeper than ${MAX_BODY_DEPTH} levels`;
    expect(answers).toEqual(
      bodyRoutes.map(({ method, path }) => [`${method.toUpperCase()} ${path}`, 400, 'validation_failed', expected]),
    );
  });

  it('refuses one level more than the limit, and lets a body at the limit through to the route', async () => {
    const tooDeep = await sendRaw('post', '/api/v1/objects/widget/records', nestedJson(MAX_BODY_DEPTH + 1)).expect(400);
    expect(tooDeep.body).toMatchObject({ code: 'validation_failed', details: { maxDepth: MAX_BODY_DEPTH } });
    const atLimit = await sendRaw('post', '/api/v1/objects/widget/records', nestedJson(MAX_BODY_DEPTH)).expect(400);
    expect(errorOf(atLimit).code).toBe('unknown_field');
  });

  it('lets a where nested 64 levels deep reach the where compiler, which gives its own answer', async () => {
    let where: Record<string, unknown> = { title: 'x' };
    for (let i = 0; i < 31; i++) where = { $and: [where] };
    const body = { where, aggregations: [{ function: 'count', alias: 'n' }] };
    expect(depthOf(body)).toBe(64);
    const res = await t.http.post('/api/v1/objects/widget/aggregate').set(asAdmin(t)).send(body).expect(400);
    expect(errorOf(res).code).toBe('invalid_where');
    expect(errorOf(res).error).toMatch(/where is nested deeper than/);
  });

  it('refuses a body with more values than the limit with 400 validation_failed', async () => {
    const json = `{"title":"x","a":[${Array(MAX_BODY_NODES).fill('0').join(',')}]}`;
    const res = await sendRaw('post', '/api/v1/objects/widget/records', json).expect(400);
    expect(res.body).toMatchObject({ code: 'validation_failed', details: { maxValues: MAX_BODY_NODES } });
    const keys = `{${Array.from({ length: MAX_BODY_NODES }, (_, i) => `"k${i}":0`).join(',')}}`;
    const byKeys = await sendRaw('post', '/api/v1/objects/widget/records', keys).expect(400);
    expect(errorOf(byKeys).code).toBe('validation_failed');
  });

  it('still refuses NUL characters deeper than 64 levels in a DTO body', async () => {
    let args: unknown = 'a\u0000b';
    for (let i = 0; i < 80; i++) args = { x: args };
    const res = await t.http.post('/api/v1/ai/tools/query_records/execute').set(asAdmin(t)).send({ arguments: args }).expect(400);
    expect(errorOf(res).code).toBe('validation_failed');
    expect(errorOf(res).error).toMatch(/^arguments(\.x)+ must not contain NUL/);
  });

  it('keeps answering malformed JSON with 400 invalid_json and an oversized body with 413', async () => {
    const malformed = await sendRaw('post', '/api/v1/objects/widget/records', '{"title": "x",}').expect(400);
    expect(errorOf(malformed).code).toBe('invalid_json');
    const empty = await sendRaw('post', '/api/v1/objects/widget/records', '').expect(400);
    expect(errorOf(empty).code).toBe('invalid_json');
    const poisoned = await sendRaw('post', '/api/v1/objects/widget/records', '{"__proto__": {"x": 1}}').expect(400);
    expect(errorOf(poisoned).code).toBe('invalid_json');
    const huge = await sendRaw(
      'post',
      '/api/v1/objects/widget/records',
      JSON.stringify({ title: 'x'.repeat(2 * 1024 * 1024) }),
    ).expect(413);
    expect(errorOf(huge).code).toBe('payload_too_large');
  });
});
