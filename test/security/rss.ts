/** Resident memory of a process tree, read from /proc (Linux), for tests that bound a child's memory. */
import { readFileSync } from "node:fs";

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "latin1").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Resident set of `pid` in MiB (0 once it is gone). */
export function rssMiB(pid: number): number {
  try {
    return (Number(readFileSync(`/proc/${pid}/statm`, "latin1").split(" ")[1]) * 4096) / 1048576;
  } catch {
    return 0;
  }
}

/** Every descendant of `pid` (children, grandchildren, …). */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  const stack = children(pid);
  while (stack.length > 0) {
    const p = stack.pop()!;
    out.push(p);
    stack.push(...children(p));
  }
  return out;
}

/**
 * Samples the largest resident set among `root`'s descendants (and `root` itself with `self`)
 * every 2 ms until stopped; returns the peak in MiB.
 */
export function watchPeak(root: number, options: { self?: boolean } = {}): { stop(): number } {
  let peak = 0;
  const timer = setInterval(() => {
    for (const pid of options.self ? [root, ...descendants(root)] : descendants(root)) peak = Math.max(peak, rssMiB(pid));
  }, 2);
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}
