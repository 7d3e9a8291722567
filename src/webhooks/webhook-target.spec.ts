import { DomainError } from '../common/domain-error';
import { isPublicAddress, resolveTarget } from './webhook-target';

describe('isPublicAddress', () => {
  it.each([
    '10.0.0.1',
    '172.16.5.4',
    '192.168.1.1',
    '127.0.0.1',
    '127.8.8.8',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '255.255.255.255',
    '224.0.0.1',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '::7f00:1',
    '64:ff9b::a00:1',
    '2002:a00:1::1',
    'ff02::1',
    'not an address',
  ])('refuses %s', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(['93.184.216.34', '8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'])('accepts %s', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });
});

describe('resolveTarget', () => {
  const resolver = (answers: Record<string, string[]>) => (host: string) => {
    const found = answers[host];
    return found
      ? Promise.resolve(found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })))
      : Promise.reject(new Error('ENOTFOUND'));
  };

  const code = async (promise: Promise<unknown>) => {
    try {
      await promise;
    } catch (error) {
      return error instanceof DomainError ? error.code : 'other';
    }
    return 'none';
  };

  it('pins the resolved public address', async () => {
    const target = await resolveTarget(
      'https://hooks.example.com/in',
      false,
      resolver({ 'hooks.example.com': ['93.184.216.34'] }),
    );
    expect(target).toMatchObject({ address: '93.184.216.34', family: 4 });
    expect(target.url.hostname).toBe('hooks.example.com');
  });

  it('refuses a name that resolves to a private address', async () => {
    expect(await code(resolveTarget('https://inside.example.com', false, resolver({ 'inside.example.com': ['10.1.2.3'] })))).toBe(
      'webhook_url_refused',
    );
  });

  it('refuses a name when any of its addresses is internal', async () => {
    const answers = { 'mixed.example.com': ['93.184.216.34', '::1'] };
    expect(await code(resolveTarget('https://mixed.example.com', false, resolver(answers)))).toBe('webhook_url_refused');
  });

  it('refuses IP literals on loopback and link-local, IPv4 and IPv6', async () => {
    for (const url of [
      'http://127.0.0.1:8080/',
      'http://[::1]/',
      'http://169.254.169.254/latest',
      'http://[::ffff:127.0.0.1]/',
    ]) {
      expect(await code(resolveTarget(url, false, resolver({})))).toBe('webhook_url_refused');
    }
  });

  it('allows private addresses with allowPrivate', async () => {
    const target = await resolveTarget('http://127.0.0.1:9/x', true, resolver({}));
    expect(target.address).toBe('127.0.0.1');
  });

  it('refuses other schemes, credentials and names that do not resolve', async () => {
    expect(await code(resolveTarget('ftp://example.com/', true, resolver({})))).toBe('webhook_url_refused');
    expect(await code(resolveTarget('https://u:p@example.com/', true, resolver({ 'example.com': ['93.184.216.34'] })))).toBe(
      'webhook_url_refused',
    );
    expect(await code(resolveTarget('https://nowhere.invalid/', true, resolver({})))).toBe('webhook_url_refused');
  });
});
