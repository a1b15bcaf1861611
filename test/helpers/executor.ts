/** An executor that records the SQL it is asked to run and hands it to a real one. */
import type { ExecResult, ExecuteOptions, Executor } from "../../src/sql/index.js";

/** Records every query in `calls`, then runs it on `inner`; closing it leaves `inner` open. */
export class CountingExecutor implements Executor {
  calls: string[] = [];
  constructor(private readonly inner: Executor) {}
  async execute(path: string, sql: string, options?: ExecuteOptions): Promise<ExecResult> {
    this.calls.push(sql);
    return this.inner.execute(path, sql, options);
  }
  async close(): Promise<void> {}
}
