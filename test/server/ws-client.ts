/** A small `ws` client for the streaming tests: collects messages and the close code. */
import WebSocket from "ws";

export interface StreamClient {
  ws: WebSocket;
  messages: Record<string, unknown>[];
  opened: Promise<void>;
  closed: Promise<{ code: number; reason: string }>;
  /** Resolves with the first message of `type` (waiting for it if needed). */
  next(type: string): Promise<Record<string, unknown>>;
}

/** Opens a WebSocket to `url`; `headers` are sent with the upgrade request. */
export function connect(url: string, headers: Record<string, string> = {}): StreamClient {
  const ws = new WebSocket(url, { headers });
  const messages: Record<string, unknown>[] = [];
  const waiters: { type: string; resolve: (m: Record<string, unknown>) => void }[] = [];
  ws.on("message", (data) => {
    const m = JSON.parse(data.toString()) as Record<string, unknown>;
    messages.push(m);
    for (const w of waiters.filter((x) => x.type === m.type)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(m);
    }
  });
  const opened = new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("unexpected-response", (_req, res) => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { statusCode: res.statusCode })));
    ws.once("error", reject);
  });
  opened.catch(() => undefined);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })));
  return {
    ws,
    messages,
    opened,
    closed,
    next: (type) => {
      const found = messages.find((m) => m.type === type);
      if (found) return Promise.resolve(found);
      return new Promise((resolve) => waiters.push({ type, resolve }));
    },
  };
}
