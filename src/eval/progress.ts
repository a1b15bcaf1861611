/**
 * A progress bar for long evaluation runs on stderr: redrawn in place on a terminal, one line
 * every ~5% otherwise (CI logs stay short).
 */

/** Where the bar writes; `isTTY` picks in-place redraws. */
export interface ProgressStream {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** Options of {@link createProgressBar}. */
export interface ProgressBarOptions {
  total: number;
  /** Shown before the bar. Default "eval". */
  label?: string;
  /** Default process.stderr. */
  stream?: ProgressStream;
  /** Override the stream's TTY detection. Default `stream.isTTY`. */
  tty?: boolean;
  /** Non-TTY: print a line each time this share more is done. Default 0.05. */
  step?: number;
  /** Clock for the elapsed / ETA figures, ms. Default performance.now. */
  now?: () => number;
}

/** A running bar: `update` after each item, `finish` once. */
export interface ProgressBar {
  update(done: number, note?: string): void;
  finish(note?: string): void;
}

function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "?";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

/** Renders one progress line (no newline): label, bar, count, percent, elapsed, ETA and a note. */
export function renderProgressLine(label: string, done: number, total: number, elapsedMs: number, note = "", width = 24): string {
  const share = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(share * width);
  const bar = "#".repeat(filled) + "-".repeat(width - filled);
  const eta = done > 0 && done < total ? ` eta ${formatDuration((elapsedMs / done) * (total - done))}` : "";
  return `${label} [${bar}] ${done}/${total} ${(share * 100).toFixed(0).padStart(3)}% ${formatDuration(elapsedMs)}${eta}${note ? `  ${note}` : ""}`;
}

/** Starts a progress bar (nothing is written until the first update). */
export function createProgressBar(options: ProgressBarOptions): ProgressBar {
  const stream = options.stream ?? process.stderr;
  const tty = options.tty ?? Boolean(stream.isTTY);
  const label = options.label ?? "eval";
  const step = options.step ?? 0.05;
  const now = options.now ?? (() => performance.now());
  const start = now();
  const total = Math.max(0, options.total);
  let lastShare = -Infinity;
  let lastDone = 0;
  let finished = false;

  const line = (done: number, note?: string): string => {
    const text = renderProgressLine(label, done, total, now() - start, note);
    const cols = stream.columns ?? 0;
    return tty && cols > 10 && text.length >= cols ? text.slice(0, cols - 1) : text;
  };

  return {
    update(done, note) {
      if (finished) return;
      lastDone = done;
      if (tty) {
        stream.write(`\r\x1b[2K${line(done, note)}`);
        return;
      }
      const share = total > 0 ? done / total : 1;
      if (share - lastShare >= step - 1e-9 || done === total) {
        lastShare = share;
        stream.write(`${line(done, note)}\n`);
      }
    },
    finish(note) {
      if (finished) return;
      finished = true;
      if (tty) stream.write(`\r\x1b[2K${line(lastDone, note)}\n`);
      else if (lastShare < (total > 0 ? lastDone / total : 1) || note) stream.write(`${line(lastDone, note)}\n`);
    },
  };
}
