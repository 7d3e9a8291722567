import { Inject, Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../auth/caller';
import { KeyStreams } from '../auth/key-streams.service';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataCallOptions, DataPool } from '../database/data-pool';
import { CommitAnnouncer } from '../database/commit-announcer.service';
import { drainBatches } from '../database/drain-batches';
import { decodeRow } from '../data/field-value.codec';
import { AccessService } from '../governance/access.service';
import { ObjectMeta } from '../metadata/object-metadata.types';
import {
  ChangeRow,
  compileChangePage,
  compileHorizon,
  compileLatest,
  compileCompact,
  compileExpire,
  compileMoveHorizons,
  compileUnsequencedObjects,
  SEQUENCE_BATCH,
  compileSequence,
  fieldAlias,
  VISIBLE_ALIAS,
} from './change-feed.compiler';
import { actorOf } from '../data/change-actor';
import { ChangeResponse, ChangesResponse, CURSOR_PATTERN, DEFAULT_CHANGES_LIMIT } from './changes.dto';

/** Changes a stream reads per statement while it catches up. */
const STREAM_PAGE = 500;

/** A page read as one caller: the changes it may see, and where the next page starts. */
interface ReadPage {
  changes: ChangeResponse[];
  nextCursor: string;
  /** Changes read, seen or not: fewer than asked means the feed's end. */
  read: number;
}

/**
 * The change feed, read as the caller: only changes of records its row filter lets it read (tested
 * on the record as the change left it, or as it was before a delete), with only the fields it may
 * see. Streams wake on every replica's commits of changes (CommitAnnouncer) and re-read from their cursor,
 * so what they send is what a page would say, in cursor order, without loss or repetition.
 */
@Injectable()
export class ChangesService {
  constructor(
    private readonly pool: DataPool,
    private readonly access: AccessService,
    private readonly announcer: CommitAnnouncer,
    private readonly streams: KeyStreams,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** GET /changes: the caller's changes after `after` (absent: from the oldest kept). */
  async page(
    caller: Caller,
    objectName: string,
    query: { after?: string; limit?: number },
    signal?: AbortSignal,
  ): Promise<ChangesResponse> {
    const object = await this.access.view(caller, objectName, 'read');
    const options = { signal, key: caller.keyId };
    const start = query.after ?? (await this.horizon(object.name, options)) ?? '0';
    const page = await this.read(caller, object, start, query.limit ?? DEFAULT_CHANGES_LIMIT, options);
    if (query.after !== undefined) await this.checkNotExpired(object.name, query.after, options);
    return { changes: page.changes, nextCursor: page.nextCursor };
  }

  /**
   * GET /changes/stream. The cursor and the object are checked before `open`, so a 400, 404 or 410
   * is a normal JSON error. Last-Event-ID wins over ?after; neither: changes from now on.
   */
  async stream(
    caller: Caller,
    objectName: string,
    resume: { lastEventId?: string; after?: string },
    open: () => ServerResponse,
  ): Promise<void> {
    if (resume.lastEventId !== undefined && !CURSOR_PATTERN.test(resume.lastEventId)) {
      throw new DomainError('validation_failed', 'Last-Event-ID must be a change cursor (an integer)');
    }
    const object = await this.access.view(caller, objectName, 'read');
    const given = resume.lastEventId ?? resume.after;
    const options = { key: caller.keyId };
    if (given !== undefined) await this.checkNotExpired(object.name, given, options);
    let cursor = given ?? (await this.latest(object.name, options));
    const writer = this.streams.open(caller, open);
    let running = false;
    let again = false;
    // One catch-up at a time; a wake-up during one runs another after it, so none is lost and none overlaps.
    const catchUp = async (): Promise<void> => {
      if (running) {
        again = true;
        return;
      }
      running = true;
      try {
        do {
          again = false;
          for (;;) {
            if (writer.isClosed) return;
            // The caller's view again each time: a policy change applies to an open stream at once.
            const view = await this.access.view(caller, objectName, 'read');
            const page = await this.read(caller, view, cursor, STREAM_PAGE, options);
            for (const change of page.changes) writer.send(change, { event: 'change', id: change.cursor });
            cursor = page.nextCursor;
            if (page.read < STREAM_PAGE) break;
          }
        } while (again);
      } catch {
        // The object went away or the caller lost access (or the database did): the client reconnects and is told why.
        writer.close();
      } finally {
        running = false;
      }
    };
    // Woken by commits of record changes (this replica's at once, the others' by their announcements), and by the
    // poll. Wake-ups within one announcement window make one read: each read numbers the object's new changes (a
    // short write), and a busy object commits far more often than a grid needs to hear of it.
    let wake: NodeJS.Timeout | undefined;
    const unsubscribe = this.announcer.subscribe((signal) => {
      if (!(signal.changes || signal.source === 'poll' || signal.source === 'resync') || wake) return;
      wake = setTimeout(() => {
        wake = undefined;
        void catchUp();
      }, this.config.eventsAnnounceWindowMs);
    });
    writer.onClose(() => {
      unsubscribe();
      clearTimeout(wake);
    });
    // Subscribed first, then caught up: nothing committed in between can be missed.
    void catchUp();
  }

  /**
   * The changes of `objectName` after `after` that `caller` may read and that match `where` (a
   * filter of the where compiler, against the caller's view of the object), for a follower outside a
   * request (a webhook reads as its owner): the caller's access as it is now, every time.
   * `nextCursor` passes the changes it may not see too.
   */
  async follow(
    caller: Caller,
    objectName: string,
    query: { after: string; limit: number; where?: unknown },
  ): Promise<{ changes: ChangeResponse[]; nextCursor: string; read: number }> {
    const object = await this.access.view(caller, objectName, 'read');
    return this.read(caller, object, query.after, query.limit, { key: caller.keyId }, query.where);
  }

  /** Checks that `where` compiles against the caller's view of the object (unknown_field, invalid_where otherwise). */
  async checkWhere(caller: Caller, objectName: string, where: unknown): Promise<void> {
    const object = await this.access.view(caller, objectName, 'read');
    compileChangePage(object, '0', 1, where);
  }

  /** The object's latest cursor now: where a follower that starts now begins. */
  latestCursor(objectName: string): Promise<string> {
    return this.latest(objectName, {});
  }

  /**
   * Keeps the feed to CHANGE_RETENTION_DAYS and history to HISTORY_RETENTION_DAYS: moves the feed's
   * horizons, cuts updates out of the feed to the fields they set, deletes what history no longer keeps.
   * Each step in batches of its own statement, so writers never wait on it. What it did, by step.
   */
  async prune(now = Date.now()): Promise<{ compacted: number; removed: number }> {
    const day = 86_400_000;
    const feed = new Date(now - this.config.changeRetentionDays * day);
    const history = new Date(now - Math.max(this.config.historyRetentionDays, this.config.changeRetentionDays) * day);
    const session = this.pool.session();
    // Changes no reader numbered yet (an object nobody follows) are numbered first, so the horizon passes them too.
    for (const { object } of await session.query(compileUnsequencedObjects(feed))) {
      while ((await session.query(compileSequence(object)))[0].numbered >= SEQUENCE_BATCH);
    }
    await session.query(compileMoveHorizons(feed, 2 * day));
    const compacted = await drainBatches(session, (limit) => compileCompact(feed, limit));
    const removed = await drainBatches(session, (limit) => compileExpire(history, limit));
    return { compacted, removed };
  }

  private async read(
    caller: Caller,
    object: ObjectMeta,
    after: string,
    limit: number,
    options: DataCallOptions,
    where?: unknown,
  ): Promise<ReadPage> {
    const rows = await this.pool.session(options).query(compileChangePage(object, after, limit, where));
    const visibleFields = new Set(object.fields.map((f) => f.name));
    const changes = rows.filter((row) => row[VISIBLE_ALIAS]).map((row) => toChange(caller, object, row, visibleFields));
    return { changes, nextCursor: rows.length ? rows[rows.length - 1].cursor : after, read: rows.length };
  }

  /**
   * The object's latest cursor, its committed changes numbered first (all of them: one call numbers at most
   * SEQUENCE_BATCH, and more wait after writes nobody followed): where "from now on" starts.
   */
  private async latest(objectName: string, options: DataCallOptions): Promise<string> {
    const session = this.pool.session(options);
    while ((await session.query(compileSequence(objectName)))[0].numbered >= SEQUENCE_BATCH);
    return (await session.query(compileLatest(objectName)))[0].latest;
  }

  private async horizon(objectName: string, options: DataCallOptions): Promise<string | undefined> {
    const [row] = await this.pool.session(options).query(compileHorizon(objectName));
    return row?.pruned_through;
  }

  /** 410 when the retention cleanup removed changes after `after`: the caller would miss them. */
  private async checkNotExpired(objectName: string, after: string, options: DataCallOptions): Promise<void> {
    const horizon = await this.horizon(objectName, options);
    if (horizon !== undefined && BigInt(after) < BigInt(horizon)) {
      throw new DomainError(
        'cursor_expired',
        `Changes of "${objectName}" after cursor ${after} are no longer kept; reload the records and follow from a new cursor`,
        { after, oldestCursor: horizon },
      );
    }
  }
}

function toChange(caller: Caller, object: ObjectMeta, row: ChangeRow, visibleFields: Set<string>): ChangeResponse {
  const changed = new Set(row.changed_fields);
  const change: ChangeResponse = {
    cursor: row.cursor,
    object: object.name,
    op: row.op,
    id: row.id,
    // A create sets every field, also those hidden from the key that wrote it (its list names only what that key sees).
    changedFields: object.fields
      .filter((f) => (row.op === 'create' || changed.has(f.name)) && visibleFields.has(f.name))
      .map((f) => f.name),
    at: row.at,
    actor: actorOf(caller, row.key_id),
    changeSetId: row.change_set_id,
  };
  if (caller.role === 'admin') change.keyId = row.key_id;
  if (row.op !== 'delete') {
    const values = Object.fromEntries(object.fields.map((f, i) => [f.name, row[fieldAlias(i)]]));
    change.record = decodeRow(object, values);
  }
  return change;
}
