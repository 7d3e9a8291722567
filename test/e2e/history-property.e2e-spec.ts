import fc from 'fast-check';
import type { Response } from 'supertest';
import type { HistoryResponse, TrashResponse } from '../../src/history/history.dto';
import type { BatchRecordsResponse } from '../../src/records/records.dto';
import { bodyOf, errorOf, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

/**
 * Random sequences of writes by two members (creates, updates, deletes, mixed batches, trash restores,
 * version restores, reverts of earlier change sets by their author) against a model that keeps, for each
 * change set, the records it touched with their state just before and just after it. After every command
 * the live records and the trash must equal the model; a revert must succeed exactly when no record of
 * its set was touched since (and then put each back as it was before the set), answer 409 revert_conflict
 * otherwise and write nothing; the revert of a revert redoes; a trash restore brings a record back as it
 * was deleted. At the end of each run a third key under a row filter (owner = its subject) and a hidden
 * field (note) reads every record's history: 404 unless the record is its own, never a note, and of its own
 * records exactly the admin's versions without the note.
 *
 * HISTORY_PROPERTY_RUNS / _SEED choose the runs; HISTORY_PROPERTY_STATS=1 prints how often each outcome
 * happened. The two describes after it keep the counterexamples it found (both fixed) as tests of their own.
 */

const OBJ = 'hprop';
const STAGES = ['open', 'won', 'lost'] as const;
const OWNERS = ['a', 'b', 'c'] as const;
type Actor = 'a' | 'b';

interface Vals {
  name: string;
  qty: number | null;
  stage: string | null;
  owner: string | null;
  note: string | null;
}
type Patch = Partial<Vals>;

/** Values as generated: a name is fresh or taken from an existing record (to provoke unique violations). */
interface PatchSpec {
  name?: number | 'fresh';
  qty?: number | null;
  stage?: string | null;
  owner?: string;
  note?: boolean;
}
type BatchOpSpec =
  { op: 'create'; values: PatchSpec } | { op: 'update'; target: number; values: PatchSpec } | { op: 'delete'; target: number };
type Cmd =
  | { k: 'create'; actor: Actor; values: PatchSpec }
  | { k: 'update'; actor: Actor; target: number; values: PatchSpec }
  | { k: 'delete'; actor: Actor; target: number }
  | { k: 'batch'; actor: Actor; ops: BatchOpSpec[] }
  | { k: 'trashRestore'; actor: Actor; target: number }
  | { k: 'versionRestore'; actor: Actor; target: number; pick: number }
  | { k: 'revert'; pick: number; wrongActor: boolean };

const actorArb = fc.constantFrom<Actor>('a', 'b');
const patchArb: fc.Arbitrary<PatchSpec> = fc.record(
  {
    name: fc.oneof({ weight: 3, arbitrary: fc.constant<'fresh'>('fresh') }, { weight: 1, arbitrary: fc.nat(20) }),
    qty: fc.option(fc.integer({ min: 0, max: 5 }), { nil: null }),
    stage: fc.option(fc.constantFrom(...STAGES), { nil: null }),
    owner: fc.constantFrom(...OWNERS),
    note: fc.boolean(),
  },
  { requiredKeys: [] },
);
const createArb = fc.record({
  name: fc.oneof({ weight: 4, arbitrary: fc.constant<'fresh'>('fresh') }, { weight: 1, arbitrary: fc.nat(20) }),
  qty: fc.option(fc.integer({ min: 0, max: 5 }), { nil: null }),
  stage: fc.option(fc.constantFrom(...STAGES), { nil: null }),
  owner: fc.constantFrom(...OWNERS),
  note: fc.boolean(),
});
const batchOpArb: fc.Arbitrary<BatchOpSpec> = fc.oneof(
  fc.record({ op: fc.constant<'create'>('create'), values: createArb }),
  fc.record({ op: fc.constant<'update'>('update'), target: fc.nat(20), values: patchArb }),
  fc.record({ op: fc.constant<'delete'>('delete'), target: fc.nat(20) }),
);
const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant<'create'>('create'), actor: actorArb, values: createArb }) },
  {
    weight: 3,
    arbitrary: fc.record({ k: fc.constant<'update'>('update'), actor: actorArb, target: fc.nat(20), values: patchArb }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant<'delete'>('delete'), actor: actorArb, target: fc.nat(20) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant<'batch'>('batch'),
      actor: actorArb,
      ops: fc.array(batchOpArb, { minLength: 1, maxLength: 4 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant<'trashRestore'>('trashRestore'), actor: actorArb, target: fc.nat(20) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant<'versionRestore'>('versionRestore'),
      actor: actorArb,
      target: fc.nat(20),
      pick: fc.nat(20),
    }),
  },
  { weight: 3, arbitrary: fc.record({ k: fc.constant<'revert'>('revert'), pick: fc.nat(40), wrongActor: fc.boolean() }) },
);

interface ModelRecord {
  values: Vals;
  trashed: boolean;
}
interface ModelSet {
  id: string;
  author: Actor;
  label: string;
  /** How its versions say they were written. */
  via: 'api' | 'batch' | 'restore' | 'revert';
  /** Each record it touched: its state just before and just after the set (null: not live). */
  before: Map<string, Vals | null>;
  after: Map<string, Vals | null>;
  /** The set it reverts, when it is a revert. */
  reverts?: ModelSet;
  /** Records it left in the trash: their values as deleted (when not their values before the set). */
  trashedAs?: Map<string, Vals>;
}

/** One entry of a 409 revert_conflict's details.records. */
interface ConflictDetail {
  id: string;
  field: string | null;
  expected: unknown;
  current: unknown;
}

const valsOf = (row: Record<string, unknown>): Vals => ({
  name: row.name as string,
  qty: (row.qty as number | null | undefined) ?? null,
  stage: (row.stage as string | null | undefined) ?? null,
  owner: (row.owner as string | null | undefined) ?? null,
  note: (row.note as string | null | undefined) ?? null,
});
const same = (x: Vals | null | undefined, y: Vals | null | undefined) => JSON.stringify(x) === JSON.stringify(y);
const short = (id: string) => id.slice(0, 8);

describe('history property: change sets, reverts, restores and history reads against a model', () => {
  let t: TestApp;
  const keys = {} as Record<Actor | 'c', string>;
  let run = 0;
  let noteCounter = 0;
  /** How often each outcome happened over all runs (printed with HISTORY_PROPERTY_STATS=1). */
  const stats: Record<string, number> = {};
  const count = (outcome: string) => (stats[outcome] = (stats[outcome] ?? 0) + 1);

  beforeAll(async () => {
    // Hundreds of requests a run: no rate limit.
    t = await startTestApp({ env: { RATE_LIMIT_PER_MINUTE: '0' } });
    await createObject(t, OBJ, [
      fieldSpec('name', 'text', { required: true, unique: true }),
      fieldSpec('qty', 'integer'),
      fieldSpec('stage', 'select', { options: [...STAGES] }),
      fieldSpec('owner', 'text'),
      fieldSpec('note', 'text'),
    ]);
    keys.a = (await createApiKey(t, { name: 'hist a', role: 'member', subject: 'a' })).secret;
    keys.b = (await createApiKey(t, { name: 'hist b', role: 'member', subject: 'b' })).secret;
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'hist-c',
        objects: { [OBJ]: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['note'] } },
      })
      .expect(201);
    keys.c = (await createApiKey(t, { name: 'hist c', role: 'member', subject: 'c', policies: ['hist-c'] })).secret;
  }, 120_000);
  afterAll(async () => {
    if (process.env.HISTORY_PROPERTY_STATS) process.stdout.write(`history property outcomes: ${JSON.stringify(stats)}\n`);
    await t?.close();
  });

  const base = `/api/v1/objects/${OBJ}`;

  /** The live records and the trash as the admin reads them. */
  async function snapshot(): Promise<{ live: Map<string, Vals>; trash: Map<string, Vals> }> {
    const page = bodyOf<RecordPage>(await t.http.get(`${base}/records`).query({ limit: '200' }).set(asAdmin(t)).expect(200));
    const trash = bodyOf<TrashResponse>(await t.http.get(`${base}/trash`).query({ limit: '200' }).set(asAdmin(t)).expect(200));
    if (page.records.length >= 200 || trash.records.length >= 200) throw new Error('snapshot exceeds one page');
    return {
      live: new Map(page.records.map((r) => [r.id, valsOf(r)])),
      trash: new Map(trash.records.map((r) => [r.id, valsOf(r.record)])),
    };
  }

  /** Empties the object (live and trash) between runs. */
  async function cleanup(): Promise<void> {
    const { live } = await snapshot();
    for (const id of live.keys()) await t.http.delete(`${base}/records/${id}`).set(asAdmin(t)).expect(204);
    const { trash } = await snapshot();
    for (const id of trash.keys()) await t.http.delete(`${base}/trash/${id}`).set(asAdmin(t)).expect(204);
  }

  async function runSequence(cmds: Cmd[]): Promise<void> {
    run++;
    await cleanup();
    let nameCounter = 0;
    const records = new Map<string, ModelRecord>();
    const order: string[] = [];
    const sets: ModelSet[] = [];
    const touches = new Map<string, string[]>();
    const log: string[] = [];

    const freshName = () => `h${run}n${nameCounter++}`;
    const freshNote = () => `qqNOTE${noteCounter++}qq`;
    const live = () => order.filter((id) => !records.get(id)!.trashed);
    const trashed = () => order.filter((id) => records.get(id)!.trashed);
    const fail = (message: string): never => {
      throw new Error(`${message}\n--- sequence (run ${run}) ---\n${log.join('\n')}`);
    };
    const lastTouch = (id: string) => touches.get(id)?.at(-1);
    /** Names an existing record (live or trashed), by index; fresh when there is none. */
    const nameFor = (spec: number | 'fresh') => {
      if (spec === 'fresh' || !order.length) return freshName();
      return records.get(order[spec % order.length])!.values.name;
    };
    const patchOf = (spec: PatchSpec, current: Vals | null): Patch => {
      const patch: Patch = {};
      if (spec.name !== undefined) patch.name = nameFor(spec.name);
      if (spec.qty !== undefined) patch.qty = spec.qty;
      if (spec.stage !== undefined) patch.stage = spec.stage;
      if (spec.owner !== undefined) patch.owner = spec.owner;
      if (spec.note) patch.note = freshNote();
      // Never a write that changes nothing: the model's "touched" stays exact.
      if (current && same({ ...current, ...patch }, current)) patch.note = freshNote();
      return patch;
    };
    const createValues = (spec: PatchSpec): Vals => ({
      name: nameFor(spec.name ?? 'fresh'),
      qty: spec.qty ?? null,
      stage: spec.stage ?? null,
      owner: spec.owner ?? null,
      note: spec.note ? freshNote() : null,
    });
    /** Whether live names are unique in a state (id → values or null). */
    const uniqueIn = (state: Map<string, Vals | null>) => {
      const names = [...state.values()].filter((v): v is Vals => v !== null).map((v) => v.name);
      return new Set(names).size === names.length;
    };
    const liveState = () => new Map(live().map((id) => [id, records.get(id)!.values] as [string, Vals | null]));
    const record = (set: ModelSet) => {
      sets.push(set);
      for (const [id, after] of set.after) {
        touches.set(id, [...(touches.get(id) ?? []), set.id]);
        const existing = records.get(id);
        if (after) records.set(id, { values: after, trashed: false });
        else records.set(id, { values: set.trashedAs?.get(id) ?? existing!.values, trashed: true });
        if (!existing) order.push(id);
      }
    };
    const expectStatus = (res: Response, status: number, code?: string) => {
      count(`${log.at(-1)?.split(' ')[1] ?? '?'} ${status}${code ? ` ${code}` : ''}`);
      if (res.status !== status || (code && errorOf(res).code !== code)) {
        fail(`expected ${status}${code ? ` ${code}` : ''}, got ${res.status} ${res.text.slice(0, 500)}`);
      }
    };

    async function checkState(when: string): Promise<void> {
      const { live: dbLive, trash: dbTrash } = await snapshot();
      const modelLive = new Map(live().map((id) => [id, records.get(id)!.values]));
      const modelTrash = new Map(trashed().map((id) => [id, records.get(id)!.values]));
      const diff = (label: string, db: Map<string, Vals>, model: Map<string, Vals>) => {
        const ids = new Set([...db.keys(), ...model.keys()]);
        for (const id of ids) {
          if (!same(db.get(id), model.get(id))) {
            fail(
              `${when}: ${label} record ${short(id)} is ${JSON.stringify(db.get(id) ?? 'absent')}, model says ${JSON.stringify(model.get(id) ?? 'absent')}`,
            );
          }
        }
      };
      diff('live', dbLive, modelLive);
      diff('trash', dbTrash, modelTrash);
    }

    for (const cmd of cmds) {
      switch (cmd.k) {
        case 'create': {
          const values = createValues(cmd.values);
          const collides = !uniqueIn(new Map([...liveState(), ['new', values]]));
          log.push(`${cmd.actor}: create ${JSON.stringify(values)}${collides ? ' (name taken)' : ''}`);
          const res = await t.http.post(`${base}/records`).set(bearer(keys[cmd.actor])).send(values);
          if (collides) {
            expectStatus(res, 409, 'unique_violation');
            break;
          }
          expectStatus(res, 201);
          const body = bodyOf<{ id: string; changeSetId: string }>(res);
          log[log.length - 1] += ` → ${short(body.id)} in set ${short(body.changeSetId)}`;
          record({
            id: body.changeSetId,
            author: cmd.actor,
            via: 'api',
            label: `create ${short(body.id)}`,
            before: new Map([[body.id, null]]),
            after: new Map([[body.id, values]]),
          });
          break;
        }
        case 'update': {
          const ids = live();
          if (!ids.length) continue;
          const id = ids[cmd.target % ids.length];
          const current = records.get(id)!.values;
          const patch = patchOf(cmd.values, current);
          const next = { ...current, ...patch };
          const collides = !uniqueIn(new Map([...liveState(), [id, next]]));
          log.push(`${cmd.actor}: update ${short(id)} ${JSON.stringify(patch)}${collides ? ' (name taken)' : ''}`);
          const res = await t.http.patch(`${base}/records/${id}`).set(bearer(keys[cmd.actor])).send(patch);
          if (collides) {
            expectStatus(res, 409, 'unique_violation');
            break;
          }
          expectStatus(res, 200);
          const setId = bodyOf<{ changeSetId: string }>(res).changeSetId;
          log[log.length - 1] += ` in set ${short(setId)}`;
          record({
            id: setId,
            author: cmd.actor,
            via: 'api',
            label: `update ${short(id)}`,
            before: new Map([[id, current]]),
            after: new Map([[id, next]]),
          });
          break;
        }
        case 'delete': {
          const ids = live();
          if (!ids.length) continue;
          const id = ids[cmd.target % ids.length];
          log.push(`${cmd.actor}: delete ${short(id)}`);
          const res = await t.http.delete(`${base}/records/${id}`).set(bearer(keys[cmd.actor]));
          expectStatus(res, 204);
          const setId = String(res.headers['change-set-id']);
          log[log.length - 1] += ` in set ${short(setId)}`;
          record({
            id: setId,
            author: cmd.actor,
            via: 'api',
            label: `delete ${short(id)}`,
            before: new Map([[id, records.get(id)!.values]]),
            after: new Map([[id, null]]),
          });
          break;
        }
        case 'batch': {
          // Simulated in order on a copy of the live state; the first failing operation fails the batch.
          const state = liveState();
          const before = new Map<string, Vals | null>();
          const trashedAs = new Map<string, Vals>();
          const operations: Array<Record<string, unknown>> = [];
          const createdAt: number[] = [];
          const createdValues: Vals[] = [];
          /** The records in the order the batch first touched them (a create: its operation's index). */
          const touchOrder: Array<string | number> = [];
          let failure: { status: number; code: string } | null = null;
          const targetOf = (n: number) => {
            const ids = live();
            return ids.length ? ids[n % ids.length] : null;
          };
          for (const op of cmd.ops) {
            if (op.op === 'create') {
              const values = createValues(op.values);
              operations.push({ op: 'create', record: values });
              createdAt.push(operations.length - 1);
              createdValues.push(values);
              touchOrder.push(operations.length - 1);
              const key = `new${operations.length}`;
              state.set(key, values);
              if (!failure && !uniqueIn(state)) failure = { status: 409, code: 'unique_violation' };
            } else {
              const id = targetOf(op.target);
              if (!id) continue;
              const current = state.get(id) ?? null;
              if (!touchOrder.includes(id)) touchOrder.push(id);
              if (op.op === 'delete') {
                operations.push({ op: 'delete', id });
                if (!failure && !current) failure = { status: 404, code: 'record_not_found' };
                if (!before.has(id)) before.set(id, current);
                if (current) trashedAs.set(id, current);
                state.set(id, null);
              } else {
                const patch = patchOf(op.values, current);
                operations.push({ op: 'update', id, record: patch });
                if (!failure && !current) failure = { status: 404, code: 'record_not_found' };
                if (!before.has(id)) before.set(id, current);
                if (current) state.set(id, { ...current, ...patch });
                if (!failure && !uniqueIn(state)) failure = { status: 409, code: 'unique_violation' };
              }
            }
          }
          if (!operations.length) continue;
          log.push(
            `${cmd.actor}: batch ${JSON.stringify(operations.map((o) => ({ ...o, ...(o.id ? { id: short(o.id as string) } : {}) })))}` +
              (failure ? ` (fails: ${failure.code})` : ''),
          );
          const res = await t.http.post(`${base}/records/batch`).set(bearer(keys[cmd.actor])).send({ operations });
          if (failure) {
            expectStatus(res, failure.status, failure.code);
            break;
          }
          expectStatus(res, 200);
          const body = bodyOf<BatchRecordsResponse>(res);
          const ordered = new Map<string, Vals | null>();
          const after = new Map<string, Vals | null>();
          for (const entry of touchOrder) {
            if (typeof entry === 'number') {
              const id = body.results[entry].id!;
              ordered.set(id, null);
              after.set(id, createdValues[createdAt.indexOf(entry)]);
            } else {
              ordered.set(entry, before.get(entry)!);
              after.set(entry, state.get(entry) ?? null);
            }
          }
          log[log.length - 1] +=
            ` in set ${short(body.changeSetId)}, created ${createdAt.map((i) => short(body.results[i].id!)).join(',')}`;
          record({ id: body.changeSetId, author: cmd.actor, via: 'batch', label: 'batch', before: ordered, after, trashedAs });
          break;
        }
        case 'trashRestore': {
          const ids = trashed();
          if (!ids.length) continue;
          const id = ids[cmd.target % ids.length];
          const values = records.get(id)!.values;
          const collides = !uniqueIn(new Map([...liveState(), [id, values]]));
          log.push(`${cmd.actor}: trash restore ${short(id)}${collides ? ' (name taken)' : ''}`);
          const res = await t.http.post(`${base}/trash/${id}/restore`).set(bearer(keys[cmd.actor]));
          if (collides) {
            expectStatus(res, 409, 'unique_violation');
            break;
          }
          expectStatus(res, 200);
          const body = bodyOf<Record<string, unknown> & { changeSetId: string }>(res);
          // Restored with the values it had when deleted.
          if (!same(valsOf(body), values))
            fail(`trash restore of ${short(id)} answered ${JSON.stringify(valsOf(body))}, deleted as ${JSON.stringify(values)}`);
          log[log.length - 1] += ` in set ${short(body.changeSetId)}`;
          record({
            id: body.changeSetId,
            author: cmd.actor,
            via: 'restore',
            label: `trash restore ${short(id)}`,
            before: new Map([[id, null]]),
            after: new Map([[id, values]]),
          });
          break;
        }
        case 'versionRestore': {
          const ids = live();
          if (!ids.length) continue;
          const id = ids[cmd.target % ids.length];
          const { versions } = bodyOf<HistoryResponse>(
            await t.http.get(`${base}/records/${id}/history`).query({ limit: '100' }).set(asAdmin(t)).expect(200),
          );
          const version = versions[cmd.pick % versions.length];
          const then = valsOf(
            bodyOf<Record<string, unknown>>(
              await t.http.get(`${base}/records/${id}/history/${version.version}`).set(asAdmin(t)).expect(200),
            ),
          );
          // The record at a version is the model's state after its change set (when it is that set's last version of it).
          const set = sets.find((s) => s.id === version.changeSetId);
          const lastOfSet = versions.find((v) => v.changeSetId === version.changeSetId) === version;
          const expectedThen = set?.after.get(id);
          if (set && lastOfSet && expectedThen && version.op !== 'delete' && !same(then, expectedThen)) {
            fail(
              `history/${version.version} of ${short(id)} (set ${short(set.id)}) is ${JSON.stringify(then)}, model ${JSON.stringify(expectedThen)}`,
            );
          }
          const current = records.get(id)!.values;
          const collides = !uniqueIn(new Map([...liveState(), [id, then]]));
          log.push(
            `${cmd.actor}: version restore ${short(id)} to ${version.op} ${JSON.stringify(then)}${collides ? ' (name taken)' : ''}`,
          );
          const res = await t.http
            .post(`${base}/records/${id}/restore`)
            .set(bearer(keys[cmd.actor]))
            .send({ version: version.version });
          if (collides) {
            expectStatus(res, 409, 'unique_violation');
            break;
          }
          expectStatus(res, 200);
          const body = bodyOf<Record<string, unknown> & { changeSetId: string }>(res);
          if (!same(valsOf(body), then))
            fail(`version restore answered ${JSON.stringify(valsOf(body))}, version was ${JSON.stringify(then)}`);
          if (same(then, current)) {
            log[log.length - 1] += ' (equal to now: writes nothing)';
            break;
          }
          log[log.length - 1] += ` in set ${short(body.changeSetId)}`;
          record({
            id: body.changeSetId,
            author: cmd.actor,
            via: 'restore',
            label: `version restore ${short(id)}`,
            before: new Map([[id, current]]),
            after: new Map([[id, then]]),
          });
          break;
        }
        case 'revert': {
          if (!sets.length) continue;
          const set = sets[cmd.pick % sets.length];
          if (cmd.wrongActor) {
            const other: Actor = set.author === 'a' ? 'b' : 'a';
            log.push(`${other}: revert set ${short(set.id)} (${set.label}) of ${set.author} → expect 403`);
            expectStatus(await t.http.post(`/api/v1/change-sets/${set.id}/revert`).set(bearer(keys[other])), 403);
            await checkState('after a forbidden revert');
          }
          const stale = [...set.after.keys()].filter((id) => lastTouch(id) !== set.id);
          const target = new Map<string, Vals | null>();
          for (const [id, was] of set.before) target.set(id, was);
          const finalState = new Map([...liveState(), ...target]);
          const collides = !stale.length && !uniqueIn(finalState);
          // The server undoes the records last changed first, so a unique value the set moved from one record to
          // another is freed before it is given back (see the tests below). Only values that cannot be put back one
          // record at a time in that order (two records that swapped names) collide on the way: 409
          // unique_violation, nothing written.
          const steps = liveState();
          let transient = false;
          for (const [id, was] of [...target].reverse()) {
            steps.set(id, was);
            if (!uniqueIn(steps)) transient = true;
          }
          const knownOrderBug = !stale.length && !collides && transient;
          log.push(
            `${set.author}: revert set ${short(set.id)} (${set.label})` +
              (stale.length ? ` → expect 409 revert_conflict (touched since: ${stale.map(short).join(',')})` : '') +
              (collides ? ' → expect 409 unique_violation' : ''),
          );
          const res = await t.http.post(`/api/v1/change-sets/${set.id}/revert`).set(bearer(keys[set.author]));
          if (stale.length) {
            expectStatus(res, 409, 'revert_conflict');
            const conflicts = errorOf<{ records: ConflictDetail[] }>(res).details.records;
            const named = new Set(conflicts.map((r) => r.id));
            if ([...named].sort().join() !== [...stale].sort().join()) {
              fail(`revert_conflict names ${[...named].map(short).join(',')}, touched since: ${stale.map(short).join(',')}`);
            }
            // Each conflict: a field with the value the set left and the value now, or the record as a whole.
            for (const conflict of conflicts) {
              const now = records.get(conflict.id)!;
              const left = set.after.get(conflict.id);
              const problem = (why: string) =>
                fail(
                  `revert_conflict entry ${JSON.stringify({ ...conflict, id: short(conflict.id) })}: ${why}; ` +
                    `the set left ${JSON.stringify(left)}, now ${now.trashed ? 'trashed ' : ''}${JSON.stringify(now.values)}`,
                );
              if (conflict.field === null) {
                const expected = now.trashed ? ['present', 'deleted'] : ['unchanged', 'changed'];
                if (conflict.expected !== expected[0] || conflict.current !== expected[1])
                  problem(`expected ${expected.join(' → ')}`);
                continue;
              }
              if (now.trashed || !(conflict.field in now.values)) problem('names a field of a record not live');
              const field = conflict.field as keyof Vals;
              if (conflict.current !== now.values[field]) problem(`current should be ${JSON.stringify(now.values[field])}`);
              if (left && conflict.expected !== left[field]) problem(`expected should be ${JSON.stringify(left[field])}`);
              if (conflict.expected === conflict.current) problem('names a field that holds the value the set left');
            }
            break;
          }
          if (collides) {
            expectStatus(res, 409, 'unique_violation');
            break;
          }
          if (knownOrderBug && res.status === 409) {
            count('revert: unique values swapped within the set');
            log[log.length - 1] += ' → 409 unique_violation on the way (values swapped within the set)';
            expectStatus(res, 409, 'unique_violation');
            break;
          }
          expectStatus(res, 200);
          const revertId = bodyOf<{ changeSetId: string }>(res).changeSetId;
          // A record the set created is gone from reads (checkState finds it in the trash).
          for (const [id, was] of target) {
            if (was === null) {
              const read = await t.http.get(`${base}/records/${id}`).set(bearer(keys[set.author]));
              if (read.status !== 404)
                fail(`revert of ${short(set.id)}: the record it created, ${short(id)}, reads ${read.status}`);
            }
          }
          log[log.length - 1] += ` → set ${short(revertId)}`;
          const before = new Map<string, Vals | null>();
          for (const id of set.after.keys()) before.set(id, records.get(id)!.trashed ? null : records.get(id)!.values);
          record({
            id: revertId,
            author: set.author,
            via: 'revert',
            label: `revert of ${short(set.id)}`,
            before,
            after: target,
            reverts: set,
          });
          // A revert of a revert redoes: each record as the original set left it.
          if (set.reverts) {
            for (const [id, after] of set.reverts.after) {
              const now = records.get(id)!;
              if (!same(now.trashed ? null : now.values, after))
                fail(`redo of ${short(set.reverts.id)}: model drift on ${short(id)}`);
            }
          }
          break;
        }
      }
      await checkState(`after "${log[log.length - 1]}"`);
    }

    // Each record's history (as the admin) lists the change sets that touched it, newest first, each as written.
    const adminVersions = new Map<string, HistoryResponse['versions']>();
    for (const id of order) {
      const { versions } = bodyOf<HistoryResponse>(
        await t.http.get(`${base}/records/${id}/history`).query({ limit: '100' }).set(asAdmin(t)).expect(200),
      );
      adminVersions.set(id, versions);
      const seen = versions.map((v) => v.changeSetId).filter((setId, i, all) => i === 0 || all[i - 1] !== setId);
      const expected = [...(touches.get(id) ?? [])].reverse();
      if (seen.join() !== expected.join()) {
        fail(
          `history of ${short(id)} lists sets ${seen.map((x) => short(String(x))).join(',')}, model ${expected.map(short).join(',')}`,
        );
      }
      for (const version of versions) {
        const set = sets.find((x) => x.id === version.changeSetId)!;
        if (version.via !== set.via)
          fail(`version ${version.version} of ${short(id)} says via ${version.via}, its set is ${set.via}`);
      }
      if (versions.at(-1)?.op !== 'create') fail(`history of ${short(id)} does not start with its create`);
    }
    // The third key: history 404 outside its row filter, never a hidden field.
    for (const id of order) {
      const rec = records.get(id)!;
      const res = await t.http.get(`${base}/records/${id}/history`).set(bearer(keys.c));
      const own = rec.values.owner === 'c';
      if (res.status !== (own ? 200 : 404)) {
        fail(
          `C reads the history of ${short(id)} (owner ${rec.values.owner}${rec.trashed ? ', trashed' : ''}): ${res.status}, expected ${own ? 200 : 404}`,
        );
      }
      if (res.text.includes('note') || res.text.includes('qqNOTE'))
        fail(`C's history of ${short(id)} shows the hidden note: ${res.text.slice(0, 500)}`);
      if (own && bodyOf<HistoryResponse>(res).versions.length === 0) fail(`C sees no version of its own record ${short(id)}`);
      if (own) {
        // The admin's versions without the note: those that changed only the note are not shown to C.
        const expected = adminVersions
          .get(id)!
          .map((v) => ({
            ...v,
            keyId: undefined,
            changes: Object.fromEntries(Object.entries(v.changes).filter(([f]) => f !== 'note')),
          }))
          .filter((v) => Object.keys(v.changes).length > 0)
          .map((v) => [v.version, v.op, v.via, v.changeSetId, JSON.stringify(v.changes)].join(' '));
        const got = bodyOf<HistoryResponse>(res).versions.map((v) =>
          [v.version, v.op, v.via, v.changeSetId, JSON.stringify(v.changes)].join(' '),
        );
        if (got.join('\n') !== expected.join('\n')) {
          fail(`C's history of ${short(id)}:\n${got.join('\n')}\nexpected (admin's without note):\n${expected.join('\n')}`);
        }
      }
      // A version read by C: 404 outside its filter, never the note.
      const first = adminVersions.get(id)!.at(-1)!;
      const at = await t.http.get(`${base}/records/${id}/history/${first.version}`).set(bearer(keys.c));
      if (at.status !== (own ? 200 : 404)) fail(`C reads version ${first.version} of ${short(id)}: ${at.status}`);
      if (at.text.includes('note') || at.text.includes('qqNOTE')) fail(`C's version of ${short(id)} shows the note: ${at.text}`);
      const asA = await t.http.get(`${base}/records/${id}/history`).set(bearer(keys.a));
      if (asA.status !== 200) fail(`A reads the history of ${short(id)}: ${asA.status}`);
    }
    const cTrash = await t.http.get(`${base}/trash`).query({ limit: '200' }).set(bearer(keys.c)).expect(200);
    if (cTrash.text.includes('qqNOTE')) fail(`C's trash shows a note: ${cTrash.text.slice(0, 500)}`);
    const cTrashIds = bodyOf<TrashResponse>(cTrash).records.map((r) => r.id);
    for (const id of cTrashIds) {
      if (records.get(id)?.values.owner !== 'c') fail(`C's trash lists ${short(id)}, owner ${records.get(id)?.values.owner}`);
    }
  }

  it('holds for random sequences of writes, restores and reverts by two members', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(cmdArb, { minLength: 8, maxLength: 15 }), async (cmds) => runSequence(cmds)),
      {
        numRuns: Number(process.env.HISTORY_PROPERTY_RUNS ?? 40),
        seed: Number(process.env.HISTORY_PROPERTY_SEED ?? 20261128),
        interruptAfterTimeLimit: 240_000,
        markInterruptAsFailure: false,
      },
    );
  }, 300_000);
});

/**
 * Counterexample found by the property above (shrunk): a revert undoes the records of its change set in the
 * order the set first touched them, so a unique value the set moved from one record to another collides on
 * the way back although the state before the set is consistent. Expected: 200, the state before the batch.
 */
describe('a revert of a batch that moved a unique name (found by the property)', () => {
  let t: TestApp;
  let member: string;
  const records = '/api/v1/objects/swap/records';

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'swap', [fieldSpec('name', 'text', { required: true, unique: true }), fieldSpec('qty', 'integer')]);
    member = (await createApiKey(t, { name: 'swapper', role: 'member' })).secret;
  }, 120_000);
  afterAll(() => t?.close());

  const revertBatch = async (operations: unknown[]) => {
    const batch = bodyOf<BatchRecordsResponse>(
      await t.http.post(`${records}/batch`).set(bearer(member)).send({ operations }).expect(200),
    );
    const res = await t.http.post(`/api/v1/change-sets/${batch.changeSetId}/revert`).set(bearer(member));
    return { batch, res };
  };

  it('reverts [rename X away from a name, create Y with that name]: X gets its name back, Y goes to the trash', async () => {
    const x = bodyOf<{ id: string }>(await t.http.post(records).set(bearer(member)).send({ name: 'n0' }).expect(201));
    const { batch, res } = await revertBatch([
      { op: 'update', id: x.id, record: { name: 'n1' } },
      { op: 'create', record: { name: 'n0' } },
    ]);
    expect([res.status, errorOf(res).code]).toEqual([200, undefined]);
    expect(bodyOf<{ name: string }>(await t.http.get(`${records}/${x.id}`).set(bearer(member)).expect(200)).name).toBe('n0');
    await t.http.get(`${records}/${batch.results[1].id}`).set(bearer(member)).expect(404);
  });

  it("reverts [delete X, create Y with X's name]: X comes back, Y goes to the trash", async () => {
    const x = bodyOf<{ id: string }>(await t.http.post(records).set(bearer(member)).send({ name: 'd0' }).expect(201));
    const { batch, res } = await revertBatch([
      { op: 'delete', id: x.id },
      { op: 'create', record: { name: 'd0' } },
    ]);
    expect([res.status, errorOf(res).code]).toEqual([200, undefined]);
    expect(bodyOf<{ name: string }>(await t.http.get(`${records}/${x.id}`).set(bearer(member)).expect(200)).name).toBe('d0');
    await t.http.get(`${records}/${batch.results[1].id}`).set(bearer(member)).expect(404);
  });
});

/**
 * Found by the property above (shrunk by hand): a revert_conflict named a field changed since that the set
 * itself did not write with `expected: null`, where the set left it with a value.
 */
describe('revert_conflict details of a field the set did not write (found by the property)', () => {
  let t: TestApp;
  let member: string;
  let other: string;
  const records = '/api/v1/objects/deal/records';

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'deal', [
      fieldSpec('name', 'text', { required: true, unique: true }),
      fieldSpec('qty', 'integer'),
      fieldSpec('owner', 'text'),
    ]);
    member = (await createApiKey(t, { name: 'member', role: 'member' })).secret;
    other = (await createApiKey(t, { name: 'other', role: 'member' })).secret;
  }, 120_000);
  afterAll(() => t?.close());

  it('names the value the set left as expected', async () => {
    const x = bodyOf<{ id: string }>(
      await t.http.post(records).set(bearer(member)).send({ name: 'x', qty: 0, owner: 'a' }).expect(201),
    );
    const set = bodyOf<{ changeSetId: string }>(
      await t.http.patch(`${records}/${x.id}`).set(bearer(member)).send({ qty: 1 }).expect(200),
    );
    await t.http.patch(`${records}/${x.id}`).set(bearer(other)).send({ owner: 'b' }).expect(200);
    const refused = await t.http.post(`/api/v1/change-sets/${set.changeSetId}/revert`).set(bearer(member)).expect(409);
    expect(errorOf(refused).code).toBe('revert_conflict');
    // The set left owner "a"; it is "b" now.
    expect(errorOf(refused).details).toEqual({ records: [{ id: x.id, field: 'owner', expected: 'a', current: 'b' }] });
  });
});
