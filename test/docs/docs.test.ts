/**
 * The docs stay true by test: the README stays a short manual, the references stay within their
 * sizes, docs/configuration.md's table is the one scripts/config-table.ts generates from the
 * schema, every relative link in the markdown resolves (files and `#anchors`), and the README's
 * shell blocks parse and name commands that exist.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { TABLE_FILE, withTable } from "../../scripts/config-table.js";

const ROOT = resolve(import.meta.dirname, "../..");
const KB = 1024;
const read = (path: string): string => readFileSync(join(ROOT, path), "utf8");

/** Markdown files whose links are checked: the README, the changelog, and everything under docs/, models/, lab/, examples/ and bench/. */
function markdownFiles(): string[] {
  const walk = (dir: string): string[] =>
    existsSync(join(ROOT, dir))
      ? readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
          const p = `${dir}/${e.name}`;
          if (e.isDirectory()) return e.name === "node_modules" || e.name.startsWith(".") ? [] : walk(p);
          return e.name.endsWith(".md") ? [p] : [];
        })
      : [];
  return ["README.md", "CHANGELOG.md", ...["docs", "models", "lab", "examples", "bench"].flatMap(walk)];
}

/** The text outside fenced code blocks and inline code, where markdown links live. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").replace(/`[^`\n]*`/g, "");
}

/** GitHub's anchor for a heading: lower-cased, markdown marks and punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors a markdown file's headings define (a repeated heading gets -1, -2, … as on GitHub). */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").split("\n")) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Every relative link of a markdown file that does not resolve, as `file: target (why)`. */
function brokenLinks(file: string): string[] {
  const text = read(file);
  const broken: string[] = [];
  for (const m of prose(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    const [path, anchor] = target.split("#", 2) as [string, string | undefined];
    const abs = path === "" ? join(ROOT, file) : resolve(ROOT, dirname(file), decodeURI(path));
    if (!abs.startsWith(ROOT) || !existsSync(abs)) {
      broken.push(`${file}: ${target} (no such file)`);
      continue;
    }
    if (anchor !== undefined && abs.endsWith(".md") && statSync(abs).isFile()) {
      if (!anchors(readFileSync(abs, "utf8")).has(anchor)) broken.push(`${file}: ${target} (no such heading in ${relative(ROOT, abs)})`);
    }
  }
  return broken;
}

/** The README's fenced blocks of one info string, each as its text. */
function blocks(markdown: string, info: string): string[] {
  return [...markdown.matchAll(/^```([^\n]*)\n([\s\S]*?)^```$/gm)].filter((m) => m[1]!.trim() === info).map((m) => m[2]!);
}

/** The commands of a shell block: continuation lines joined, comments and blank lines left out. */
function commands(block: string): string[] {
  return block
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((l) => l.replace(/\s+#.*$/, "").trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

/** Why a README command would not run here, or undefined when what it names exists. */
function missing(command: string, cliCommands: Set<string>, scripts: Set<string>): string | undefined {
  const words = command.split(/\s+/);
  const [tool, first, second] = words;
  if (tool === "npx" && first === "reex") return cliCommands.has(second ?? "") ? undefined : `reex has no command "${second}"`;
  if (tool === "npx" && first === "tsx") return existsSync(join(ROOT, second ?? "")) ? undefined : `no file ${second}`;
  if (tool === "bash") return existsSync(join(ROOT, first ?? "")) ? undefined : `no file ${first}`;
  if (tool === "npm") {
    if (first === "install") return undefined;
    const script = first === "run" ? second : first;
    return scripts.has(script ?? "") ? undefined : `package.json has no script "${script}"`;
  }
  if (tool === "curl" || tool === "export") return undefined;
  return `"${tool}" is not a command the README's runnable blocks use (mark a block \`text\` if it is not meant to run)`;
}

describe("the docs", () => {
  const readme = read("README.md");

  it("keeps the README a manual of at most 25 KB, docs/training.md at most 30 KB and each model card at most 15 KB", () => {
    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(25 * KB);
    expect(Buffer.byteLength(read("docs/training.md"))).toBeLessThanOrEqual(30 * KB);
    const cards = readdirSync(join(ROOT, "models")).filter((f) => f.endsWith(".md") && !f.endsWith(".NOTICE.md"));
    expect(cards).toContain("MODEL_CARD.md");
    for (const card of cards) expect(Buffer.byteLength(read(`models/${card}`)), card).toBeLessThanOrEqual(15 * KB);
  });

  it("has docs/configuration.md's table as scripts/config-table.ts generates it from src/config/schema.ts", () => {
    const doc = readFileSync(TABLE_FILE, "utf8");
    expect(doc, "run `npx tsx scripts/config-table.ts --write`").toBe(withTable(doc));
  });

  it("resolves every relative link in the README, the changelog and the docs, anchors included", () => {
    const files = markdownFiles();
    expect(files.length).toBeGreaterThan(10);
    expect(files.flatMap(brokenLinks)).toEqual([]);
  });

  it("parses every runnable (sh) block of the README, and each names a command, script or file that exists", () => {
    const cli = read("src/cli.ts");
    const cliCommands = new Set([.../COMMANDS = \[([^\]]*)\]/.exec(cli)![1]!.matchAll(/"([a-z-]+)"/g)].map((m) => m[1]!));
    const scripts = new Set(Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts));
    const shell = blocks(readme, "sh");
    expect(shell.length).toBeGreaterThan(3);
    for (const block of shell) {
      const parsed = spawnSync("bash", ["-n"], { input: block, encoding: "utf8" });
      expect(parsed.status, `${block}\n${parsed.stderr}`).toBe(0);
      for (const command of commands(block).flatMap((c) => c.split(/\s*&&\s*/))) expect(missing(command, cliCommands, scripts), command).toBeUndefined();
    }
  });

  it("gives the quick start as the two commands CI runs", () => {
    expect(
      blocks(readme, "sh")
        .slice(0, 2)
        .map((b) => commands(b).join("; ")),
    ).toEqual(["npm install && npm start", "npm test"]);
    const ci = read(".ci/run");
    expect(ci).toMatch(/^npm install\b/m);
    expect(ci).toMatch(/\bnpm start\b/);
    expect(ci).toMatch(/^npm test$/m);
  });

  it("finds a broken link and a missing anchor, and slugs headings as GitHub does", () => {
    expect(slug("Path (b): a Hugging Face checkpoint + LoRA (`hf-step`, transformers + peft, torchrun)")).toBe(
      "path-b-a-hugging-face-checkpoint--lora-hf-step-transformers--peft-torchrun",
    );
    expect(slug("6. Testing without a GPU")).toBe("6-testing-without-a-gpu");
    expect(anchors("# A\n## B\n```\n# not a heading\n```\n## B\n")).toEqual(new Set(["a", "b", "b-1"]));
    const text = prose("see [x](y.md) and `[z](w.md)`\n```\n[q](r.md)\n```\n");
    expect(text).toContain("[x](y.md)");
    expect(text).not.toMatch(/w\.md|r\.md/);
  });
});
