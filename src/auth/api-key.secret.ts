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

/** Stream tokens: 32 random bytes too, with a prefix of their own so they are never mistaken for keys. */
export const STREAM_TOKEN_PATTERN = /^dst_[A-Za-z0-9_-]{43}$/;

export function generateStreamToken(): string {
  return `dst_${randomBytes(32).toString('base64url')}`;
}
