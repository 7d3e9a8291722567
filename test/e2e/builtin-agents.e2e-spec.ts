import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentResponse } from '../../src/agents/agent.dto';
import { projectRoot } from '../../src/common/project-root';
import { match } from '../support/matchers';
import { sql } from '../support/pg-query';
import { bodyOf } from '../support/responses';
import { bearer, startTestApp, type TestApp } from '../support/test-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

type Definition = Record<string, unknown> & { instructions: string };

function definitionIn(path: string): Definition {
  return JSON.parse(readFileSync(join(projectRoot(), path), 'utf8')) as Definition;
}

const SEED = definitionIn('seeds/agents/data_chat.json');
/** data_chat as the releases before built-in versions shipped it, first (data tools only) to last (with visualize). */
const SHIPPED = [1, 2, 3, 4].map((n) => definitionIn(`test/support/builtin-agents/data_chat.shipped-${n}.json`));
const PREVIOUS = SHIPPED[3];

type Line = Record<string, unknown>;

/** Log lines of the apps started with `logDestination: log.destination` (JSON, one a line). */
function logSink() {
  const raw: string[] = [];
  return {
    destination: { write: (chunk: string) => void raw.push(chunk) },
    lines: (msg: string): Line[] =>
      raw
        .join('')
        .split('\n')
        .filter((line) => line.trim())
        .map((line) => JSON.parse(line) as Line)
        .filter((line) => line.msg === msg),
  };
}

/**
 * Makes a database look like one the release before built-in versions left: that migration not applied
 * (its columns absent), and data_chat as that release stored it from `definition` (its planning without
 * the settings added since; `instructions` overridden as an admin's edit would have).
 */
async function asPreviousRelease(database: TestDatabase, definition: Definition, version = 1): Promise<void> {
  await sql(database.url, `alter table "agents" drop column "builtin_version", drop column "builtin_fingerprint"`);
  await sql(database.url, `delete from mikro_orm_migrations where name = '20261130000001_agent_builtins'`);
  await sql(
    database.url,
    `update "agents" set "label" = $1, "role" = $2, "description" = $3, "instructions" = $4, "model" = $5, "tools" = $6,
       "allowed_objects" = $7, "planning" = $8, "guardrails" = $9, "access" = $10, "active" = $11, "writes" = '{}',
       "grounding" = 'annotate', "version" = $12, "created_at" = '2026-11-01T00:00:00Z', "updated_at" = '2026-11-02T00:00:00Z'
     where "name" = 'data_chat'`,
    [
      definition.label,
      definition.role,
      definition.description,
      definition.instructions,
      JSON.stringify(definition.model),
      JSON.stringify(definition.tools),
      JSON.stringify(definition.allowedObjects),
      JSON.stringify(definition.planning),
      JSON.stringify(definition.guardrails),
      JSON.stringify(definition.access),
      definition.active,
      version,
    ],
  );
}

async function dataChat(t: TestApp): Promise<AgentResponse> {
  return bodyOf<AgentResponse>(await t.http.get('/api/v1/ai/agents/data_chat').set(bearer(t.adminKey)).expect(200));
}

async function builtinColumns(database: TestDatabase) {
  const [row] = await sql<{ builtin_version: number | null; builtin_fingerprint: string | null }>(
    database.url,
    `select "builtin_version", "builtin_fingerprint" from "agents" where "name" = 'data_chat'`,
  );
  return row;
}

async function upgradesAudited(database: TestDatabase): Promise<number> {
  const [row] = await sql<{ n: number }>(
    database.url,
    `select count(*)::int as n from "audit_log" where "action" = 'agent.upgrade' and "target" = 'data_chat' and "key_id" is null`,
  );
  return row.n;
}

/** Starts the app on `database` once, to stop it again right away (or after `work`). */
async function startOnce<T>(
  database: TestDatabase,
  work: (t: TestApp) => Promise<T>,
  log?: ReturnType<typeof logSink>,
): Promise<T> {
  const t = await startTestApp({
    database,
    ...(log ? { env: { LOG_LEVEL: 'info' }, logDestination: log.destination } : {}),
  });
  try {
    return await work(t);
  } finally {
    await t.close();
  }
}

describe('built-in agents across releases', () => {
  let database: TestDatabase;

  beforeEach(async () => {
    database = await createTestDatabase();
    // The first start creates the schema and data_chat.
    await startOnce(database, () => Promise.resolve());
  });
  afterEach(() => database.drop());

  it('creates data_chat at version 1 with the seed’s builtinVersion and what it wrote recorded', async () => {
    const created = await startOnce(database, dataChat);
    expect(created).toMatchObject({ version: 1, instructions: SEED.instructions });
    expect(await builtinColumns(database)).toEqual({
      builtin_version: SEED.builtinVersion,
      builtin_fingerprint: match.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(await upgradesAudited(database)).toBe(0);
  });

  it.each([
    ['the previous release', 4],
    ['the first release', 1],
  ])(
    'gives data_chat as %s left it, unedited, the new definition on start; a second start changes nothing',
    async (_release, n) => {
      await asPreviousRelease(database, SHIPPED[n - 1]);
      const log = logSink();

      const upgraded = await startOnce(database, dataChat, log);

      expect(upgraded).toMatchObject({ version: 2, instructions: SEED.instructions, tools: SEED.tools, active: true });
      expect(upgraded.instructions).toContain('{{r2.3.won_revenue}}');
      expect(upgraded.createdAt).toBe('2026-11-01T00:00:00.000Z');
      expect(upgraded.updatedAt).not.toBe('2026-11-02T00:00:00.000Z');
      const recorded = await builtinColumns(database);
      expect(recorded.builtin_version).toBe(SEED.builtinVersion);
      expect(log.lines('upgraded built-in agent')).toEqual([
        expect.objectContaining({
          level: 'info',
          agent: 'data_chat',
          fromBuiltinVersion: 1,
          builtinVersion: SEED.builtinVersion,
          version: 2,
        }),
      ]);
      expect(await upgradesAudited(database)).toBe(1);

      const again = logSink();
      const restarted = await startOnce(database, dataChat, again);
      expect(restarted).toEqual(upgraded);
      expect(await builtinColumns(database)).toEqual(recorded);
      expect(again.lines('upgraded built-in agent')).toEqual([]);
      expect(await upgradesAudited(database)).toBe(1);
    },
  );

  it('keeps the definition of a data_chat an admin edited, and says once per start that a newer one is not applied', async () => {
    await asPreviousRelease(database, { ...PREVIOUS, instructions: 'Edited by an admin' }, 2);
    const log = logSink();

    const kept = await startOnce(database, dataChat, log);

    expect(kept).toMatchObject({ version: 2, instructions: 'Edited by an admin', updatedAt: '2026-11-02T00:00:00.000Z' });
    expect(await builtinColumns(database)).toEqual({ builtin_version: null, builtin_fingerprint: null });
    expect(log.lines('built-in agent has a newer definition, not applied: it was edited through the API')).toEqual([
      expect.objectContaining({ level: 'info', agent: 'data_chat', builtinVersion: SEED.builtinVersion }),
    ]);
    expect(await upgradesAudited(database)).toBe(0);
  });

  it('records, without a new version, a data_chat an admin put back to the seed’s definition', async () => {
    await asPreviousRelease(database, { ...PREVIOUS, instructions: 'Edited by an admin' }, 2);
    await startOnce(database, async (t) => {
      await t.http
        .put('/api/v1/ai/agents/data_chat')
        .set(bearer(t.adminKey))
        .send({ ...SEED, builtinVersion: undefined })
        .expect(200);
    });
    const log = logSink();

    const after = await startOnce(database, dataChat, log);

    expect(after).toMatchObject({ version: 3, instructions: SEED.instructions });
    expect(await builtinColumns(database)).toMatchObject({ builtin_version: SEED.builtinVersion });
    expect(log.lines('built-in agent has a newer definition, not applied: it was edited through the API')).toEqual([]);
    expect(await upgradesAudited(database)).toBe(0);
  });

  it('keeps an edit made through the API after the upgrade: PUT bumps the version, the next start leaves it', async () => {
    await asPreviousRelease(database, PREVIOUS);
    await startOnce(database, async (t) => {
      const current = await dataChat(t);
      expect(current.version).toBe(2);
      const res = await t.http
        .put('/api/v1/ai/agents/data_chat')
        .set(bearer(t.adminKey))
        .send({ ...current, model: { temperature: 0.3 }, version: undefined, createdAt: undefined, updatedAt: undefined })
        .expect(200);
      expect(bodyOf<AgentResponse>(res)).toMatchObject({ version: 3, model: { temperature: 0.3 } });
    });

    const after = await startOnce(database, dataChat);

    expect(after).toMatchObject({ version: 3, model: { temperature: 0.3 }, instructions: SEED.instructions });
    expect(await upgradesAudited(database)).toBe(1);
  });

  it('upgrades once when two replicas start together on the previous release’s database', async () => {
    await asPreviousRelease(database, PREVIOUS);

    const replicas = await Promise.all([startTestApp({ database }), startTestApp({ database })]);
    try {
      const seen = await Promise.all(replicas.map(dataChat));
      for (const agent of seen) expect(agent).toMatchObject({ version: 2, instructions: SEED.instructions });
    } finally {
      await Promise.all(replicas.map((t) => t.close()));
    }
    expect(await upgradesAudited(database)).toBe(1);
  });
});
