import { Migration } from '@mikro-orm/migrations';

/** An agent's grounding mode: what happens to the numbers of an answer that no tool result supports. */
export class MigrationAgentGrounding extends Migration {
  override name = '20261126000001_agent_grounding';

  override up(): void {
    this.addSql(`alter table "agents" add column "grounding" varchar(16) not null default 'annotate'`);
  }

  override down(): void {
    this.addSql(`alter table "agents" drop column "grounding"`);
  }
}
