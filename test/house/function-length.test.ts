/**
 * No function in src/ or in lab/'s module folders (those with an index.ts) is longer than {@link MAX_LINES} lines unless the allow-list below names it
 * with the reason. Functions are found with the TypeScript compiler's parser: declarations,
 * methods, accessors, constructors, function expressions and arrow functions, each measured from
 * its first to its last line (its doc comment excluded, nested functions included).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const MAX_LINES = 120;
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** `path:name` of functions allowed past the limit, with why. An anonymous function is named after the function around it. */
const ALLOWED: Record<string, string> = {};

/** One function longer than the limit. */
interface LongFunction {
  key: string;
  lines: number;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = join(dir, d.name);
    if (d.isDirectory()) return sourceFiles(p);
    return d.name.endsWith(".ts") && !d.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** lab/'s module folders: those with an index.ts (synth, realdata, starter), which lived under src/ before. */
function labModules(): string[] {
  const lab = join(ROOT, "lab");
  return readdirSync(lab, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(lab, d.name, "index.ts")))
    .map((d) => join(lab, d.name));
}

/** The name a function is known by: its own, the variable or property it is assigned to, else `<anonymous>`. */
function nameOf(node: ts.FunctionLikeDeclaration, sf: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return "constructor";
  if (node.name) return node.name.getText(sf);
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name) return parent.name.getText(sf);
  return "<anonymous>";
}

/** Every function in `file` longer than `max` lines. */
function longFunctions(file: string, max: number): LongFunction[] {
  const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
  const path = relative(ROOT, file).split("\\").join("/");
  const out: LongFunction[] = [];
  const visit = (node: ts.Node, outer: string | null): void => {
    let here = outer;
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const fn = node as ts.FunctionLikeDeclaration;
      const own = nameOf(fn, sf);
      here = own === "<anonymous>" && outer ? `${outer}/<anonymous>` : own;
      const lines = sf.getLineAndCharacterOfPosition(node.getEnd()).line - sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
      if (lines > max) out.push({ key: `${path}:${here}`, lines });
    }
    ts.forEachChild(node, (child) => visit(child, here));
  };
  visit(sf, null);
  return out;
}

describe("function length", () => {
  let found: LongFunction[] | undefined;
  /** Every long function in src/ and lab/'s module folders (parsed once for the tests below); lab's programs are scripts, as scripts/ is. */
  const longInSrc = (): LongFunction[] => (found ??= [join(ROOT, "src"), ...labModules()].flatMap(sourceFiles).flatMap((f) => longFunctions(f, MAX_LINES)));

  it(`finds no function in src/ or lab/'s modules longer than ${MAX_LINES} lines outside the allow-list`, () => {
    const long = longInSrc();
    const unexplained = long.filter((f) => !(f.key in ALLOWED)).map((f) => `${f.key} (${f.lines} lines)`);
    expect(unexplained, "split these functions, or add them to ALLOWED with the reason").toEqual([]);
  });

  it("keeps the allow-list to functions that are still long", () => {
    const long = new Set(longInSrc().map((l) => l.key));
    expect(Object.keys(ALLOWED).filter((key) => !long.has(key))).toEqual([]);
  });

  it("measures a function from its first to its last line, nested functions included", () => {
    const body = Array.from({ length: MAX_LINES }, (_, i) => `  const v${i} = ${i};`).join("\n");
    const file = join(mkdtempSync(join(tmpdir(), "reex-fnlen-")), "sample.ts");
    writeFileSync(file, `/** doc */\nexport function long(): void {\n  const inner = () => {\n${body}\n  };\n}\nfunction short(): void {}\n`);
    expect(longFunctions(file, MAX_LINES).map((f) => [f.key.split(":")[1], f.lines])).toEqual([
      ["long", MAX_LINES + 4],
      ["inner", MAX_LINES + 2],
    ]);
  });
});
