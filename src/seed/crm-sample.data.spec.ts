import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIELD_TYPES, SYSTEM_FIELDS, type FieldType } from '../metadata/object-metadata.types';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import {
  CRM_SAMPLE_DEFAULT_COUNTS,
  CRM_SAMPLE_REFERENCE_DATE,
  generateCrmSample,
  sampleRecordId,
  type SampleDataset,
} from './crm-sample.data';

/** Object definition exactly as seeds/objects/*.json store it (the admin API's input shape). */
interface FieldDefinition {
  name: string;
  label: string;
  type: FieldType;
  required: boolean;
  unique: boolean;
  indexed: boolean;
  description?: string;
  options?: string[];
  reference?: string;
}
interface ObjectDefinition {
  name: string;
  label: string;
  description?: string;
  fields: FieldDefinition[];
}
type Row = Record<string, unknown>;

const SEED_DIR = join(__dirname, '../../seeds/objects');
const readJson = <T>(file: string): T => JSON.parse(readFileSync(join(SEED_DIR, file), 'utf8')) as T;

const manifest = readJson<{ objects: string[] }>('manifest.json');
const definitions = manifest.objects.map((name) => readJson<ObjectDefinition>(`${name}.json`));
const definitionOf = (name: string): ObjectDefinition => {
  const found = definitions.find((d) => d.name === name);
  if (!found) throw new Error(`No definition for ${name}`);
  return found;
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const EMAIL = /^[a-z0-9.]+@[a-z0-9.-]+\.[a-z]{2,}$/;

function recordsOf(dataset: SampleDataset, name: string): Row[] {
  const found = dataset.objects.find((o) => o.name === name);
  if (!found) throw new Error(`Dataset lacks ${name}`);
  return found.records;
}

/** Why `value` is not a valid API value for the field, or null when it is. */
function typeProblem(field: FieldDefinition, value: unknown): string | null {
  const isString = typeof value === 'string' && value.length > 0;
  const ok = ((): boolean => {
    switch (field.type) {
      case 'text':
      case 'textarea':
      case 'phone':
        return isString;
      case 'email':
        return isString && EMAIL.test(value);
      case 'url':
        return isString && /^https:\/\/[a-z0-9.-]+\.[a-z]{2,}$/.test(value);
      case 'number':
        return typeof value === 'number' && Number.isFinite(value);
      case 'currency':
        return typeof value === 'number' && Math.round(value * 100) / 100 === value && value >= 0;
      case 'percent':
        return typeof value === 'number' && value >= 0 && value <= 100;
      case 'integer':
        return Number.isInteger(value);
      case 'boolean':
        return typeof value === 'boolean';
      case 'date':
        return isString && DATE.test(value) && new Date(`${value}T00:00:00Z`).toISOString().startsWith(value);
      case 'datetime':
        return isString && DATETIME.test(value) && new Date(value).toISOString() === value;
      case 'select':
        return isString && (field.options ?? []).includes(value);
      case 'multiselect':
        return (
          Array.isArray(value) &&
          value.every((v) => (field.options ?? []).includes(v as string)) &&
          new Set(value).size === value.length
        );
      case 'lookup':
        return isString && UUID.test(value);
      case 'json':
        return typeof value === 'object' && value !== null && !Array.isArray(value);
    }
  })();
  return ok ? null : `${field.name} (${field.type}) = ${JSON.stringify(value)}`;
}

describe('seeds/objects definitions', () => {
  it('lists exactly the four sample objects in dependency order', () => {
    expect(manifest.objects).toEqual(['account', 'contact', 'deal', 'activity']);
    definitions.forEach((d, i) => expect(d.name).toBe(manifest.objects[i]));
  });

  it.each(manifest.objects)('%s is a valid, documented object definition', (name) => {
    const definition = definitionOf(name);
    const systemNames = SYSTEM_FIELDS.map((f) => f.name);
    expect(definition.name).toMatch(IDENTIFIER_PATTERN);
    expect(definition.label).toBeTruthy();
    expect(definition.description?.length).toBeGreaterThan(20);
    expect(new Set(definition.fields.map((f) => f.name)).size).toBe(definition.fields.length);
    for (const field of definition.fields) {
      expect(field.name).toMatch(IDENTIFIER_PATTERN);
      expect(systemNames).not.toContain(field.name);
      expect(FIELD_TYPES).toContain(field.type);
      expect(field.label).toBeTruthy();
      expect(field.description?.length).toBeGreaterThan(10);
      expect([field.required, field.unique, field.indexed].every((b) => typeof b === 'boolean')).toBe(true);
      const hasOptions = field.type === 'select' || field.type === 'multiselect';
      expect(field.options !== undefined).toBe(hasOptions);
      if (hasOptions) expect(new Set(field.options).size).toBe(field.options?.length);
      expect(field.reference !== undefined).toBe(field.type === 'lookup');
      if (field.reference) {
        // Targets must be loaded before the object that points at them.
        expect(manifest.objects.indexOf(field.reference)).toBeGreaterThanOrEqual(0);
        expect(manifest.objects.indexOf(field.reference)).toBeLessThan(manifest.objects.indexOf(name));
      }
    }
  });

  it('uses the agreed deal stages', () => {
    const stage = definitionOf('deal').fields.find((f) => f.name === 'stage');
    expect(stage?.options).toEqual(['prospecting', 'qualification', 'proposal', 'negotiation', 'won', 'lost']);
  });
});

describe('generateCrmSample', () => {
  let dataset: SampleDataset;

  beforeAll(() => {
    dataset = generateCrmSample();
  });

  it('is deterministic', () => {
    // Compared as JSON lines so a failure names the first differing record, not a 6,000-record diff.
    const lines = (d: SampleDataset): string[] =>
      d.objects.flatMap((o) => o.records.map((r, i) => `${o.name}[${i}] ${JSON.stringify(r)}`));
    const first = lines(dataset);
    const second = lines(generateCrmSample());
    expect(second.length).toBe(first.length);
    expect(second.find((line, i) => line !== first[i]) ?? null).toBeNull();
    expect(generateCrmSample({ deal: 10 })).toEqual(generateCrmSample({ deal: 10 }));
  });

  it('produces the default counts in manifest order', () => {
    expect(dataset.objects.map((o) => o.name)).toEqual(manifest.objects);
    expect(dataset.objects.map((o) => o.records.length)).toEqual([200, 1000, 2000, 3000]);
    expect(CRM_SAMPLE_DEFAULT_COUNTS).toEqual({ account: 200, contact: 1000, deal: 2000, activity: 3000 });
  });

  it('gives every record exactly id, created_at plus the defined fields', () => {
    for (const { name, records } of dataset.objects) {
      const expected = ['id', 'created_at', ...definitionOf(name).fields.map((f) => f.name)].sort().join();
      const off = records.filter((r) => Object.keys(r).sort().join() !== expected);
      expect(off).toEqual([]);
    }
  });

  it('uses unique UUIDs as ids across the whole dataset', () => {
    const ids = dataset.objects.flatMap((o) => o.records.map((r) => r.id));
    expect(ids.filter((id) => typeof id !== 'string' || !UUID.test(id))).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    expect(recordsOf(dataset, 'deal')[7].id).toBe(sampleRecordId('deal', 7));
  });

  it('fills required fields and gives every value its field type', () => {
    const problems: string[] = [];
    for (const { name, records } of dataset.objects) {
      for (const field of definitionOf(name).fields) {
        for (const record of records) {
          const value = record[field.name];
          if (value === null) {
            if (field.required) problems.push(`${name}.${field.name} is required but null`);
            continue;
          }
          const problem = typeProblem(field, value);
          if (problem) problems.push(`${name}.${problem}`);
        }
      }
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('resolves every lookup to an id of the target object', () => {
    const idsOf = new Map(dataset.objects.map((o) => [o.name, new Set(o.records.map((r) => r.id))]));
    for (const { name, records } of dataset.objects) {
      for (const field of definitionOf(name).fields.filter((f) => f.type === 'lookup')) {
        const targets = idsOf.get(field.reference ?? '');
        expect(targets?.size).toBeGreaterThan(0);
        const dangling = records.filter((r) => r[field.name] !== null && !targets?.has(r[field.name]));
        expect(dangling).toEqual([]);
        expect(records.some((r) => r[field.name] !== null)).toBe(true);
      }
    }
  });

  it('keeps unique fields unique', () => {
    for (const { name, records } of dataset.objects) {
      for (const field of definitionOf(name).fields.filter((f) => f.unique)) {
        const values = records.map((r) => r[field.name]).filter((v) => v !== null);
        expect(values.length).toBeGreaterThan(records.length * 0.9);
        expect(new Set(values).size).toBe(values.length);
      }
    }
  });

  it('leaves some optional values null, but not many', () => {
    const nullShare = (object: string, field: string): number => {
      const records = recordsOf(dataset, object);
      return records.filter((r) => r[field] === null).length / records.length;
    };
    for (const [object, field] of [
      ['account', 'industry'],
      ['account', 'employees'],
      ['contact', 'title'],
      ['contact', 'email'],
      ['deal', 'amount'],
      ['deal', 'owner'],
      ['activity', 'due_at'],
    ] as const) {
      expect(nullShare(object, field)).toBeGreaterThan(0.01);
      expect(nullShare(object, field)).toBeLessThan(0.15);
    }
  });

  it('keeps deals consistent: probability by stage, closed deals in the past, realistic win rate', () => {
    const deals = recordsOf(dataset, 'deal');
    const byStage: Record<string, number> = {
      prospecting: 10,
      qualification: 20,
      proposal: 50,
      negotiation: 75,
      won: 100,
      lost: 0,
    };
    const inconsistent = deals.filter((deal) => {
      const closeDate = deal.close_date as string;
      const closed = deal.stage === 'won' || deal.stage === 'lost';
      return (
        deal.probability !== byStage[deal.stage as string] ||
        closeDate < '2023-01-01' ||
        closeDate > '2026-12-31' ||
        (closed && closeDate >= CRM_SAMPLE_REFERENCE_DATE) ||
        !new RegExp(` – (New Business|Renewal|Expansion|Pilot) ${closeDate.slice(0, 4)}$`).test(deal.name as string)
      );
    });
    expect(inconsistent).toEqual([]);
    const share = (stage: string): number => deals.filter((d) => d.stage === stage).length / deals.length;
    expect(share('won')).toBeGreaterThan(0.18);
    expect(share('won')).toBeLessThan(0.32);
    expect(share('lost')).toBeGreaterThan(0.14);
    expect(share('lost')).toBeLessThan(0.26);
  });

  it('links related records coherently', () => {
    const accounts = recordsOf(dataset, 'account');
    const contacts = recordsOf(dataset, 'contact');
    const deals = recordsOf(dataset, 'deal');
    const activities = recordsOf(dataset, 'activity');
    const contactAccount = new Map(contacts.map((c) => [c.id, c.account]));

    // A deal's primary contact works at the deal's account.
    const strangers = deals.filter((d) => d.primary_contact !== null && contactAccount.get(d.primary_contact) !== d.account);
    expect(strangers).toEqual([]);
    // is_customer is exactly "has a won deal", and both kinds of account exist.
    const wonAccounts = new Set(deals.filter((d) => d.stage === 'won').map((d) => d.account));
    expect(accounts.filter((a) => a.is_customer !== wonAccounts.has(a.id))).toEqual([]);
    expect(accounts.filter((a) => a.is_customer).length).toBeGreaterThan(accounts.length * 0.3);
    expect(accounts.filter((a) => !a.is_customer).length).toBeGreaterThan(accounts.length * 0.2);

    // last_contacted_at is the latest completed call/email/meeting with the contact.
    const latest = new Map<unknown, string>();
    for (const a of activities) {
      if (a.type === 'task' || a.completed !== true || typeof a.due_at !== 'string' || a.contact === null) continue;
      const previous = latest.get(a.contact);
      if (previous === undefined || a.due_at > previous) latest.set(a.contact, a.due_at);
    }
    expect(contacts.filter((c) => c.last_contacted_at !== (latest.get(c.id) ?? null))).toEqual([]);
    expect(latest.size).toBeGreaterThan(contacts.length / 2);

    // Future activities cannot be done yet.
    const doneInFuture = activities.filter(
      (a) => typeof a.due_at === 'string' && a.due_at >= CRM_SAMPLE_REFERENCE_DATE && a.completed !== false,
    );
    expect(doneInFuture).toEqual([]);
  });

  it('dates every record in the three years before the reference date, after the records it points to', () => {
    const createdAt = new Map<unknown, string>();
    for (const { records } of dataset.objects) for (const r of records) createdAt.set(r.id, r.created_at as string);
    const all = [...createdAt.values()];
    expect(all.filter((at) => typeof at !== 'string' || !DATETIME.test(at) || new Date(at).toISOString() !== at)).toEqual([]);
    expect(all.filter((at) => at < '2022-07-01' || at >= CRM_SAMPLE_REFERENCE_DATE)).toEqual([]);

    const older = (record: Row, field: string) =>
      record[field] !== null && (createdAt.get(record[field]) as string) > (record.created_at as string);
    const deals = recordsOf(dataset, 'deal');
    expect(deals.filter((d) => older(d, 'account') || older(d, 'primary_contact'))).toEqual([]);
    expect(recordsOf(dataset, 'contact').filter((c) => older(c, 'account'))).toEqual([]);
    expect(recordsOf(dataset, 'activity').filter((a) => older(a, 'deal') || older(a, 'contact'))).toEqual([]);
    // A deal closes (or is expected to close) on a later day than it was created.
    expect(deals.filter((d) => (d.created_at as string).slice(0, 10) >= (d.close_date as string))).toEqual([]);

    // History, not one load instant: deals created in every year of the span, most of them after the first.
    const perYear = new Map<string, number>();
    for (const d of deals)
      perYear.set((d.created_at as string).slice(0, 4), (perYear.get((d.created_at as string).slice(0, 4)) ?? 0) + 1);
    expect([...perYear.keys()].sort()).toEqual(['2022', '2023', '2024', '2025']);
    for (const year of ['2023', '2024', '2025']) expect(perYear.get(year)).toBeGreaterThan(deals.length / 8);
    expect(new Set(all).size).toBeGreaterThan(all.length / 2);
  });

  it('honours custom counts and keeps lookups valid', () => {
    const small = generateCrmSample({ account: 5, contact: 12, deal: 7, activity: 0 });
    expect(small.objects.map((o) => o.records.length)).toEqual([5, 12, 7, 0]);
    const accountIds = new Set(recordsOf(small, 'account').map((r) => r.id));
    const contactIds = new Set(recordsOf(small, 'contact').map((r) => r.id));
    for (const deal of recordsOf(small, 'deal')) {
      expect(accountIds.has(deal.account)).toBe(true);
      if (deal.primary_contact !== null) expect(contactIds.has(deal.primary_contact)).toBe(true);
    }
    // Unspecified counts keep their defaults; more accounts than name combinations stay unique.
    expect(generateCrmSample({ contact: 3 }).objects.map((o) => o.records.length)).toEqual([200, 3, 2000, 3000]);
    const many = recordsOf(generateCrmSample({ account: 3000, contact: 0, deal: 0, activity: 0 }), 'account');
    expect(new Set(many.map((a) => a.name)).size).toBe(3000);
  });

  it('rejects impossible counts', () => {
    expect(() => generateCrmSample({ account: -1 })).toThrow(RangeError);
    expect(() => generateCrmSample({ deal: 1.5 })).toThrow(RangeError);
    expect(() => generateCrmSample({ account: 0, deal: 1 })).toThrow(RangeError);
  });
});
