import type { Caller } from '../auth/caller';
import { SYSTEM_CALLER } from '../governance/access.service';

/** Who wrote a change, relative to the key reading it. */
export const CHANGE_ACTORS = ['self', 'other', 'system'] as const;
export type ChangeActor = (typeof CHANGE_ACTORS)[number];

/**
 * Who wrote a change, as the reader may know it: itself, another key, or the server (sample data,
 * writes with no key). Only an admin learns which key (`keyId`): to a member, another key's id would
 * tell which keys exist and who changed what.
 */
export function actorOf(caller: Caller, keyId: string | null): ChangeActor {
  if (keyId === null || keyId === SYSTEM_CALLER.keyId) return 'system';
  return keyId === caller.keyId ? 'self' : 'other';
}
