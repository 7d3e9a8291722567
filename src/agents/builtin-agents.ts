import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { projectRoot } from '../common/project-root';
import { definitionFingerprint } from './agent-definition';
import { AgentSpecDto } from './agent.dto';
import type { AgentDefinitionFields } from './agent.mapper';

/** A built-in agent as its seed file (seeds/agents/<name>.json) defines it. */
export interface BuiltinSeed {
  file: string;
  /** `builtinVersion` of the file: raised with every change of the definition. */
  version: number;
  spec: AgentSpecDto;
}

/** One definition of a built-in agent that a release shipped. */
export interface ShippedDefinition {
  version: number;
  /** definitionFingerprint of the definition as the server stored it. */
  fingerprint: string;
}

/**
 * Every definition of each built-in agent that was ever shipped, the current one last (a unit test
 * holds each seed file to its last entry: a changed seed needs a higher builtinVersion and its entry
 * here). An agent stored before the server recorded what it wrote is recognised by these: one whose
 * definition is among them was never edited.
 */
export const SHIPPED_BUILTINS: Readonly<Record<string, readonly ShippedDefinition[]>> = {
  data_chat: [
    // Before builtinVersion existed, every definition counts as version 1: the data tools only;
    { version: 1, fingerprint: '0a045be28081019b9522c1d32f69b3bb40ecc504291b98a15081be56207ed1ae' },
    // with list_metrics and query_metric;
    { version: 1, fingerprint: 'bd81425ebb8e001d3acf55308498ba14ef0a9286837c895d3f3f810417404926' },
    // with calculate;
    { version: 1, fingerprint: 'a74a26a20d9ebbb79f127d487dd2c19bd8ba2ca827dc1afa4901da608ceeb752' },
    // with visualize.
    { version: 1, fingerprint: '9359d77b7891f73061e84108b3740c7d55bf9646fe378845aee2070cecdca88e' },
    // Figures written as references to result rows ({{r2.3.won_revenue}}), formatted by the server.
    { version: 2, fingerprint: '16407bb5543fc665b8a9dface916cc2141148d894920186e46ae2c57f0f75079' },
    // With record_history.
    { version: 3, fingerprint: 'd50aec40656714f8fd1d4f03a2942333f7b70c2d533378a0ceaf4a44de97e883' },
  ],
};

/** The seed files of seeds/agents, validated like a POST body; a bad one stops the start. */
export async function readBuiltinSeeds(): Promise<BuiltinSeed[]> {
  const dir = join(projectRoot(), 'seeds', 'agents');
  const seeds: BuiltinSeed[] = [];
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.json')).sort()) {
    const { builtinVersion, ...body } = JSON.parse(await readFile(join(dir, file), 'utf8')) as Record<string, unknown>;
    if (!Number.isInteger(builtinVersion) || (builtinVersion as number) < 1) {
      throw new Error(`seeds/agents/${file} is invalid: builtinVersion must be an integer of at least 1`);
    }
    const spec = plainToInstance(AgentSpecDto, body);
    const errors = await validate(spec, { whitelist: true, forbidNonWhitelisted: true });
    if (errors.length) throw new Error(`seeds/agents/${file} is invalid: ${errors.map((e) => e.toString()).join('; ')}`);
    seeds.push({ file, version: builtinVersion as number, spec });
  }
  return seeds;
}

/** What a stored agent row knows of the built-in it came from. */
export interface StoredBuiltin extends AgentDefinitionFields {
  /** The built-in version the server last wrote; null on agents stored before versions were recorded. */
  builtinVersion?: number | null;
  /** definitionFingerprint of what the server last wrote; null likewise. */
  builtinFingerprint?: string | null;
}

/** What to do with a built-in agent on start. */
export type BuiltinPlan =
  /** No agent has its name. */
  | { action: 'create' }
  /** Unedited and older than the seed: write the seed's definition over it. */
  | { action: 'upgrade'; from: number }
  /** Already the seed's definition, but not recorded as such (stored before versions, or put back by an admin): record it, change nothing. */
  | { action: 'record' }
  /** Edited through the API, and the seed is newer than what it was made from: leave it. */
  | { action: 'edited' }
  /** Nothing to do: up to date, newer than the seed (an older replica starting), or edited with no newer seed. */
  | { action: 'none' };

/**
 * An agent is unedited when its definition is exactly what the server last wrote (its recorded
 * fingerprint), or, if nothing was recorded, one of the definitions shipped for its name. Only an
 * unedited agent is upgraded, and only to a higher version.
 */
export function planBuiltin(stored: StoredBuiltin | null, seed: { version: number; fingerprint: string }): BuiltinPlan {
  if (!stored) return { action: 'create' };
  const writtenVersion = stored.builtinVersion ?? 0;
  if (writtenVersion > seed.version) return { action: 'none' };
  const fingerprint = definitionFingerprint(stored);
  if (fingerprint === seed.fingerprint) {
    return writtenVersion === seed.version && stored.builtinFingerprint === fingerprint
      ? { action: 'none' }
      : { action: 'record' };
  }
  const from = stored.builtinFingerprint
    ? fingerprint === stored.builtinFingerprint
      ? writtenVersion
      : undefined
    : shippedVersionOf(stored.name, fingerprint);
  if (from === undefined) return seed.version > writtenVersion ? { action: 'edited' } : { action: 'none' };
  return from < seed.version ? { action: 'upgrade', from } : { action: 'none' };
}

/** The version of the shipped definition of `name` with this fingerprint, if one has it. */
function shippedVersionOf(name: string, fingerprint: string): number | undefined {
  const shipped = Object.hasOwn(SHIPPED_BUILTINS, name) ? SHIPPED_BUILTINS[name] : [];
  return shipped.findLast((definition) => definition.fingerprint === fingerprint)?.version;
}
