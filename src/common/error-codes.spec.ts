import { ERRORS, ErrorCode, statusForCode } from './error-codes';

describe('the error catalog', () => {
  const codes = Object.keys(ERRORS) as ErrorCode[];

  it('is not empty', () => {
    expect(codes.length).toBeGreaterThan(50);
  });

  it.each(codes)('%s is snake_case and maps to a 4xx or 5xx status', (code) => {
    expect(code).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
    const status = statusForCode(code);
    expect(Number.isInteger(status)).toBe(true);
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(600);
  });
});
