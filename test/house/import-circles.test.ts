/**
 * No import circles in src/: a depth-first search over the relative imports (type-only ones
 * included, `export … from` too) of every src/**\/*.ts finds none (#88). The folder rule
 * (test/architecture/imports.test.ts) keeps folders acyclic; this keeps files acyclic within them.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SRC = join(ROOT, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = join(dir, d.name);
    if (d.isDirectory()) return sourceFiles(p);
    return d.name.endsWith(".ts") && !d.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** The files a module imports or re-exports from by a relative specifier (`./x.js` → `x.ts`). */
function relativeImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+["'](\.{1,2}\/[^"']+)["']/gms)) {
    out.push(resolve(dirname(file), m[1]!.replace(/\.js$/, ".ts")));
  }
  return out;
}

/** Every circle of the graph, each once, as the files around it (relative to src/). */
function importCircles(files: string[]): string[][] {
  const graph = new Map(files.map((f) => [f, relativeImports(f).filter((g) => g !== f)]));
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const circles: string[][] = [];
  const visit = (f: string): void => {
    state.set(f, "open");
    stack.push(f);
    for (const g of graph.get(f) ?? []) {
      if (!graph.has(g)) continue;
      if (state.get(g) === "open") circles.push(stack.slice(stack.indexOf(g)).map((p) => relative(SRC, p)));
      else if (!state.has(g)) visit(g);
    }
    stack.pop();
    state.set(f, "done");
  };
  for (const f of [...graph.keys()].sort()) if (!state.has(f)) visit(f);
  return circles;
}

describe("import circles", () => {
  it("src/ has none", () => {
    expect(importCircles(sourceFiles(SRC))).toEqual([]);
  });

  it("the search finds a circle when there is one", () => {
    const circles = importCircles([join(ROOT, "test/house/fixtures/circle-a.ts"), join(ROOT, "test/house/fixtures/circle-b.ts")]);
    expect(circles).toHaveLength(1);
  });
});
