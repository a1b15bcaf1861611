/**
 * A tiny Prometheus registry written by hand: counters, gauges and histograms with labels,
 * rendered in the text exposition format (version 0.0.4).
 */
import { REWRITE_RULES, type RewriteId } from "../agent/index.js";

type Labels = Record<string, string>;

function labelKey(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(",");
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function renderLabels(labels: Labels, extra?: [string, string]): string {
  const parts = Object.keys(labels)
    .sort()
    .map((k) => `${k}="${escapeLabel(labels[k] ?? "")}"`);
  if (extra) parts.push(`${extra[0]}="${escapeLabel(extra[1])}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

function formatNumber(n: number): string {
  if (n === Infinity) return "+Inf";
  if (n === -Infinity) return "-Inf";
  return Number.isNaN(n) ? "NaN" : String(n);
}

interface Metric {
  readonly name: string;
  render(): string[];
}

/** A monotonically increasing count per label set. */
export class Counter implements Metric {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  /** Adds `by` (default 1) to the series named by `labels`. */
  inc(labels: Labels = {}, by = 1): void {
    const key = labelKey(labels);
    const cur = this.values.get(key);
    if (cur) cur.value += by;
    else this.values.set(key, { labels: { ...labels }, value: by });
  }

  /** Current value of one series (0 when never incremented). */
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(labels))?.value ?? 0;
  }

  render(): string[] {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const { labels, value } of this.values.values()) lines.push(`${this.name}${renderLabels(labels)} ${formatNumber(value)}`);
    return lines;
  }
}

/** A value that goes up and down, either set directly or read from a callback at scrape time. */
export class Gauge implements Metric {
  private value = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly collect?: () => number,
  ) {}

  /** Sets the value (ignored when the gauge reads a callback). */
  set(value: number): void {
    this.value = value;
  }

  /** The value a scrape would report now. */
  get(): number {
    return this.collect ? this.collect() : this.value;
  }

  render(): string[] {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`, `${this.name} ${formatNumber(this.get())}`];
  }
}

/** Cumulative-bucket histogram per label set. */
export class Histogram implements Metric {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[],
  ) {}

  /** Records one observation in the series named by `labels`. */
  observe(value: number, labels: Labels = {}): void {
    const key = labelKey(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { labels: { ...labels }, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= (this.buckets[i] ?? Infinity)) s.counts[i]! += 1;
    s.sum += value;
    s.count += 1;
  }

  /** Observations recorded in one series. */
  count(labels: Labels = {}): number {
    return this.series.get(labelKey(labels))?.count ?? 0;
  }

  render(): string[] {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket${renderLabels(s.labels, ["le", formatNumber(b)])} ${s.counts[i]}`));
      lines.push(`${this.name}_bucket${renderLabels(s.labels, ["le", "+Inf"])} ${s.count}`);
      lines.push(`${this.name}_sum${renderLabels(s.labels)} ${formatNumber(s.sum)}`);
      lines.push(`${this.name}_count${renderLabels(s.labels)} ${s.count}`);
    }
    return lines;
  }
}

/** A set of metrics rendered together as one exposition. */
export class MetricsRegistry {
  private readonly metrics: Metric[] = [];

  /** Adds a metric and returns it. */
  register<M extends Metric>(metric: M): M {
    this.metrics.push(metric);
    return metric;
  }

  /** The Prometheus text exposition of every metric. */
  render(): string {
    return this.metrics.flatMap((m) => m.render()).join("\n") + "\n";
  }
}

/** The metrics the server exports at GET /metrics. */
export interface ServerMetrics {
  registry: MetricsRegistry;
  requests: Counter;
  duration: Histogram;
  tokens: Counter;
  /** Decode steps speculative decoding saved (accepted drafted tokens generated without a step of their own). */
  passesSaved: Counter;
  probes: Counter;
  /** Final SQL that failed to run and went back to the model as a probe (`agent.finalRetries`). */
  finalRetries: Counter;
  /** Final SQL each rewrite rule changed, by rule id (the rule's `metric`: `reex_final_repairs_total` for `agent.repairTables`, …). */
  rewrites: Record<RewriteId, Counter>;
  sqlTimeouts: Counter;
  queueDepth: Gauge;
  liveSequences: Gauge;
}

/** Creates the server's metric set; the gauges read their callbacks at scrape time. */
export function createServerMetrics(read: { queueDepth: () => number; liveSequences: () => number }): ServerMetrics {
  const registry = new MetricsRegistry();
  return {
    registry,
    requests: registry.register(new Counter("reex_requests_total", "HTTP requests by route template and status code.")),
    duration: registry.register(
      new Histogram(
        "reex_request_duration_seconds",
        "HTTP request duration by route template.",
        [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      ),
    ),
    tokens: registry.register(
      new Counter("reex_tokens_total", "Tokens by kind: prompt, evaluated, generated; drafted and accepted with speculative decoding."),
    ),
    passesSaved: registry.register(new Counter("reex_forward_passes_saved_total", "Decode steps speculative decoding saved.")),
    probes: registry.register(new Counter("reex_probes_total", "Probe queries the model wrote.")),
    finalRetries: registry.register(new Counter("reex_final_retries_total", "Final SQL that failed to run and went back to the model as a probe.")),
    rewrites: Object.fromEntries(REWRITE_RULES.map((r) => [r.id, registry.register(new Counter(r.metric.name, r.metric.help))])) as Record<RewriteId, Counter>,
    sqlTimeouts: registry.register(new Counter("reex_sql_timeouts_total", "Probe or candidate queries stopped at their time limit.")),
    queueDepth: registry.register(new Gauge("reex_queue_depth", "Generations waiting for a slot.", read.queueDepth)),
    liveSequences: registry.register(new Gauge("reex_live_sequences", "Live policy trajectories (sequences in use).", read.liveSequences)),
  };
}
