import { Migration } from '@mikro-orm/migrations';

/** `api_keys.last_used_at` was never written: authentication would have paid a write per request for it. */
export class MigrationApiKeyLastUsed extends Migration {
  override name = '20261122040000_drop_api_key_last_used_at';

  override up(): void {
    this.addSql(`alter table "api_keys" drop column "last_used_at"`);
  }

  override down(): void {
    this.addSql(`alter table "api_keys" add column "last_used_at" timestamptz null`);
  }
}
