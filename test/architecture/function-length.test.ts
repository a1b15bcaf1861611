/**
 * No function in src/ is longer than 120 lines (the issue-33 rule), except the ones listed below
 * with why. A listed function that is no longer over the limit fails too, so the list stays true.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const MAX_LINES = 120;

/** `file:function` → why it is still longer. */
const EXCEPTIONS: Record<string, string> = {
  "src/decoding/tree.ts:runTree": "being split into an object on branch i33",
  "src/training/loop.ts:runTraining": "being split on branch i33",
  "src/synth/questions.ts:candidate": "being split on branch i33",
  "src/agent/grammar.ts:buildGrammar": "being split on branch i33",
  "src/realdata/advising.ts:advisingRows": "being split on branch i33",
  "src/starter/index.ts:makeStarterModel": "being split on branch i33",
  "src/policy/remote/trajectory.ts:generate": "src/policy is another branch's (speculative decoding) while issue 33 runs",
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

function nameOf(node: ts.Node): string {
  const named = (node as { name?: ts.Node }).name;
  if (named) return named.getText();
  const parent = node.parent;
  if (!parent) return "(top level)";
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) return parent.name.getText();
  // an anonymous function counts as part of the nearest named one around it
  return nameOf(parent);
}

/** Every function over the limit, as `file:name` → lines. */
function longFunctions(): Map<string, number> {
  const long = new Map<string, number>();
  for (const file of sourceFiles(join(ROOT, "src"))) {
    const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body) {
        const lines = sf.getLineAndCharacterOfPosition(node.end).line - sf.getLineAndCharacterOfPosition(node.getStart()).line + 1;
        const key = `${relative(ROOT, file)}:${nameOf(node)}`;
        if (lines > MAX_LINES) long.set(key, Math.max(lines, long.get(key) ?? 0));
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return long;
}

describe("function length", () => {
  const long = longFunctions();

  it(`no function in src/ is over ${MAX_LINES} lines unless listed with a reason`, () => {
    expect([...long.keys()].filter((k) => !(k in EXCEPTIONS)).map((k) => `${k} (${long.get(k)} lines)`)).toEqual([]);
  });

  it("every listed exception is still over the limit", () => {
    expect(Object.keys(EXCEPTIONS).filter((k) => !long.has(k))).toEqual([]);
  });
});
