import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** One message the SMTP server accepted: its envelope and its raw text (headers and body). */
export interface ReceivedEmail {
  from: string;
  to: string[];
  raw: string;
}

/**
 * A real SMTP server on 127.0.0.1 (smtp-server), as a mail relay would be: no TLS, no authentication;
 * every message it accepts is kept in `received`.
 */
export class SmtpReceiver {
  readonly received: ReceivedEmail[] = [];
  private server?: SMTPServer;
  private port = 0;

  async start(): Promise<void> {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', () => {
          this.received.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            raw: Buffer.concat(chunks).toString('utf8'),
          });
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `smtp://127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** A message's body as text: quoted-printable soft line breaks joined and its escapes decoded. */
export function bodyText(raw: string): string {
  const body = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  return body
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    .replace(/\r\n/g, '\n');
}
