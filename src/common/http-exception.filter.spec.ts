import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpExceptionFilter } from './http-exception.filter';

/** What the filter wrote: a reply that records its status, headers and body. */
function recordingReply() {
  const written = { status: 0, headers: {} as Record<string, string>, body: undefined as unknown };
  const reply = {
    sent: false,
    raw: { headersSent: false, end: () => undefined },
    header(name: string, value: string) {
      written.headers[name] = value;
      return reply;
    },
    status(code: number) {
      written.status = code;
      return reply;
    },
    send(body: unknown) {
      written.body = body;
      return reply;
    },
  };
  return { reply: reply as unknown as FastifyReply, written };
}

function answer(thrown: unknown) {
  const { reply, written } = recordingReply();
  new HttpExceptionFilter([], 5000).send(thrown, { id: 'req-1', url: '/api/v1/objects' } as FastifyRequest, reply);
  return written;
}

/** A driver error as the ORM wraps it: the SQLSTATE on the cause. */
function ormWrapped(code: string): Error {
  return new Error('DriverException', { cause: Object.assign(new Error('deadlock detected'), { code }) });
}

describe('HttpExceptionFilter', () => {
  it('answers a deadlock that reached it from the ORM as 503 database_busy with Retry-After', () => {
    const written = answer(ormWrapped('40P01'));
    expect(written.status).toBe(503);
    expect(written.headers['retry-after']).toBe('1');
    expect(written.body).toEqual({
      error: 'The write ran into concurrent writes of the same records and was rolled back; send it again',
      code: 'database_busy',
      details: { reason: 'deadlock' },
    });
  });

  it('answers a pool timeout of the ORM as 503 database_busy', () => {
    const written = answer(new Error('timeout exceeded when trying to connect'));
    expect(written.status).toBe(503);
    expect(written.headers['retry-after']).toBe('5');
    expect(written.body).toMatchObject({ code: 'database_busy', details: { waitedMs: 5000 } });
  });

  it('keeps an unknown failure a 500 that quotes only the request id', () => {
    const written = answer(ormWrapped('XX000'));
    expect(written.status).toBe(500);
    expect(written.body).toEqual({ error: 'Internal server error', code: 'internal_error', details: { requestId: 'req-1' } });
  });
});
