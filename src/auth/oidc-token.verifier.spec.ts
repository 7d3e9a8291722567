import { loadConfig } from '../config/app-config';
import { OidcTokenVerifier } from './oidc-token.verifier';

describe('OidcTokenVerifier.handles: which bearer secrets are judged as JWTs', () => {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const jwt = `${part({ alg: 'RS256', kid: 'k' })}.${part({ sub: 'u' })}.c2ln`;
  const configured = new OidcTokenVerifier(
    loadConfig({ AUTH_OIDC_ISSUER: 'https://idp.example.com', AUTH_OIDC_AUDIENCE: 'copilot' }),
  );

  it('takes a JWT, an unsigned one included (it is refused as invalid_token, not as an unknown key)', () => {
    expect(configured.handles(jwt)).toBe(true);
    expect(configured.handles(`${part({ alg: 'none' })}.${part({ sub: 'u' })}.`)).toBe(true);
  });

  it('leaves API keys to the keys, dotted ones included', () => {
    for (const secret of ['dck_abcdef0123456789', 'my.admin.key', 'a.b.c', `${part({ typ: 'JWT' })}.${part({})}.x`]) {
      expect(configured.handles(secret)).toBe(false);
    }
  });

  it('takes nothing when no issuer is configured', () => {
    expect(new OidcTokenVerifier(loadConfig({})).handles(jwt)).toBe(false);
  });
});
