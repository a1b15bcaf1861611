/**
 * docs/architecture.md's import rules, checked against every import in src/ (the TypeScript
 * compiler's own import scanner, so `import type`, re-exports and dynamic imports all count).
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { markdownTableAfter } from "../helpers/docs.js";

const ROOT = resolve(import.meta.dirname, "../..");
const SRC = join(ROOT, "src");
const DOC = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");

const tableAfter = (heading: string): string[][] => markdownTableAfter(DOC, heading);

const unquote = (cell: string): string => cell.replace(/`/g, "").replace(/^src\//, "");
const list = (cell: string): string[] => (cell === "—" ? [] : cell.split(",").map((c) => unquote(c.trim())));

interface Rule {
  layer: number;
  imports: string[];
}

const RULES = new Map<string, Rule>(
  tableAfter("## Import rules").map(([folder, layer, imports]) => [unquote(folder!), { layer: Number(layer), imports: list(imports!) }]),
);
const PACKAGES = tableAfter("Native and protocol packages").flatMap(([pkgs, only]) => list(pkgs!).map((p) => [p, unquote(only!)] as const));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

/** The folder a file under src/ belongs to (`src/cli.ts` belongs to cli). */
const folderOf = (file: string): string => relative(SRC, file).split(sep)[0]!.replace(/\.ts$/, "");

interface Import {
  file: string;
  spec: string;
}

const IMPORTS: Import[] = sourceFiles(SRC).flatMap((file) =>
  ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles.map((f) => ({ file: relative(ROOT, file), spec: f.fileName })),
);

/** Cross-folder edges: importer folder → "target" or "target/entry" (entry other than index). */
function crossFolder(): { from: string; to: string; entry: string; file: string }[] {
  const out: { from: string; to: string; entry: string; file: string }[] = [];
  for (const { file, spec } of IMPORTS) {
    if (!spec.startsWith(".")) continue;
    const target = relative(SRC, resolve(ROOT, dirname(file), spec));
    const from = folderOf(join(ROOT, file));
    const [to, ...rest] = target.split(sep);
    if (target.startsWith("..") || to === undefined || to.replace(/\.(ts|js)$/, "") === from) continue;
    out.push({ from, to: to.replace(/\.(ts|js)$/, ""), entry: rest.join("/").replace(/\.js$/, ""), file });
  }
  return out;
}

describe("import rules (docs/architecture.md)", () => {
  it("the table names every folder under src/ once, and each imported folder has an index.ts", () => {
    const folders = readdirSync(SRC, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    expect([...RULES.keys()].sort()).toEqual(folders);
    const imported = new Set([...RULES.values()].flatMap((r) => r.imports.map((i) => i.split("/")[0]!)));
    for (const f of imported) expect(readdirSync(join(SRC, f)), f).toContain("index.ts");
  });

  it("layers run one way: a folder imports only folders of a lower layer", () => {
    for (const [folder, rule] of RULES) {
      for (const target of rule.imports) {
        const lower = RULES.get(target.split("/")[0]!);
        expect(lower, `${folder} imports ${target}, which the table does not list`).toBeDefined();
        expect(lower!.layer, `${folder} (layer ${rule.layer}) imports ${target}`).toBeLessThan(rule.layer);
      }
    }
  });

  it("every cross-folder import goes through an entry point the table allows, and every allowed one is used", () => {
    const used = new Map<string, Set<string>>();
    const wrong: string[] = [];
    for (const e of crossFolder()) {
      const name = e.entry === "index" ? e.to : `${e.to}/${e.entry}`;
      if (!RULES.get(e.from)?.imports.includes(name)) wrong.push(`${e.file} imports ${name}`);
      (used.get(e.from) ?? used.set(e.from, new Set()).get(e.from)!).add(name);
    }
    expect(wrong).toEqual([]);
    for (const [folder, rule] of RULES) expect([...(used.get(folder) ?? [])].sort(), folder).toEqual([...rule.imports].sort());
  });

  it("native and protocol packages are imported only by their one folder", () => {
    const wrong = IMPORTS.filter(({ file, spec }) => {
      const owner = PACKAGES.find(([pkg]) => spec === pkg || spec.startsWith(`${pkg}/`));
      return owner !== undefined && folderOf(join(ROOT, file)) !== owner[1];
    }).map(({ file, spec }) => `${file} imports ${spec}`);
    expect(PACKAGES.length).toBeGreaterThan(0);
    expect(wrong).toEqual([]);
  });
});
