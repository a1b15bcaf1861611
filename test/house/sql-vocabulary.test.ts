/**
 * SQL knowledge has one home: src/sql/vocabulary.ts holds SQLite's keywords, functions, clause
 * ends and join words. No other file in src/ or lab/ declares a keyword list of its own: a
 * declaration whose string literals are bare words only (an array of words, or words separated by
 * spaces) and include SELECT, FROM and WHERE (#88).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const HOME = "src/sql/vocabulary.ts";

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = join(dir, d.name);
    if (d.isDirectory()) return d.name === "node_modules" ? [] : sourceFiles(p);
    return d.name.endsWith(".ts") && !d.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** The string literals under a node. */
function literals(node: ts.Node): string[] {
  const out: string[] = [];
  const walk = (n: ts.Node): void => {
    if (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) out.push(n.text);
    n.forEachChild(walk);
  };
  walk(node);
  return out;
}

/** `name` of each variable declaration in `text` that is a keyword list (see the module doc). */
function keywordLists(text: string): string[] {
  const source = ts.createSourceFile("x.ts", text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const walk = (n: ts.Node): void => {
    if (ts.isVariableDeclaration(n) && n.initializer) {
      const strings = literals(n.initializer);
      const words = new Set(strings.flatMap((s) => s.trim().split(/\s+/)).map((w) => w.toUpperCase()));
      const bare = strings.length > 0 && strings.every((s) => /^[A-Za-z_ ]*$/.test(s));
      if (bare && ["SELECT", "FROM", "WHERE"].every((w) => words.has(w))) found.push(n.name.getText(source));
    }
    n.forEachChild(walk);
  };
  walk(source);
  return found;
}

describe("one SQL vocabulary", () => {
  it("no file in src/ or lab/ but src/sql/vocabulary.ts declares a keyword list", () => {
    const lists = [...sourceFiles(join(ROOT, "src")), ...sourceFiles(join(ROOT, "lab"))]
      .map((f) => relative(ROOT, f).replaceAll("\\", "/"))
      .filter((f) => f !== HOME)
      .flatMap((f) => keywordLists(readFileSync(join(ROOT, f), "utf8")).map((name) => `${f}:${name}`));
    expect(lists).toEqual([]);
  });

  it("the check finds the lists the vocabulary holds, and not a SQL statement", () => {
    expect(keywordLists(readFileSync(join(ROOT, HOME), "utf8"))).toEqual(expect.arrayContaining(["SQLITE_KEYWORDS", "QUERY_KEYWORDS"]));
    expect(keywordLists('const L = new Set(["select", "from", "where", "group"]);')).toEqual(["L"]);
    expect(keywordLists('const Q = "SELECT name FROM singer WHERE age > 30";')).toEqual([]);
  });
});
