/**
 * docs/architecture.md's import rules, checked against every import in src/ and lab/ (the TypeScript
 * compiler's own import scanner, so `import type`, re-exports and dynamic imports all count).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { markdownTableAfter } from "../helpers/docs.js";

const ROOT = resolve(import.meta.dirname, "../..");
const SRC = join(ROOT, "src");
const LAB = join(ROOT, "lab");
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
  if (!existsSync(dir)) return [];
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

const importsOf = (files: string[]): Import[] =>
  files.flatMap((file) =>
    ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles.map((f) => ({ file: relative(ROOT, file), spec: f.fileName })),
  );
const IMPORTS: Import[] = importsOf(sourceFiles(SRC));
const LAB_IMPORTS: Import[] = importsOf(sourceFiles(LAB));

/** The lab/ module folders' rules: what each may import from src/ and from lab/. */
const LAB_RULES = new Map(
  markdownTableAfter(DOC, "### What lab/ may import").map(([folder, fromSrc, fromLab]) => [
    folder!.replace(/`/g, "").replace(/^lab\//, ""),
    { src: list(fromSrc!), lab: list(fromLab!) },
  ]),
);

/** Where a relative import of `file` lands: the top folder (`src`, `lab` or another) and the path below it, without `.js`/`.ts`. */
function landing({ file, spec }: Import): { top: string; folder: string; entry: string } | undefined {
  if (!spec.startsWith(".")) return undefined;
  const [top, folder, ...rest] = relative(ROOT, resolve(ROOT, dirname(file), spec)).split(sep);
  return { top: top!, folder: (folder ?? "").replace(/\.(ts|js)$/, ""), entry: rest.join("/").replace(/\.(ts|js)$/, "") };
}

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

describe('lab/ apart from the product (docs/architecture.md, "What lab/ may import")', () => {
  it("nothing under src/ imports lab/", () => {
    const wrong = IMPORTS.filter((i) => landing(i)?.top === "lab").map((i) => `${i.file} imports ${i.spec}`);
    expect(wrong).toEqual([]);
  });

  it("lab/ imports src/ only through entry files, and each module folder exactly what the table lists", () => {
    expect(LAB_RULES.size).toBeGreaterThan(0);
    const used = new Map<string, { src: Set<string>; lab: Set<string> }>();
    const wrong: string[] = [];
    for (const i of LAB_IMPORTS) {
      const to = landing(i);
      if (!to || (to.top !== "src" && to.top !== "lab")) continue;
      const from = i.file.split(sep)[1]!;
      if (to.top === "lab" && to.folder === from) continue;
      const entry = to.entry === "index" ? to.folder : `${to.folder}/${to.entry}`;
      const entryFile = to.entry === "index" || (to.top === "src" && to.entry === "tooling");
      if (!entryFile) wrong.push(`${i.file} imports ${to.top}/${entry}, which is no entry file`);
      const rule = LAB_RULES.get(from);
      if (rule) {
        const allowed = to.top === "src" ? rule.src : rule.lab;
        if (!allowed.includes(entry)) wrong.push(`${i.file} imports ${to.top}/${entry}, which the table does not list for lab/${from}`);
        const u = used.get(from) ?? used.set(from, { src: new Set(), lab: new Set() }).get(from)!;
        (to.top === "src" ? u.src : u.lab).add(entry);
      }
    }
    expect(wrong).toEqual([]);
    for (const [folder, rule] of LAB_RULES) {
      expect([...(used.get(folder)?.src ?? [])].sort(), `lab/${folder} from src/`).toEqual([...rule.src].sort());
      expect([...(used.get(folder)?.lab ?? [])].sort(), `lab/${folder} from lab/`).toEqual([...rule.lab].sort());
    }
  });

  it("the table names every lab/ folder with an index.ts", () => {
    const modules = readdirSync(LAB, { withFileTypes: true })
      .filter((e) => e.isDirectory() && existsSync(join(LAB, e.name, "index.ts")))
      .map((e) => e.name)
      .sort();
    expect([...LAB_RULES.keys()].sort()).toEqual(modules);
  });
});
