/**
 * The entry files of each folder under src/ and lab/ (`index.ts`, `tooling.ts`, `testing.ts`) export only
 * names something outside the folder imports: a file of another src/ or lab/ folder, a test, or a program
 * (bench/, scripts/). Exports come from the TypeScript compiler (so `export *` chains count);
 * imports from its parser: named, default and namespace imports, re-exports, `import()` (the names
 * destructured from it, else all) and `import("…").Name` types (a bare `typeof import("…")`, as a
 * mock's `importOriginal` takes, uses none). An unused name is dropped from the entry file (the
 * folder may still use it), or named in {@link KEPT} with the reason. A name only tests import
 * belongs in the folder's `testing.ts`, not in `index.ts` or `tooling.ts` (off while
 * {@link TESTS_ONLY_PENDING} lists a folder).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const ENTRY_FILES = ["index.ts", "tooling.ts", "testing.ts"];
/** The folders whose subfolders have entry files: the product, and the lab that builds models and runs experiments. */
const CODE_DIRS = ["src", "lab"];
/** Folders outside those whose imports count: the tests, and the programs (benchmarks, scripts) that run reex's code. */
const TEST_DIRS = ["test"];
const PROGRAM_DIRS = ["bench", "scripts"];

/** `entry:name` exported although nothing outside the folder imports it, with why. */
const KEPT: Record<string, string> = {};

/**
 * Folders whose `index.ts` or `tooling.ts` still exports names only tests import. While any is
 * listed, the check that such names live in `testing.ts` is off; empty the list to turn it on.
 */
const TESTS_ONLY_PENDING: Record<string, string> = {};

/** `entry:name` only tests import, left in `index.ts` or `tooling.ts` because docs/architecture.md names it in the folder's public surface. */
const SURFACE: Record<string, string> = {
  "src/eval/index.ts:copyCount": "docs/architecture.md: src/eval's public surface",
  "src/pg/index.ts:checkPostgresSql": "docs/architecture.md: src/pg's public surface",
  "src/policy/tooling.ts:ScriptedPolicy": "docs/architecture.md: src/policy's tooling.ts surface",
  "lab/starter/index.ts:pickStep": "docs/architecture.md: lab/starter's public surface",
  "src/server/index.ts:buildApp": "docs/architecture.md: src/server's public surface (the app without a listening port)",
  "src/server/index.ts:ServerDeps": "the argument of buildApp, kept with it so a caller can name it",
  "src/server/index.ts:RunningServer": "what startServer (the CLI's `reex serve`) returns, kept with it so a caller can name it",
};

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" || e.name.startsWith(".") ? [] : sourceFiles(p);
    return /\.m?ts$/.test(e.name) && !e.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** One entry file's exports and who imports them. */
interface EntryUse {
  /** Path from the root, `/`-separated. */
  entry: string;
  exports: string[];
  /** Names imported by a file of another src/ or lab/ folder. */
  bySrc: Set<string>;
  /** Names imported by a file under test/. */
  byTests: Set<string>;
  /** Names imported by a file under bench/ or scripts/. */
  byPrograms: Set<string>;
}

/** Names a file imports from each module it names with a relative path; `"*"` stands for every name. */
function importsOf(file: string): { target: string; names: string[] }[] {
  const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
  const out: { target: string; names: string[] }[] = [];
  const add = (spec: ts.Node | undefined, names: string[]): void => {
    if (spec && ts.isStringLiteralLike(spec) && spec.text.startsWith("."))
      out.push({ target: resolve(dirname(file), spec.text).replace(/\.js$/, ".ts"), names });
  };
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n)) {
      const clause = n.importClause;
      const named = clause?.namedBindings;
      const names = [
        ...(clause?.name ? ["default"] : []),
        ...(named && ts.isNamedImports(named) ? named.elements.map((e) => (e.propertyName ?? e.name).text) : []),
        ...(named && ts.isNamespaceImport(named) ? ["*"] : []),
      ];
      add(n.moduleSpecifier, names);
    } else if (ts.isExportDeclaration(n)) {
      const clause = n.exportClause;
      add(n.moduleSpecifier, clause && ts.isNamedExports(clause) ? clause.elements.map((e) => (e.propertyName ?? e.name).text) : ["*"]);
    } else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword) {
      // `const { a, b: c } = await import("…")` uses a and b; any other use of the module may use anything
      const bound = ts.isAwaitExpression(n.parent) && ts.isVariableDeclaration(n.parent.parent) ? n.parent.parent.name : undefined;
      const names =
        bound && ts.isObjectBindingPattern(bound) && bound.elements.every((e) => !e.dotDotDotToken)
          ? bound.elements.map((e) => (e.propertyName ?? e.name).getText(sf))
          : ["*"];
      add(n.arguments[0], names);
    } else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && n.qualifier) {
      // `import("…").Name` uses Name; a bare `typeof import("…")` (a mock's `importOriginal`) names no export
      let q = n.qualifier;
      while (ts.isQualifiedName(q)) q = q.left;
      add(n.argument.literal, [q.text]);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/** Every entry file under `root`/src and `root`/lab with its exports and their importers outside its folder. */
function entryUses(root: string): EntryUse[] {
  const codeDirs = CODE_DIRS.map((d) => join(root, d)).filter((d) => existsSync(d));
  /** `src/agent`, `lab/synth`: a file's top folder and its folder under it (`src/cli.ts` belongs to `src/cli`). */
  const folderOf = (file: string): string => relative(root, file).split(sep).slice(0, 2).join("/").replace(/\.ts$/, "");
  const entries = codeDirs
    .flatMap((dir) => readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? ENTRY_FILES.map((e) => join(dir, d.name, e)) : [])))
    .filter((p) => existsSync(p));
  const program = ts.createProgram(entries, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const uses = new Map<string, EntryUse>();
  for (const path of entries) {
    const symbol = checker.getSymbolAtLocation(program.getSourceFile(path)!);
    const exports = symbol ? checker.getExportsOfModule(symbol).map((s) => s.name) : [];
    uses.set(path, { entry: relative(root, path).split(sep).join("/"), exports, bySrc: new Set(), byTests: new Set(), byPrograms: new Set() });
  }
  const under = (dirs: string[]): string[] => dirs.flatMap((d) => sourceFiles(join(root, d)));
  const importers = [
    ...codeDirs.flatMap(sourceFiles).map((file) => ({ file, kind: "bySrc" as const })),
    ...under(TEST_DIRS).map((file) => ({ file, kind: "byTests" as const })),
    ...under(PROGRAM_DIRS).map((file) => ({ file, kind: "byPrograms" as const })),
  ];
  for (const { file, kind } of importers) {
    for (const { target, names } of importsOf(file)) {
      const use = uses.get(target);
      if (!use || (kind === "bySrc" && folderOf(file) === folderOf(target))) continue;
      const into = use[kind];
      for (const name of names.includes("*") ? use.exports : names) into.add(name);
    }
  }
  return [...uses.values()];
}

/** `entry:name` of each export nothing outside its folder imports. */
const unused = (uses: EntryUse[]): string[] =>
  uses.flatMap((u) => u.exports.filter((name) => !u.bySrc.has(name) && !u.byTests.has(name) && !u.byPrograms.has(name)).map((name) => `${u.entry}:${name}`));

/** `entry:name` of each `index.ts` or `tooling.ts` export that only tests import (it belongs in the folder's `testing.ts`). */
const testsOnly = (uses: EntryUse[]): string[] =>
  uses
    .filter((u) => !u.entry.endsWith("/testing.ts"))
    .flatMap((u) => u.exports.filter((name) => u.byTests.has(name) && !u.bySrc.has(name) && !u.byPrograms.has(name)).map((name) => `${u.entry}:${name}`));

describe("entry-file exports", () => {
  let found: EntryUse[] | undefined;
  /** The repository's entry files (one compiler program, built once for the tests below). */
  const uses = (): EntryUse[] => (found ??= entryUses(ROOT));

  it("every name an entry file exports is imported by another src/ or lab/ folder or by a test, bench or script", () => {
    const unexplained = unused(uses()).filter((key) => !(key in KEPT));
    expect(unexplained, "drop these from the entry file, or add them to KEPT with the reason").toEqual([]);
  });

  it.skipIf(Object.keys(TESTS_ONLY_PENDING).length > 0)("an index.ts or tooling.ts export only tests import is in the folder's testing.ts instead", () => {
    const misplaced = testsOnly(uses()).filter((key) => !(key in SURFACE));
    expect(misplaced, "move these to the folder's testing.ts and import them from there in the tests").toEqual([]);
  });

  it("keeps KEPT to names still exported and still imported by nothing outside their folder", () => {
    const stillUnused = new Set(unused(uses()));
    expect(Object.keys(KEPT).filter((key) => !stillUnused.has(key))).toEqual([]);
  });

  it("finds an export nobody imports and one only tests import, counting named, default, namespace, re-exported, dynamic and type imports", () => {
    const root = mkdtempSync(join(tmpdir(), "reex-exports-"));
    const write = (path: string, text: string): void => {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    };
    write("src/a/impl.ts", "export const fromStar = 1;\nexport const own = 2;\n");
    write(
      "src/a/index.ts",
      [
        'export * from "./impl.js";',
        "export const named = 1, dynamic = 2, reexported = 3, typed = 4, unusedOne = 5;",
        "export default 6;",
        "export type Dyn = number;",
        "export const ownFolderOnly = 7;",
        "",
      ].join("\n"),
    );
    write("src/a/user.ts", 'import { ownFolderOnly } from "./index.js";\nexport const x = ownFolderOnly;\n');
    write("src/b/index.ts", 'import a, { named } from "../a/index.js";\nexport { reexported } from "../a/index.js";\nexport const b = a + named;\n');
    write(
      "test/b.test.ts",
      'import { b, reexported } from "../src/b/index.js";\nexport const t = async () => { const { dynamic } = await import("../src/a/index.js"); return b + reexported + dynamic; };\nexport type T = import("../src/a/index.js").Dyn;\nexport type M = typeof import("../src/a/index.js");\n',
    );
    write("bench/c.ts", 'import * as b from "../src/b/index.js";\nexport const y = b;\n');
    write("scripts/d.ts", 'import { fromStar } from "../src/a/index.js";\nexport const z: typeof import("../src/a/index.js").typed = fromStar;\n');
    const uses = entryUses(root);
    expect(unused(uses).sort()).toEqual(["src/a/index.ts:own", "src/a/index.ts:ownFolderOnly", "src/a/index.ts:unusedOne"]);
    expect(testsOnly(uses).sort()).toEqual(["src/a/index.ts:Dyn", "src/a/index.ts:dynamic"]);
  });
});
