import { Migration } from '@mikro-orm/migrations';

/**
 * Built-in agents remember what the server wrote: the builtinVersion of their seed and the fingerprint
 * of the definition, so that a start upgrades one nobody edited and leaves an edited one alone. Null on
 * agents an admin defined and on built-ins stored before (those are recognised by their definition).
 */
export class MigrationAgentBuiltins extends Migration {
  override name = '20261130000001_agent_builtins';

  override up(): void {
    this.addSql(
      `alter table "agents" add column "builtin_version" integer null, add column "builtin_fingerprint" varchar(64) null`,
    );
  }

  override down(): void {
    this.addSql(`alter table "agents" drop column "builtin_version", drop column "builtin_fingerprint"`);
  }
}
