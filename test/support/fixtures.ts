import type { AgentResponse } from '../../src/agents/agent.dto';
import type { CreateApiKeyDto, CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { CreateFieldDto, ObjectResponse } from '../../src/metadata/metadata.dto';
import type { JobResponse } from '../../src/transfer/transfer.dto';
import { bodyOf } from './responses';
import { bearer, type TestApp } from './test-app';

/**
 * What e2e specs create through the API as the test admin (keys, objects, agents) and the data every
 * spec expects the same: one place for each, so a change of the API's shape is one change here.
 */

/** The tools of the built-in `data_chat` agent, in the order it offers them to the model. */
export const DATA_CHAT_TOOLS = [
  'list_objects',
  'describe_object',
  'query_records',
  'get_record',
  'aggregate_data',
  'record_history',
  'list_metrics',
  'query_metric',
  'calculate',
  'visualize',
];

/** `Authorization` header of the test admin key. */
export function asAdmin(t: TestApp): { Authorization: string } {
  return bearer(t.adminKey);
}

/** A new API key on `t`, made through the API by the test admin: its whole 201 body (`secret` included). */
export async function createApiKey(t: TestApp, key: CreateApiKeyDto): Promise<CreatedApiKeyResponse> {
  return bodyOf<CreatedApiKeyResponse>(await t.http.post('/api/v1/api-keys').set(asAdmin(t)).send(key).expect(201));
}

/** The secret of a new member key named `name`; `subject`, `policies` and `attributes` as given. */
export async function memberSecret(
  t: TestApp,
  name: string,
  extra: Omit<CreateApiKeyDto, 'name' | 'role'> = {},
): Promise<string> {
  return (await createApiKey(t, { name, role: 'member', ...extra })).secret;
}

/** A name as its label: "secret_note" → "Secret note". */
function labelOf(name: string): string {
  const words = name.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** A field of an object definition; its label is made from its name unless `extra` gives one. */
export function fieldSpec(name: string, type: CreateFieldDto['type'], extra: Partial<CreateFieldDto> = {}): CreateFieldDto {
  return { name, label: labelOf(name), type, ...extra };
}

/** Creates an object through the API as the test admin (201); its label is made from its name unless given. */
export async function createObject(
  t: TestApp,
  name: string,
  fields: CreateFieldDto[],
  extra: { label?: string; description?: string } = {},
): Promise<ObjectResponse> {
  const definition = { name, label: labelOf(name), fields, ...extra };
  return bodyOf<ObjectResponse>(await t.http.post('/api/v1/objects').set(asAdmin(t)).send(definition).expect(201));
}

/** Creates an agent through the API as the test admin (201). */
export async function createAgent(t: TestApp, spec: Record<string, unknown>): Promise<AgentResponse> {
  return bodyOf<AgentResponse>(await t.http.post('/api/v1/ai/agents').set(asAdmin(t)).send(spec).expect(201));
}

/** The job (an import, a fill) once it is no longer running, polled as `key` (the test admin by default). */
export async function finishedJob(t: TestApp, jobId: string, key = t.adminKey): Promise<JobResponse> {
  for (;;) {
    const job = bodyOf<JobResponse>(await t.http.get(`/api/v1/jobs/${jobId}`).set(bearer(key)).expect(200));
    if (job.status !== 'running') return job;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
