import { AuthFailureThrottle } from './rate-limits';
import { generateSecret, generateStreamToken, hashSecret, secretPrefix, STREAM_TOKEN_PATTERN } from './api-key.secret';
import { domainError } from '../../test/support/metadata-fixtures';

describe('AuthFailureThrottle', () => {
  let now = 1_000_000;
  const clock = () => now;
  beforeEach(() => (now = 1_000_000));

  it('blocks an address at its limit within the minute, not before, and not another address', () => {
    const throttle = new AuthFailureThrottle(3, clock);
    throttle.failed('10.0.0.1');
    throttle.failed('10.0.0.1');
    expect(throttle.blocked('10.0.0.1')).toBe(false);
    expect(() => throttle.assertAllowed('10.0.0.1')).not.toThrow();
    throttle.failed('10.0.0.1');
    expect(throttle.blocked('10.0.0.1')).toBe(true);
    expect(throttle.blocked('10.0.0.2')).toBe(false);
  });

  it('answers rate_limited with the seconds left of the minute that began at the first failure', () => {
    const throttle = new AuthFailureThrottle(1, clock);
    throttle.failed('a');
    now += 45_500;
    const error = domainError(() => throttle.assertAllowed('a'));
    expect(error.code).toBe('rate_limited');
    expect(error.options.retryAfterSeconds).toBe(15);
  });

  it('forgets an address when its minute is over, and counts it afresh', () => {
    const throttle = new AuthFailureThrottle(2, clock);
    throttle.failed('a');
    throttle.failed('a');
    now += 59_999;
    expect(throttle.blocked('a')).toBe(true);
    now += 1;
    expect(throttle.blocked('a')).toBe(false);
    throttle.failed('a');
    expect(throttle.blocked('a')).toBe(false);
  });

  it('never blocks when the limit is 0 (off)', () => {
    const throttle = new AuthFailureThrottle(0, clock);
    for (let i = 0; i < 100; i++) throttle.failed('a');
    expect(throttle.blocked('a')).toBe(false);
    expect(() => throttle.assertAllowed('a')).not.toThrow();
  });
});

describe('API key secrets', () => {
  it('are dck_ plus 32 random bytes, listed by their first 8 characters, stored as their SHA-256', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^dck_[A-Za-z0-9_-]{43}$/);
    expect(generateSecret()).not.toBe(secret);
    expect(secretPrefix(secret)).toBe(secret.slice(0, 8));
    expect(hashSecret('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('stream tokens have a prefix of their own, so a key never passes for one', () => {
    expect(generateStreamToken()).toMatch(STREAM_TOKEN_PATTERN);
    expect(STREAM_TOKEN_PATTERN.test(generateSecret())).toBe(false);
  });
});
