import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DomainError } from '../common/domain-error';
import { ADVISORY_LOCK, lockForTransaction } from '../database/advisory-locks';
import { PROGRAM_LIMIT_EXCEEDED, UNIQUE_VIOLATION, sqlState } from '../common/pg-errors';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import { AuditLog, type AuditActor } from '../audit/audit-log.service';
import {
  checkFormula,
  FORMULA_RESULT_TYPES,
  formulaInputs,
  formulaReadsClock,
  type FormulaScope,
  referencedFields,
} from './formula';
import {
  computedInputs,
  computedKind,
  defineRelated,
  type FieldRef,
  isComputed,
  isRelatedKind,
  relatedMeta,
  type StoredRelated,
} from './computed-fields';
import { MetadataCache } from './metadata.cache';
import {
  CreateFieldDto,
  CreateObjectDto,
  DEFINITION_TYPES,
  FieldResponse,
  ObjectResponse,
  UpdateFieldDto,
  UpdateObjectDto,
} from './metadata.dto';
import { toFieldResponse, toObjectResponse } from './metadata.mapper';
import { MetadataDependents } from './metadata-dependents';
import { MetadataRepository, ObjectSummary } from './metadata.repository';
import { type StoredGroup, storedDdlExpectations, storedFormulaDdl, storedGroupOf } from './stored-fields';
import { linkSides } from './links-fields';
import { assertValidName } from './metadata.naming';
import type { FormulaResultType } from './formula';
import { FieldDefinition, FieldDefinitionEntity, ObjectDefinition, ObjectDefinitionEntity } from './object-definition.entity';
import { fieldTypeOf, fieldTypesWhere, isFieldType, listTypes } from './field-types';
import {
  FieldMeta,
  RELATED_KINDS,
  FieldType,
  MAX_FIELDS,
  MAX_INDEXED_TEXT_BYTES,
  LinkSide,
  ObjectMeta,
  ObjectReferrers,
  SYSTEM_FIELDS,
} from './object-metadata.types';

/** The triggers that keep stored fields (a group of rollups and counts, or a formula): what a boot compares and rebuilds. */
interface StoredTriggers {
  label: string;
  ddl: string[];
  /** Tables locked before the rebuild, in the order writers lock them. */
  lock: string[];
  install(em: EntityManager): Promise<void>;
}

/**
 * Object and field definitions, and the physical tables behind them. Each change to metadata and
 * its DDL commit in one transaction: a failed statement leaves both as they were.
 */
@Injectable()
export class MetadataService implements OnApplicationBootstrap {
  private readonly logger = new Logger(MetadataService.name);

  constructor(
    private readonly em: EntityManager,
    private readonly cache: MetadataCache,
    private readonly repo: MetadataRepository,
    private readonly audit: AuditLog,
    private readonly dependents: MetadataDependents,
  ) {}

  private storedFill?: (objectName: string, fieldName: string, actor?: AuditActor) => Promise<string>;

  async onApplicationBootstrap(): Promise<void> {
    await this.repairStoredTriggers();
  }

  /** Forgets every cached definition (after a write, or when a query met a schema that moved on). */
  invalidate(): void {
    this.cache.invalidate();
  }

  async listObjects(em: EntityManager = this.em.fork()): Promise<ObjectSummary[]> {
    return this.repo.summaries(em);
  }

  /**
   * What a delete of one of `objectName`'s records clears, and a restore from the trash sets back: the optional
   * lookup fields (of any object, this one included) that point at it (a required one forbids the delete), and
   * every join table its records are on, from either side (a links field without an inverse included).
   */
  async referrers(objectName: string): Promise<ObjectReferrers> {
    const found = await this.repo.referringFields(this.em.fork(), objectName);
    const referrers: ObjectReferrers = { lookups: [], links: [] };
    for (const { object, field } of found.filter((f) => f.type === 'lookup')) {
      const meta = await this.getObject(object);
      const lookup = meta.fields.find((f) => f.name === field);
      if (lookup && !lookup.required) referrers.lookups.push({ object: meta, field: lookup });
    }
    const sides = new Map<string, LinkSide>();
    for (const { object, field } of found.filter((f) => f.type === 'links')) {
      const related = (await this.getObject(object)).fields.find((f) => f.name === field)?.related;
      if (!related?.link) continue;
      const { table, selfColumn, targetColumn } = related.link;
      if (object === objectName) sides.set(`${table}.${selfColumn}`, { ...related.link, other: related.target });
      if (related.target === objectName) {
        sides.set(`${table}.${targetColumn}`, { table, selfColumn: targetColumn, targetColumn: selfColumn, other: object });
      }
    }
    referrers.links = [...sides.values()];
    return referrers;
  }

  /** The object with its fields (system fields first), from the cache; `object_not_found` when absent. */
  async getObject(name: string, em?: EntityManager): Promise<ObjectMeta> {
    // Forked on a miss only: a hit (nearly every request) needs no EntityManager.
    return this.cache.get(name, () => this.loadObject(name, em ?? this.em.fork()));
  }

  /**
   * The definition as `em` reads it now, past the cache: for writes elsewhere that check against metadata
   * (metric definitions) in a transaction holding the metadata lock.
   */
  async readObject(name: string, em: EntityManager): Promise<ObjectMeta> {
    return this.loadObject(name, em);
  }

  /** Reads the definition from the database (inside metadata writes: their own uncommitted state). */
  private async loadObject(name: string, em: EntityManager): Promise<ObjectMeta> {
    const object = isStorableName(name) ? await em.findOne(ObjectDefinitionEntity, { name }) : null;
    if (!object) {
      const available = (await this.listObjects(em)).map((o) => o.name);
      throw new DomainError('object_not_found', `Object "${String(name)}" not found`, { availableObjects: available });
    }
    const fields = await em.find(FieldDefinitionEntity, { objectId: object.id }, { orderBy: { position: 'asc' } });
    return toObjectMeta(object, fields);
  }

  async createObject(dto: CreateObjectDto, actor?: AuditActor): Promise<ObjectResponse> {
    assertValidName('object', dto.name);
    const fields = dto.fields ?? [];
    if (fields.length > MAX_FIELDS) throw new DomainError('too_many_fields', `An object has at most ${MAX_FIELDS} fields`);
    const seen = new Set<string>();
    for (const field of fields) {
      if (seen.has(field.name)) throw new DomainError('duplicate_field', `Field "${field.name}" is defined twice`);
      seen.add(field.name);
    }
    return this.write({ actor, action: 'object.create', target: dto.name }, async (em) => {
      if (await em.findOne(ObjectDefinitionEntity, { name: dto.name })) {
        throw new DomainError('object_exists', `Object "${dto.name}" already exists`);
      }
      const now = new Date();
      const object = em.create(ObjectDefinitionEntity, {
        id: randomUUID(),
        name: dto.name,
        label: dto.label,
        description: dto.description ?? null,
        createdAt: now,
        updatedAt: now,
      });
      // Flushed first: field rows reference it, and the ORM does not order plain foreign-key columns.
      await em.persist(object).flush();
      await this.repo.createTable(em, dto.name);
      // A formula may read the fields listed before it.
      const siblings: FieldMeta[] = [...SYSTEM_FIELDS];
      for (const [position, fieldDto] of fields.entries()) {
        siblings.push(
          await this.addFieldInTransaction(em, object, fieldDto, position, {
            selfName: dto.name,
            selfLabel: dto.label,
            tableEmpty: true,
            siblings,
          }),
        );
      }
      await em.flush();
      return toObjectResponse(await this.loadObject(dto.name, em));
    });
  }

  async updateObject(name: string, dto: UpdateObjectDto, actor?: AuditActor): Promise<ObjectResponse> {
    return this.write({ actor, action: 'object.update', target: name }, async (em) => {
      const object = await this.findDefinition(em, name);
      if (dto.label !== undefined) object.label = dto.label;
      if (dto.description !== undefined) object.description = dto.description;
      object.updatedAt = new Date();
      await em.flush();
      return toObjectResponse(await this.loadObject(name, em));
    });
  }

  /** Drops the object and its table; 409 while another object's lookup points at it. */
  async deleteObject(name: string, actor?: AuditActor): Promise<void> {
    await this.write({ actor, action: 'object.delete', target: name }, async (em) => {
      const object = await this.findDefinition(em, name);
      const agents = await this.dependents.usingObject('agent', em, name);
      if (agents.length) {
        throw new DomainError(
          'object_in_use',
          `Object "${name}" is named in the allowedObjects of agent${agents.length > 1 ? 's' : ''} ${agents.join(', ')}; remove it there first`,
          { agents },
        );
      }
      const metrics = await this.dependents.usingObject('metric', em, name);
      if (metrics.length) {
        throw new DomainError(
          'object_in_use',
          `Object "${name}" is read by metric${metrics.length > 1 ? 's' : ''} ${metrics.join(', ')}; delete or change them first`,
          { metrics },
        );
      }
      const computed = (await this.computedUsers(em, (ref) => ref.object === name)).filter(
        (user) => !user.startsWith(`${name}.`),
      );
      if (computed.length) {
        throw new DomainError(
          'object_in_use',
          `Object "${name}" is read by computed field${computed.length > 1 ? 's' : ''} ${computed.join(', ')}; delete them first`,
          { computed },
        );
      }
      const referencing = await this.repo.referencingFields(em, name, object.id);
      if (referencing.length) {
        throw new DomainError(
          'object_referenced',
          `Object "${name}" is referenced by ${referencing.map((r) => `${r.object}.${r.field}`).join(', ')}`,
          { referencedBy: referencing },
        );
      }
      // Its own links' join tables (links into it from elsewhere were refused above) go first: they reference its table.
      const own = await this.loadObject(name, em);
      for (const field of own.fields) {
        // A stored rollup through its links has triggers on the target's table: they go with it.
        const meta = field.related;
        if (meta?.stored && meta.link) {
          const target = await this.loadObject(meta.target, em);
          await this.repo.installStoredTriggers(em, { ...storedGroupOf(name, field, own.fields, target), fields: [] });
        }
      }
      for (const field of own.fields) {
        if (field.related?.kind === 'links' && field.related.link) await this.repo.dropLinkTable(em, field.related.link.table);
      }
      await this.repo.dropTable(em, name);
      await this.dependents.droppingObject(em, name);
      await em.nativeDelete(FieldDefinitionEntity, { objectId: object.id });
      em.remove(object);
      await em.flush();
    });
  }

  async addField(objectName: string, dto: CreateFieldDto, actor?: AuditActor): Promise<FieldResponse> {
    const response = await this.write({ actor, action: 'field.create', target: `${objectName}.${dto.name}` }, async (em) => {
      const object = await this.findDefinition(em, objectName);
      assertValidName('field', dto.name);
      const count = await em.count(FieldDefinitionEntity, { objectId: object.id });
      if (count >= MAX_FIELDS) throw new DomainError('too_many_fields', `An object has at most ${MAX_FIELDS} fields`);
      if (await em.findOne(FieldDefinitionEntity, { objectId: object.id, name: dto.name })) {
        throw new DomainError('field_exists', `Field "${dto.name}" already exists on "${objectName}"`);
      }
      const last = await em.findOne(FieldDefinitionEntity, { objectId: object.id }, { orderBy: { position: 'desc' } });
      const tableEmpty = !dto.required || (await this.repo.isEmpty(em, objectName));
      const siblings = (await this.loadObject(objectName, em)).fields;
      await this.addFieldInTransaction(em, object, dto, (last?.position ?? -1) + 1, {
        selfName: objectName,
        selfLabel: object.label,
        tableEmpty,
        siblings,
      });
      object.updatedAt = new Date();
      await em.flush();
      return toFieldResponse(findField(await this.loadObject(objectName, em), dto.name));
    });
    // A stored field added to an object with records is filled by a job, started once its triggers are committed.
    if (response.stored && response.filled === false && this.storedFill) {
      response.fillJobId = await this.storedFill(objectName, dto.name, actor);
    }
    return response;
  }

  /**
   * How a stored field's fill job is started (registered by the job runner, which sits above metadata):
   * answers the job's id; the job calls markFilled when every record holds its value.
   */
  registerStoredFill(start: (objectName: string, fieldName: string, actor?: AuditActor) => Promise<string>): void {
    this.storedFill = start;
  }

  /**
   * A stored field's fill ended: `filled`, its records all hold their value and reads use its column from now on;
   * `cancelled`, it stays computed when read and no replica starts its fill again (fieldsToFill).
   */
  async endFill(objectName: string, fieldName: string, outcome: 'filled' | 'cancelled'): Promise<void> {
    await this.write(
      { action: outcome === 'filled' ? 'field.fill' : 'field.fill_cancel', target: `${objectName}.${fieldName}` },
      async (em) => {
        const object = await this.findDefinition(em, objectName);
        const field = await this.findFieldDefinition(em, object, fieldName);
        const stored = field.computed as unknown as StoredRelated | null;
        if (!stored?.stored || stored.filled) return;
        field.computed =
          outcome === 'filled' ? { ...stored, filled: true, fillCancelled: undefined } : { ...stored, fillCancelled: true };
        field.updatedAt = new Date();
        await em.flush();
      },
    );
  }

  /**
   * Rebuilds the triggers of every stored-field group whose functions or triggers differ from what this build
   * generates (stored-fields.ts): after an upgrade that changed the generated SQL, or a trigger dropped by hand.
   * Each replica checks at boot; a rebuild takes the metadata lock and checks again, so one replica does it.
   * Answers how many groups were rebuilt.
   */
  async repairStoredTriggers(): Promise<number> {
    const stale = async (em: EntityManager): Promise<StoredTriggers[]> => {
      const units = await this.storedTriggers(em);
      if (!units.length) return [];
      const expected = units.map((unit) => storedDdlExpectations(unit.ddl));
      const state = await this.repo.storedTriggerState(
        em,
        expected.flatMap((e) => [...e.bodies.keys()]),
        expected.flatMap((e) => e.triggers),
      );
      return units.filter((_unit, i) => {
        const { bodies, triggers } = expected[i];
        return (
          [...bodies].some(([name, body]) => state.bodies.get(name) !== body) || triggers.some((t) => !state.triggers.has(t))
        );
      });
    };
    if (!(await stale(this.em.fork())).length) return 0;
    return this.em.fork().transactional(async (em) => {
      await lockForTransaction(em, ADVISORY_LOCK.metadata);
      const units = await stale(em);
      for (const unit of units) {
        // The order every writer takes the locks in (see addFieldInTransaction): children first, then parents.
        for (const table of unit.lock) await this.repo.lockForTriggers(em, table);
        await unit.install(em);
        this.logger.log(`rebuilt the triggers of ${unit.label}`);
      }
      return units.length;
    });
  }

  /**
   * The triggers of every stored field as this build makes them: a group of rollups and counts, or a formula.
   * Only the objects that have stored fields are loaded (one query finds them): a boot with none reads nothing more.
   */
  private async storedTriggers(em: EntityManager): Promise<StoredTriggers[]> {
    const units: StoredTriggers[] = [];
    const groups = new Map<string, StoredGroup>();
    for (const name of new Set((await this.storedDefinitions(em)).map((d) => d.object))) {
      const object = await this.loadObject(name, em);
      for (const field of object.fields) {
        const meta = field.related;
        if (field.formula?.stored) {
          units.push({
            label: `the stored formula "${object.name}.${field.name}"`,
            ddl: storedFormulaDdl(object.name, field),
            lock: [object.name],
            install: (tx) => this.repo.installStoredFormula(tx, object.name, field),
          });
        }
        if (!meta?.stored) continue;
        const key = JSON.stringify([object.name, meta.target, meta.via]);
        const group = groups.get(key);
        if (group) group.fields.push(field);
        else {
          const created: StoredGroup = {
            self: object.name,
            target: await this.loadObject(meta.target, em),
            via: meta.via,
            fields: [field],
          };
          if (meta.link) created.link = meta.link;
          groups.set(key, created);
        }
      }
    }
    for (const group of groups.values()) {
      units.push({
        label: `the stored fields of "${group.self}" over "${group.target.name}.${group.via}"`,
        ddl: this.repo.storedTriggerDdl(group),
        lock: [group.target.name, group.self],
        install: (tx) => this.repo.installStoredTriggers(tx, group),
      });
    }
    return units;
  }

  /** Every stored field's definition (a rollup, count or formula kept in a column), with its object's name. */
  private async storedDefinitions(em: EntityManager): Promise<Array<{ object: string; field: string; kept: StoredRelated }>> {
    const fields = (await em.find(FieldDefinitionEntity, { type: { $in: ['rollup', 'count', 'formula'] } })).filter(
      (f) => (f.computed as unknown as StoredRelated | null)?.stored === true,
    );
    if (!fields.length) return [];
    const objects = await em.find(ObjectDefinitionEntity, { id: { $in: [...new Set(fields.map((f) => f.objectId))] } });
    const names = new Map(objects.map((o) => [o.id, o.name]));
    return fields.flatMap((f) => {
      const object = names.get(f.objectId);
      return object ? [{ object, field: f.name, kept: f.computed as unknown as StoredRelated }] : [];
    });
  }

  /**
   * Stored fields whose fill has not ended (not filled, not cancelled): a fill cut off by a stop that could not
   * hand it on, or never started (the server stopped between the field's commit and its job), started again at boot.
   */
  async fieldsToFill(): Promise<Array<{ object: string; field: string }>> {
    return (await this.storedDefinitions(this.em.fork()))
      .filter(({ kept }) => !kept.filled && !kept.fillCancelled)
      .map(({ object, field }) => ({ object, field }));
  }

  async updateField(objectName: string, fieldName: string, dto: UpdateFieldDto, actor?: AuditActor): Promise<FieldResponse> {
    return this.write({ actor, action: 'field.update', target: `${objectName}.${fieldName}` }, async (em) => {
      const object = await this.findDefinition(em, objectName);
      const field = await this.findFieldDefinition(em, object, fieldName);
      if (isRelatedKind(field.type)) {
        const changed = Object.entries(dto).filter(
          ([key, value]) => value !== undefined && !['label', 'description', 'searchable'].includes(key),
        );
        if (changed.length) {
          throw new DomainError(
            'validation_failed',
            `Only the label, description and searchable of a ${field.type} field ("${fieldName}") can change; delete it and add it again to change its definition`,
            { field: fieldName, properties: changed.map(([key]) => key) },
          );
        }
        if (dto.searchable) assertSearchableAllowed(fieldName, field.resultType as FieldType);
        if (dto.searchable !== undefined) field.searchable = dto.searchable;
        if (dto.label !== undefined) field.label = dto.label;
        if (dto.description !== undefined) field.description = dto.description;
        field.updatedAt = new Date();
        await em.flush();
        return toFieldResponse(findField(await this.loadObject(objectName, em), fieldName));
      }
      if (field.type === 'formula') {
        await this.updateFormula(em, objectName, field, dto);
        await em.flush();
        return toFieldResponse(findField(await this.loadObject(objectName, em), fieldName));
      }
      if (dto.expression !== undefined || dto.resultType !== undefined) {
        throw new DomainError(
          'validation_failed',
          `Only formula fields have an expression and a resultType; "${fieldName}" is ${field.type}`,
        );
      }
      const type = field.type as FieldType;
      if (dto.options !== undefined) {
        if (!fieldTypeOf(type).takes.options) throw unexpectedOptions(fieldName, type);
        if (!dto.options.length) throw new DomainError('missing_options', `Field "${fieldName}" of type ${type} needs options`);
        const options = validateOptions(fieldName, dto.options);
        const removed = (field.options ?? []).filter((option) => !options.includes(option));
        const inUse = removed.length ? await this.repo.optionUse(em, objectName, { name: fieldName, type }, removed) : {};
        if (Object.keys(inUse).length) {
          const counts = Object.entries(inUse)
            .map(([option, count]) => `"${option}" (${count})`)
            .join(', ');
          throw new DomainError(
            'options_in_use',
            `Records of "${objectName}" still use ${counts}; change them before removing these options`,
            { inUse },
          );
        }
        field.options = options;
      }
      if (dto.required !== undefined && dto.required !== field.required) {
        if (dto.required && (await this.hasNulls(em, objectName, fieldName))) {
          throw new DomainError(
            'field_has_empty_values',
            `Some "${objectName}" records have no "${fieldName}"; fill them before making it required`,
          );
        }
        await this.repo.setRequired(em, objectName, fieldName, dto.required);
        field.required = dto.required;
      }
      const unique = dto.unique ?? field.unique;
      const indexed = dto.indexed ?? field.indexed;
      if (unique !== field.unique || indexed !== field.indexed) {
        assertUniqueAllowed(fieldName, type, unique);
        // Checked first, with the limit that writes to the field will have from now on.
        const limited = (unique || indexed) && fieldTypeOf(type).indexBytes;
        if (limited && (await this.repo.hasValueLongerThan(em, objectName, { name: fieldName, type }, MAX_INDEXED_TEXT_BYTES))) {
          throw valuesTooLong(objectName, fieldName);
        }
        await this.repo.dropIndexes(em, objectName, fieldName);
        const meta = toFieldMeta({ ...field, unique, indexed });
        try {
          await this.repo.createIndexes(em, objectName, meta);
        } catch (error) {
          if (sqlState(error) === UNIQUE_VIOLATION) {
            throw new DomainError('unique_violation', `"${fieldName}" has duplicate values; it cannot be made unique`);
          }
          // The backstop: some value an index entry cannot hold, whatever the check above let through.
          if (sqlState(error) === PROGRAM_LIMIT_EXCEEDED) throw valuesTooLong(objectName, fieldName);
          throw error;
        }
        field.unique = unique;
        field.indexed = indexed;
      }
      if (dto.searchable !== undefined && dto.searchable !== field.searchable) {
        if (dto.searchable) {
          assertSearchableAllowed(fieldName, type);
          await this.repo.createSearchIndex(em, objectName, fieldName);
        } else {
          await this.repo.dropSearchIndex(em, objectName, fieldName);
        }
        field.searchable = dto.searchable;
      }
      if (dto.label !== undefined) field.label = dto.label;
      if (dto.description !== undefined) field.description = dto.description;
      field.updatedAt = new Date();
      await em.flush();
      return toFieldResponse(toFieldMeta(field));
    });
  }

  async deleteField(objectName: string, fieldName: string, actor?: AuditActor): Promise<void> {
    await this.write({ actor, action: 'field.delete', target: `${objectName}.${fieldName}` }, async (em) => {
      const object = await this.findDefinition(em, objectName);
      const field = await this.findFieldDefinition(em, object, fieldName);
      // Everything that names a field in its definition: one list, one error.
      const formulas = (await this.loadObject(objectName, em)).fields
        .filter((f) => f.formula && f.name !== fieldName && referencedFields(f.formula.expression).includes(fieldName))
        .map((f) => f.name);
      const computed = await this.computedUsers(em, (ref) => ref.object === objectName && ref.field === fieldName, {
        object: objectName,
        field: fieldName,
      });
      const metrics = await this.dependents.usingField('metric', em, objectName, fieldName);
      const views = await this.dependents.usingField('view', em, objectName, fieldName);
      const users = [
        ...named('formula', formulas),
        ...named('computed field', computed),
        ...named('metric', metrics),
        ...named('view', views),
      ];
      if (users.length) {
        const count = formulas.length + computed.length + metrics.length + views.length;
        throw new DomainError(
          'field_in_use',
          `Field "${objectName}.${fieldName}" is used by ${users.join(' and ')}; change or delete ${count > 1 ? 'them' : 'it'} first`,
          { formulas, computed, metrics, views },
        );
      }
      const stored = isRelatedKind(field.type) ? (field.computed as unknown as StoredRelated | null) : null;
      if (stored?.stored) {
        // The rest of its group keeps its triggers, rebuilt without it. The related table's writers locked first,
        // then the parent's: dropping a trigger takes the related table outright, and a fill batch of the parent
        // (which holds the parent's table and then reads the related one) must end before that, not wait on it.
        await this.repo.lockForTriggers(em, stored.target);
        await this.repo.lockForTriggers(em, objectName);
        const self = await this.loadObject(objectName, em);
        const meta = findField(self, fieldName);
        const group = storedGroupOf(objectName, meta, self.fields, await this.loadObject(stored.target, em));
        await this.repo.installStoredTriggers(em, { ...group, fields: group.fields.filter((f) => f.name !== fieldName) });
        await this.repo.dropColumn(em, objectName, fieldName);
      }
      if (field.type === 'links' && stored) await this.dropLinks(em, stored);
      if (field.type === 'formula' && (field.computed as { stored?: boolean } | null)?.stored) {
        await this.repo.dropStoredFormula(em, objectName, fieldName);
        await this.repo.dropColumn(em, objectName, fieldName);
      }
      if (field.type !== 'formula' && !isRelatedKind(field.type)) await this.repo.dropColumn(em, objectName, fieldName);
      em.remove(field);
      object.updatedAt = new Date();
      await em.flush();
    });
  }

  /**
   * One serialised transaction per metadata write; DDL, metadata rows and the change's audit entry
   * commit or roll back together.
   */
  private async write<T>(
    audit: { actor?: AuditActor; action: string; target: string },
    work: (em: EntityManager) => Promise<T>,
  ): Promise<T> {
    try {
      return await this.em.fork().transactional(async (em) => {
        await lockForTransaction(em, ADVISORY_LOCK.metadata);
        const result = await work(em);
        await this.audit.admin(em, audit.actor, audit.action, audit.target);
        // Delivered on commit, to this replica too.
        await this.cache.publishChange(em);
        return result;
      });
    } finally {
      this.invalidate();
    }
  }

  private async addFieldInTransaction(
    em: EntityManager,
    object: ObjectDefinition,
    dto: CreateFieldDto,
    position: number,
    context: { selfName: string; selfLabel: string; tableEmpty: boolean; siblings: FieldMeta[] },
  ): Promise<FieldMeta> {
    let stored: StoredRelated | undefined;
    let field: FieldMeta;
    if (isRelatedKind(dto.type)) {
      ({ field, stored } = await this.relatedField(em, dto, context));
    } else {
      field = dto.type === 'formula' ? formulaField(dto, context.siblings) : await this.validateField(em, dto, context.selfName);
    }
    if (field.required && !context.tableEmpty) {
      throw new DomainError(
        'object_not_empty',
        `"${object.name}" has records; add "${field.name}" as optional, fill it, then make it required`,
      );
    }
    if (field.related?.stored && stored) {
      // The related table's writers first (they lock parents from their triggers and their lookup's foreign key),
      // then the parent's: the order every writer takes them in, so adding the field never deadlocks with one.
      await this.repo.lockForTriggers(em, field.related.target);
      // The column first (its ACCESS EXCLUSIVE lock keeps writers out until commit), then the triggers: from the
      // commit on, every write of a related record keeps the value right; the fill job does the records there were.
      await this.repo.addColumn(em, object.name, { ...field, related: undefined, type: field.type });
      const target = await this.loadObject(field.related.target, em);
      await this.repo.installStoredTriggers(em, storedGroupOf(object.name, field, context.siblings, target));
      stored.filled = await this.repo.isEmpty(em, object.name);
      field.related.filled = stored.filled;
    }
    let storedFormula: { stored: true; filled: boolean } | undefined;
    if (field.formula?.stored) {
      // The column (its lock keeps writers out until commit), then the row trigger that sets it on every write;
      // the fill job does the records there were.
      await this.repo.addColumn(em, object.name, { ...field, formula: undefined });
      await this.repo.installStoredFormula(em, object.name, field);
      storedFormula = { stored: true, filled: await this.repo.isEmpty(em, object.name) };
      field.formula.filled = storedFormula.filled;
    }
    const now = new Date();
    em.create(FieldDefinitionEntity, {
      id: randomUUID(),
      objectId: object.id,
      name: field.name,
      label: field.label,
      type: computedKind(field) ?? field.type,
      expression: field.formula?.expression ?? null,
      resultType: field.formula?.resultType ?? (field.related ? field.type : null),
      computed: stored ? { ...stored } : (storedFormula ?? null),
      required: field.required,
      unique: field.unique,
      indexed: field.indexed,
      searchable: field.searchable === true,
      description: field.description ?? null,
      options: field.options ?? null,
      reference: field.reference ?? null,
      position,
      createdAt: now,
      updatedAt: now,
    });
    if (field.related?.kind === 'links') await this.addLinkTable(em, object.name, field);
    if (isComputed(field)) return field;
    await this.repo.addColumn(em, object.name, field);
    if (field.searchable) await this.repo.createSearchIndex(em, object.name, field.name);
    return field;
  }

  /** A rollup, count or lookup_value definition checked against the objects it reads (this transaction's state). */
  private async relatedField(
    em: EntityManager,
    dto: CreateFieldDto,
    context: { selfName: string; selfLabel: string; siblings: FieldMeta[] },
  ): Promise<{ field: FieldMeta; stored: StoredRelated }> {
    assertValidName('field', dto.name);
    const links = dto.type === 'links';
    if (
      dto.required ||
      dto.unique ||
      (dto.indexed && !dto.stored) ||
      dto.options !== undefined ||
      (dto.reference !== undefined && !links) ||
      (dto.inverse !== undefined && !links)
    ) {
      throw new DomainError(
        'validation_failed',
        `A ${dto.type} field ("${dto.name}") has no column: it cannot be required or unique, nor have options (nor a reference or an inverse, except links), and only a stored one can be indexed`,
        { field: dto.name },
      );
    }
    if (dto.expression !== undefined || dto.resultType !== undefined) {
      throw new DomainError(
        'validation_failed',
        `A ${dto.type} field ("${dto.name}") has no expression; its resultType is derived`,
        {
          field: dto.name,
        },
      );
    }
    const self: ObjectMeta = { name: context.selfName, label: context.selfLabel, fields: context.siblings };
    const kind = dto.type as (typeof RELATED_KINDS)[number];
    const defined = await defineRelated(
      {
        name: dto.name,
        type: kind,
        relation: dto.relation,
        through: dto.through,
        field: dto.field,
        function: dto.function,
        filter: dto.filter,
        stored: dto.stored,
        reference: dto.reference,
        inverse: dto.inverse,
      },
      {
        self,
        load: (name) => (name === self.name ? Promise.resolve(self) : this.loadObject(name, em).catch(() => undefined)),
      },
    );
    const field: FieldMeta = {
      name: dto.name,
      label: dto.label,
      type: defined.type,
      required: false,
      unique: false,
      indexed: defined.stored.stored === true && dto.indexed === true,
      description: dto.description ?? null,
      related: relatedMeta(kind, context.selfName, defined.stored),
    };
    if (dto.searchable) {
      // Searched by ?q= through its SQL (no index: there is no column to index).
      assertSearchableAllowed(dto.name, field.type as FieldType);
      field.searchable = true;
    }
    return { field, stored: defined.stored };
  }

  /**
   * A new links field's join table, and its inverse field on the target (the same table read the other way),
   * in the field's transaction.
   */
  private async addLinkTable(em: EntityManager, selfName: string, field: FieldMeta): Promise<void> {
    const meta = field.related!;
    await this.repo.createLinkTable(
      em,
      meta.link!.table,
      { object: selfName, field: field.name },
      { object: meta.target, inverse: meta.inverse },
    );
    if (!meta.inverse) return;
    const target = await this.findDefinition(em, meta.target);
    // Flushed first: the inverse's position comes after every field of the target, this new one included.
    await em.flush();
    const last = await em.findOne(FieldDefinitionEntity, { objectId: target.id }, { orderBy: { position: 'desc' } });
    const inverse: StoredRelated = {
      target: selfName,
      via: meta.inverse,
      link: linkSides(meta.link!.table).inverse,
      inverse: field.name,
    };
    const now = new Date();
    em.create(FieldDefinitionEntity, {
      id: randomUUID(),
      objectId: target.id,
      name: meta.inverse,
      label: meta.inverse,
      type: 'links',
      expression: null,
      resultType: field.type,
      computed: { ...inverse },
      required: false,
      unique: false,
      indexed: false,
      searchable: false,
      description: null,
      options: null,
      reference: null,
      position: (last?.position ?? -1) + 1,
      createdAt: now,
      updatedAt: now,
    });
    target.updatedAt = now;
  }

  /** Drops a links field's join table and its inverse (refused, as the field itself, while a computed field reads the inverse). */
  private async dropLinks(em: EntityManager, stored: StoredRelated): Promise<void> {
    if (stored.inverse) {
      const computed = await this.computedUsers(em, (ref) => ref.object === stored.target && ref.field === stored.inverse, {
        object: stored.target,
        field: stored.inverse,
      });
      if (computed.length) {
        throw new DomainError(
          'field_in_use',
          `Field "${stored.target}.${stored.inverse}", the inverse of this links field, is used by ${named('computed field', computed).join('')}; change or delete ${computed.length > 1 ? 'them' : 'it'} first`,
          { formulas: [], computed, metrics: [], views: [] },
        );
      }
      const target = await this.findDefinition(em, stored.target);
      const inverse = await em.findOne(FieldDefinitionEntity, { objectId: target.id, name: stored.inverse });
      if (inverse) em.remove(inverse);
      target.updatedAt = new Date();
    }
    await this.repo.dropLinkTable(em, stored.link!.table);
  }

  /**
   * The computed fields (of any object, as `object.field`) that read a field `matches`: what keeps it (or
   * its object) from being dropped. `except` is left out (the field itself).
   */
  private async computedUsers(em: EntityManager, matches: (ref: FieldRef) => boolean, except?: FieldRef): Promise<string[]> {
    const users: string[] = [];
    for (const summary of await this.listObjects(em)) {
      const object = await this.loadObject(summary.name, em);
      for (const field of object.fields) {
        if (!field.related) continue;
        if (except && object.name === except.object && field.name === except.field) continue;
        if (computedInputs(object.name, field).some(matches)) users.push(`${object.name}.${field.name}`);
      }
    }
    return users;
  }

  /**
   * computed_cycle when `start` (with its new definition `field`) reads itself through computed fields of
   * other objects (a formula over a rollup over a lookup_value of this object ...); the path names each step.
   */
  private async assertNoCycle(em: EntityManager, start: FieldRef, field: FieldMeta): Promise<void> {
    const objects = new Map<string, ObjectMeta | undefined>();
    const fieldOf = async (ref: FieldRef): Promise<FieldMeta | undefined> => {
      if (ref.object === start.object && ref.field === start.field) return field;
      if (!objects.has(ref.object)) objects.set(ref.object, await this.loadObject(ref.object, em).catch(() => undefined));
      return objects.get(ref.object)?.fields.find((f) => f.name === ref.field);
    };
    const visited = new Set<string>();
    const walk = async (ref: FieldRef, path: string[]): Promise<string[] | undefined> => {
      const current = await fieldOf(ref);
      if (!current || !isComputed(current)) return undefined;
      for (const input of computedInputs(ref.object, current)) {
        const name = `${input.object}.${input.field}`;
        if (input.object === start.object && input.field === start.field) return [...path, name];
        if (visited.has(name)) continue;
        visited.add(name);
        const found = await walk(input, [...path, name]);
        if (found) return found;
      }
      return undefined;
    };
    const path = await walk(start, [`${start.object}.${start.field}`]);
    if (path) throw new DomainError('computed_cycle', `The field reads itself: ${path.join(' → ')}`, { path });
  }

  /**
   * A new expression or result type for a formula field: checked as at creation (a cycle through the
   * formulas that read it is refused with its path), and every other formula of the object still checks.
   */
  private async updateFormula(em: EntityManager, objectName: string, field: FieldDefinition, dto: UpdateFieldDto): Promise<void> {
    const stored = [dto.required, dto.unique, dto.indexed, dto.searchable, dto.options].some(
      (v) => v !== undefined && v !== false,
    );
    if (stored) throw formulaNotStored(field.name);
    if (dto.expression !== undefined || dto.resultType !== undefined) {
      const object = await this.loadObject(objectName, em);
      // A stored formula's column and trigger hold the expression (its own, or one it reads, inlined).
      const keepers = object.fields.filter(
        (f) => f.formula?.stored && (f.name === field.name || (f.formula.inputs ?? []).includes(field.name)),
      );
      if (keepers.length) {
        throw new DomainError(
          'field_in_use',
          `The expression of "${objectName}.${field.name}" is kept by the stored formula ${keepers.map((f) => `"${objectName}.${f.name}"`).join(', ')}; delete ${keepers.length > 1 ? 'them' : 'it'} and add ${keepers.length > 1 ? 'them' : 'it'} again to change it`,
          { computed: keepers.map((f) => `${objectName}.${f.name}`) },
        );
      }
      const current = findField(object, field.name);
      const updated: FieldMeta = {
        ...current,
        type: dto.resultType ?? current.formula!.resultType,
        formula: {
          expression: dto.expression ?? current.formula!.expression,
          resultType: dto.resultType ?? current.formula!.resultType,
        },
      };
      const fields = object.fields.map((f) => (f.name === field.name ? updated : f));
      resolveFormula(updated, scopeOf(fields));
      for (const other of fields) {
        if (!other.formula || other === updated) continue;
        try {
          resolveFormula({ ...other, formula: { ...other.formula } }, scopeOf(fields));
        } catch (error) {
          if (!(error instanceof DomainError) || error.code !== 'invalid_expression') throw error;
          throw new DomainError(
            'invalid_expression',
            `Formula "${other.name}" reads "${field.name}" and would no longer be valid: ${error.message}`,
            { ...(error.details as Record<string, unknown> | undefined), field: other.name },
          );
        }
      }
      await this.assertNoCycle(em, { object: objectName, field: field.name }, updated);
      if (updated.type !== current.type) {
        const computed = await this.computedUsers(em, (ref) => ref.object === objectName && ref.field === field.name, {
          object: objectName,
          field: field.name,
        });
        if (computed.length) {
          throw new DomainError(
            'field_in_use',
            `Field "${objectName}.${field.name}" is read by computed field${computed.length > 1 ? 's' : ''} ${computed.join(', ')}; its result type cannot change`,
            { computed },
          );
        }
      }
      field.expression = updated.formula!.expression;
      field.resultType = updated.formula!.resultType;
    }
    if (dto.label !== undefined) field.label = dto.label;
    if (dto.description !== undefined) field.description = dto.description;
    field.updatedAt = new Date();
  }

  /** Checks one field definition against the rules of its type; returns the normalised field. */
  private async validateField(em: EntityManager, dto: CreateFieldDto, selfName: string): Promise<FieldMeta> {
    assertValidName('field', dto.name);
    if (!isFieldType(dto.type)) {
      throw new DomainError('invalid_field_type', `Unknown field type "${String(dto.type)}"`, {
        availableTypes: DEFINITION_TYPES,
      });
    }
    const stray = (['relation', 'through', 'field', 'function', 'filter', 'inverse'] as const).find(
      (key) => dto[key] !== undefined,
    );
    if (stray) {
      throw new DomainError(
        'validation_failed',
        `Only computed fields (rollup, count, lookup_value) and links fields (inverse) have "${stray}"; "${dto.name}" is ${dto.type}`,
      );
    }
    if (dto.stored !== undefined) {
      throw new DomainError('validation_failed', `Only computed fields can be stored; "${dto.name}" is ${dto.type}`);
    }
    if (dto.expression !== undefined || dto.resultType !== undefined) {
      throw new DomainError(
        'validation_failed',
        `Only formula fields have an expression and a resultType; "${dto.name}" is ${dto.type}`,
      );
    }
    const type = dto.type;
    const takes = fieldTypeOf(type).takes;
    const field: FieldMeta = {
      name: dto.name,
      label: dto.label,
      type,
      required: dto.required ?? false,
      unique: dto.unique ?? false,
      indexed: dto.indexed ?? false,
      description: dto.description ?? null,
    };
    if (takes.options) {
      if (!dto.options?.length) throw new DomainError('missing_options', `Field "${dto.name}" of type ${dto.type} needs options`);
      field.options = validateOptions(dto.name, dto.options);
    } else if (dto.options !== undefined) {
      throw unexpectedOptions(dto.name, type);
    }
    if (takes.reference) {
      if (!dto.reference) throw new DomainError('missing_reference', `Lookup field "${dto.name}" needs a reference object`);
      const exists =
        dto.reference === selfName ||
        (isStorableName(dto.reference) && (await em.findOne(ObjectDefinitionEntity, { name: dto.reference })));
      if (!exists) {
        throw new DomainError(
          'unknown_reference',
          `Lookup field "${dto.name}" references "${dto.reference}", which does not exist`,
        );
      }
      field.reference = dto.reference;
    } else if (dto.reference !== undefined) {
      throw new DomainError(
        'unexpected_reference',
        `Only ${listTypes(fieldTypesWhere((entry) => entry.takes.reference === true))} fields have a reference; "${dto.name}" is ${type}`,
      );
    }
    assertUniqueAllowed(dto.name, type, field.unique);
    if (dto.searchable) {
      assertSearchableAllowed(dto.name, type);
      field.searchable = true;
    }
    return field;
  }

  private async findDefinition(em: EntityManager, name: string): Promise<ObjectDefinition> {
    const object = isStorableName(name) ? await em.findOne(ObjectDefinitionEntity, { name }) : null;
    if (!object) throw new DomainError('object_not_found', `Object "${name}" not found`);
    return object;
  }

  private async findFieldDefinition(em: EntityManager, object: ObjectDefinition, name: string): Promise<FieldDefinition> {
    const field = isStorableName(name) ? await em.findOne(FieldDefinitionEntity, { objectId: object.id, name }) : null;
    if (!field) throw new DomainError('field_not_found', `Field "${name}" not found on "${object.name}"`);
    return field;
  }

  private async hasNulls(em: EntityManager, objectName: string, fieldName: string): Promise<boolean> {
    return this.repo.hasNulls(em, objectName, findField(await this.loadObject(objectName, em), fieldName).name);
  }
}

/**
 * Only names that passed assertValidName are ever stored, so nothing else needs a lookup; this also keeps
 * caller-supplied path names that Postgres cannot even compare (NUL bytes) away from the database.
 */
function isStorableName(name: unknown): name is string {
  return typeof name === 'string' && IDENTIFIER_PATTERN.test(name);
}

function validateOptions(fieldName: string, options: string[]): string[] {
  const trimmed = options.map((o) => o.trim());
  if (trimmed.some((o) => !o)) throw new DomainError('invalid_options', `Options of "${fieldName}" must be non-empty strings`);
  if (new Set(trimmed).size !== trimmed.length)
    throw new DomainError('invalid_options', `Options of "${fieldName}" must be unique`);
  return trimmed;
}

function valuesTooLong(objectName: string, fieldName: string): DomainError {
  return new DomainError(
    'field_values_too_long',
    `Some "${objectName}" records hold a "${fieldName}" longer than ${MAX_INDEXED_TEXT_BYTES} bytes, more than an index ` +
      'can hold; shorten them first',
    { field: fieldName, maxBytes: MAX_INDEXED_TEXT_BYTES },
  );
}

function assertUniqueAllowed(fieldName: string, type: FieldType, unique: boolean): void {
  if (unique && !fieldTypeOf(type).unique) {
    throw new DomainError('invalid_unique', `A ${type} field ("${fieldName}") cannot be unique`);
  }
}

/** "metric a" or "metrics a, b"; nothing when `names` is empty. */
function named(kind: string, names: string[]): string[] {
  return names.length ? [`${kind}${names.length > 1 ? 's' : ''} ${names.join(', ')}`] : [];
}

function unexpectedOptions(fieldName: string, type: FieldType): DomainError {
  return new DomainError(
    'unexpected_options',
    `Only ${listTypes(fieldTypesWhere((entry) => entry.takes.options === true))} fields have options; "${fieldName}" is ${type}`,
  );
}

/** Search folds text: only the types whose entry says so (text-like, select included) can be searched. */
function assertSearchableAllowed(fieldName: string, type: FieldType): void {
  if (!fieldTypeOf(type).searchable) {
    throw new DomainError(
      'invalid_searchable',
      `Only text-like fields (${fieldTypesWhere((entry) => entry.searchable).join(', ')}) can be searchable; "${fieldName}" is ${type}`,
      { field: fieldName, type },
    );
  }
}

function findField(object: ObjectMeta, name: string): FieldMeta {
  const field = object.fields.find((f) => f.name === name && !f.system);
  if (!field) throw new DomainError('field_not_found', `Field "${name}" not found on "${object.name}"`);
  return field;
}

/** A formula field's definition, checked against the fields it may read (`siblings`, system fields included). */
function formulaField(dto: CreateFieldDto, siblings: FieldMeta[]): FieldMeta {
  assertValidName('field', dto.name);
  const stray = (['relation', 'through', 'field', 'function', 'filter', 'inverse'] as const).find(
    (key) => dto[key] !== undefined,
  );
  if (stray) throw new DomainError('validation_failed', `A formula field ("${dto.name}") has no "${stray}"`);
  if (
    dto.required ||
    dto.unique ||
    (dto.indexed && !dto.stored) ||
    dto.searchable ||
    dto.options !== undefined ||
    dto.reference !== undefined
  ) {
    throw formulaNotStored(dto.name);
  }
  if (dto.expression === undefined || !dto.expression.trim()) {
    throw new DomainError('invalid_expression', `Formula field "${dto.name}" needs an expression`, { position: 0 });
  }
  if (!dto.resultType) {
    throw new DomainError(
      'validation_failed',
      `Formula field "${dto.name}" needs a resultType (${FORMULA_RESULT_TYPES.join(', ')})`,
      {
        field: dto.name,
      },
    );
  }
  const field: FieldMeta = {
    name: dto.name,
    label: dto.label,
    type: dto.resultType,
    required: false,
    unique: false,
    indexed: false,
    description: dto.description ?? null,
    formula: { expression: dto.expression, resultType: dto.resultType },
  };
  resolveFormula(field, scopeOf([...siblings.filter((f) => f.name !== dto.name), field]));
  if (dto.stored) {
    // Kept by a row trigger: only what the row itself holds, and nothing that changes with no write.
    const computedInput = (field.formula!.inputs ?? []).find((name) => {
      const input = siblings.find((f) => f.name === name);
      return input !== undefined && isComputed(input) && !input.formula;
    });
    if (computedInput || formulaReadsClock(field.formula!.node!)) {
      throw new DomainError(
        'stored_not_supported',
        computedInput
          ? `"${dto.name}": a stored formula reads the record's own fields only; "${computedInput}" is computed from other records. Leave out "stored" to compute it when read`
          : `"${dto.name}": a formula over TODAY or NOW changes with no write and cannot be stored. Leave out "stored" to compute it when read`,
        { field: dto.name, ...(computedInput ? { input: computedInput } : {}) },
      );
    }
    field.indexed = dto.indexed === true;
    field.formula!.stored = true;
    field.formula!.filled = false;
  }
  return field;
}

function formulaNotStored(name: string): DomainError {
  return new DomainError(
    'validation_failed',
    `Formula field "${name}" is computed when read: it cannot be required, unique, indexed or searchable, nor have options or a reference`,
    { field: name },
  );
}

function scopeOf(fields: FieldMeta[]): FormulaScope {
  return (name) => fields.find((f) => f.name === name);
}

/** Checks a formula field's expression in `scope` and keeps the checked tree and the fields it reads. */
function resolveFormula(field: FieldMeta, scope: FormulaScope): void {
  const formula = field.formula!;
  formula.node = checkFormula(field.name, formula.expression, formula.resultType, scope);
  formula.inputs = [...formulaInputs(formula.node)];
}

function toFieldMeta(
  field: Pick<
    FieldDefinition,
    | 'name'
    | 'label'
    | 'type'
    | 'required'
    | 'unique'
    | 'indexed'
    | 'searchable'
    | 'description'
    | 'options'
    | 'reference'
    | 'expression'
    | 'resultType'
    | 'computed'
  >,
  objectName = '',
): FieldMeta {
  const formula = field.type === 'formula' && field.expression && field.resultType;
  const related = isRelatedKind(field.type) && field.computed && field.resultType;
  const meta: FieldMeta = {
    name: field.name,
    label: field.label,
    type: (formula || related ? field.resultType : field.type) as FieldType,
    required: field.required,
    unique: field.unique,
    indexed: field.indexed,
    description: field.description ?? null,
  };
  if (field.searchable) meta.searchable = true;
  if (field.options) meta.options = field.options;
  if (field.reference) meta.reference = field.reference;
  if (formula) {
    meta.formula = { expression: field.expression!, resultType: field.resultType as FormulaResultType };
    const kept = field.computed as { stored?: boolean; filled?: boolean } | null;
    if (kept?.stored) Object.assign(meta.formula, { stored: true, filled: kept.filled === true });
  }
  if (related)
    meta.related = relatedMeta(
      field.type as (typeof RELATED_KINDS)[number],
      objectName,
      field.computed as unknown as StoredRelated,
    );
  return meta;
}

function toObjectMeta(object: ObjectDefinition, fields: FieldDefinition[]): ObjectMeta {
  const all = [...SYSTEM_FIELDS, ...fields.map((field) => toFieldMeta(field, object.name))];
  for (const field of all) {
    if (!field.formula) continue;
    try {
      resolveFormula(field, scopeOf(all));
    } catch {
      // Checked when written; one that no longer checks reads as null (data/formula.compiler.ts) rather than failing the object.
    }
  }
  return { name: object.name, label: object.label, description: object.description ?? null, fields: all };
}
