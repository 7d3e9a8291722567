import { createHash, randomBytes } from 'node:crypto';

/** Secrets are 32 random bytes: a fast hash suffices (no password stretching needed for high-entropy keys). */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export function generateSecret(): string {
  return `dck_${randomBytes(32).toString('base64url')}`;
}

/** What listings show of a secret. */
export function secretPrefix(secret: string): string {
  return secret.slice(0, 8);
}
