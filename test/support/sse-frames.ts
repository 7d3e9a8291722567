import type http from 'node:http';

/** Calls `onFrame` with each frame (the text between blank lines) of an event stream as it arrives. */
export function onSseFrames(res: http.IncomingMessage, onFrame: (frame: string) => void): void {
  let buffer = '';
  res.setEncoding('utf8');
  res.on('data', (chunk: string) => {
    buffer += chunk;
    let index: number;
    while ((index = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, index);
      buffer = buffer.slice(index + 2);
      onFrame(frame);
    }
  });
  res.on('error', () => undefined);
}
