import { connect } from 'node:net';

/** The protocol's CancelRequest code (1234 in the high 16 bits, 5678 in the low 16 bits). */
const CANCEL_REQUEST_CODE = 80877102;
/** A cancel request is one packet the server answers by closing; it never takes long. */
const CANCEL_TIMEOUT_MS = 5_000;

/** What a connected node-postgres client knows about its server process (BackendKeyData). */
export interface BackendKey {
  host: string;
  port: number;
  processID: number;
  secretKey: number;
}

/**
 * Reads the backend key of a connected node-postgres client. `processID` and `secretKey` are set by
 * the driver on connect but missing from its type declarations; undefined when they are not numbers.
 */
export function backendKeyOf(client: { host: string; port: number }): BackendKey | undefined {
  const { processID, secretKey } = client as { processID?: unknown; secretKey?: unknown };
  if (typeof processID !== 'number' || typeof secretKey !== 'number') return undefined;
  return { host: client.host, port: client.port, processID, secretKey };
}

/**
 * Asks the server to cancel the statement that the backend `key` is running, the way psql's Ctrl-C
 * does: a CancelRequest packet on a short connection of its own. The postmaster handles it before
 * any login, so it needs no credentials and no free connection slot, and works however busy the
 * pools are. A backend that is idle by the time the signal lands ignores it.
 */
export function cancelBackend(key: BackendKey): Promise<void> {
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  packet.writeInt32BE(key.processID, 8);
  packet.writeInt32BE(key.secretKey, 12);
  return new Promise((resolve, reject) => {
    // A host starting with "/" is a Unix socket directory, as in libpq.
    const socket = key.host.startsWith('/') ? connect(`${key.host}/.s.PGSQL.${key.port}`) : connect(key.port, key.host);
    socket.setTimeout(CANCEL_TIMEOUT_MS, () => socket.destroy(new Error('the cancel request got no answer')));
    socket.once('connect', () => socket.end(packet));
    socket.once('error', reject);
    // The server closes the connection once it has signalled the backend.
    socket.once('close', () => resolve());
  });
}
