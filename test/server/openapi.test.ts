import { afterEach, describe, expect, it } from "vitest";
import { makeApp, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("GET /openapi.json", () => {
  it("documents every route with schemas generated from the zod schemas and config bounds", async () => {
    t = await makeApp({ decoding: { maxCandidates: 12 }, server: { apiKeys: ["k-0123456789"] } });
    const res = await t.app.inject({ method: "GET", url: "/openapi.json" });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(["/v1/databases", "/v1/databases/{id}", "/v1/sql", "/v1/stream", "/healthz", "/readyz", "/metrics"]),
    );
    const req = doc.components.schemas.SqlRequest;
    expect(req.required).toEqual(["database", "question"]);
    expect(req.properties.candidates.maximum).toBe(12);
    expect(req.properties.maxInteractions.maximum).toBe(50);
    expect(req.properties.strategy.enum).toEqual(["greedy", "linear", "tree", "tree-prune"]);
    expect(req.additionalProperties).toBe(false);
    expect(doc.components.schemas.SqlResponse.properties.candidates.type).toBe("array");
    const response = doc.components.schemas.SqlResponse;
    expect(response.required).toEqual(expect.arrayContaining(["confidence"]));
    expect(JSON.stringify(response.properties.confidence)).toMatch(/"maximum":1/);
    expect(response.properties.doubts.type).toBe("array");
    expect(doc.paths["/v1/sql"].post.responses["503"].description).toContain("QUEUE_FULL");
    expect(doc.paths["/v1/sql"].post.security).toEqual([{ bearer: [] }]);
  });
});
