import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { DomainError } from '../common/domain-error';

/** IPv6 global unicast (2000::/3): every routable IPv6 address today; anything else is refused. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * Whether a webhook may connect to `address` without WEBHOOK_ALLOW_PRIVATE: a public unicast address
 * only. Private, loopback, link-local, CGNAT, multicast, broadcast, unspecified and reserved ranges are
 * refused, in IPv4 and IPv6; an IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as its IPv4
 * address, and IPv6 addresses outside 2000::/3 (IPv4-compatible, NAT64, 6to4 are not trusted either).
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.process(address);
  if (parsed.range() !== 'unicast') return false;
  return parsed.kind() === 'ipv4' || (parsed as ipaddr.IPv6).match(GLOBAL_UNICAST_V6);
}

/** An address to connect to, resolved from a URL's host and checked. */
export interface PinnedTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

/** Resolves every address of a host name (an IP literal resolves to itself). */
export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

const systemResolver: Resolver = (host) => dnsLookup(host, { all: true, verbatim: true });

/** A webhook URL as given: http or https, a host, no credentials. `webhook_url_refused` otherwise. */
export function parseWebhookUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw refused(`"${clip(text)}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw refused('A webhook URL must be http or https');
  if (url.username || url.password) throw refused('A webhook URL may not carry credentials');
  return url;
}

/**
 * The address a delivery connects to: the URL's host resolved now, refused (`webhook_url_refused`) when it
 * does not resolve or, unless `allowPrivate`, when ANY of its addresses is not public (a host that also
 * resolves to an internal address is not used at all). The caller connects to exactly this address, so
 * DNS answering differently a moment later (rebinding) changes nothing.
 */
export async function resolveTarget(
  urlText: string,
  allowPrivate: boolean,
  resolve: Resolver = systemResolver,
): Promise<PinnedTarget> {
  const url = parseWebhookUrl(urlText);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  let addresses: { address: string; family: number }[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await resolve(host);
    } catch {
      throw refused(`The host "${clip(host)}" of the webhook URL does not resolve`);
    }
  }
  if (!addresses.length) throw refused(`The host "${clip(host)}" of the webhook URL does not resolve`);
  if (!allowPrivate) {
    const inside = addresses.find((a) => !isPublicAddress(a.address));
    if (inside) {
      throw refused(
        `The webhook URL points at ${inside.address}, a private, loopback or link-local address (WEBHOOK_ALLOW_PRIVATE is off)`,
      );
    }
  }
  const [first] = addresses;
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}

function refused(message: string): DomainError {
  return new DomainError('webhook_url_refused', message);
}

function clip(text: string): string {
  return text.length > 100 ? `${text.slice(0, 100)}…` : text;
}
