/** Two-sample statistics for tests that compare token frequencies of two samplers. */

/** Pearson's chi-square test of homogeneity of two samples of categories (categories with fewer than 10 in all pooled). */
export function chiSquare(a: number[], b: number[]): { statistic: number; df: number } {
  const counts = new Map<number, [number, number]>();
  for (const x of a) (counts.get(x) ?? counts.set(x, [0, 0]).get(x)!)[0]++;
  for (const x of b) (counts.get(x) ?? counts.set(x, [0, 0]).get(x)!)[1]++;
  const rows: [number, number][] = [];
  const rare: [number, number] = [0, 0];
  for (const c of counts.values()) {
    if (c[0] + c[1] >= 10) rows.push(c);
    else {
      rare[0] += c[0];
      rare[1] += c[1];
    }
  }
  if (rare[0] + rare[1] > 0) rows.push(rare);
  if (rows.length < 2) return { statistic: 0, df: 1 };
  const na = a.length;
  const nb = b.length;
  let statistic = 0;
  for (const [x, y] of rows) {
    const total = x + y;
    const ea = (total * na) / (na + nb);
    const eb = (total * nb) / (na + nb);
    statistic += (x - ea) ** 2 / ea + (y - eb) ** 2 / eb;
  }
  return { statistic, df: rows.length - 1 };
}

/** The chi-square distribution's quantile (Wilson–Hilferty), for the critical value at `p`. */
export function chiSquareQuantile(df: number, p: number): number {
  // the standard normal quantile for p = 0.999
  const z = p === 0.999 ? 3.0902 : Number.NaN;
  const h = 2 / (9 * df);
  return df * (1 - h + z * Math.sqrt(h)) ** 3;
}
