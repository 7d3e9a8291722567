import { Migration } from '@mikro-orm/migrations';

/**
 * The links a change set made and removed, pair by pair (a links write's, a revert's), so a revert can undo
 * them: history keeps no link sets in the records' versions. Gone with their change set (retention).
 */
export class MigrationLinkChanges extends Migration {
  override name = '20261212000001_link_changes';

  override up(): void {
    this.addSql(`create table "link_changes" (
      "id" bigserial primary key,
      "change_set_id" uuid not null references "change_sets" ("id") on delete cascade,
      "link_table" text not null,
      "source_id" uuid not null,
      "target_id" uuid not null,
      "added" boolean not null
    )`);
    this.addSql(`create index "link_changes_change_set_idx" on "link_changes" ("change_set_id", "id")`);
  }

  override down(): void {
    this.addSql(`drop table "link_changes"`);
  }
}
