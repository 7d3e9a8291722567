import { hash, randomBytes } from 'node:crypto';

/**
 * Secrets are 32 random bytes: a fast hash suffices (no password stretching needed for high-entropy keys).
 * One-shot: every keyed request hashes its key, and a Hash object costs more than the digest.
 */
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
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
