/** What the machine's Python offers the learner's tests. */
import { execFileSync } from "node:child_process";

/** Whether `python` imports torch (the learner's tests skip without it). Default interpreter /usr/bin/python3, the learner's. */
export function hasTorch(python = "/usr/bin/python3"): boolean {
  try {
    execFileSync(python, ["-c", "import torch"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}
