import { Migration } from '@mikro-orm/migrations';

/**
 * `chat_owner_admits(lock_key, owner, max)`: whether `owner` has fewer than `max` chats pending or
 * running, decided under the owner's transaction-level advisory lock (`lock_key`, hashtext(owner)),
 * which stays held until the caller's transaction ends. It lets a turn-starting write admit itself in
 * the same statement: a VOLATILE plpgsql function takes a fresh snapshot for each query it runs, so
 * the count made after the lock sees every chat that a previous holder of the lock committed, which a
 * count in the calling statement (whose snapshot predates the wait) would not.
 */
export class MigrationChatAdmission extends Migration {
  override name = '20261128000001_chat_admission';

  override up(): void {
    this.addSql(`create function "chat_owner_admits"("lock_key" integer, "chat_owner" text, "max_in_flight" integer)
      returns boolean language plpgsql volatile as $$
      begin
        perform pg_advisory_xact_lock("lock_key", hashtext("chat_owner"));
        return (select count(*) from "chats" c
                 where c."owner" = "chat_owner" and c."status" in ('pending', 'running')) < "max_in_flight";
      end
    $$`);
  }

  override down(): void {
    this.addSql(`drop function "chat_owner_admits"(integer, text, integer)`);
  }
}
