import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { RouteDoc } from "../../src/server/route-doc.js";
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

  it("describes exactly the routes registered with a doc, from their own schemas", async () => {
    t = await makeApp();
    const doc: RouteDoc = { summary: "A route added after the app was built", errors: ["DB_NOT_FOUND"], responses: { 200: "Counted" } };
    const params = z.object({ n: z.string().describe("A number.") });
    t.app.get("/extra/:n", { schema: { params, response: { 200: z.object({ n: z.number() }) } }, config: { doc } }, async () => ({ n: 1 }));
    const paths = (await t.app.inject({ method: "GET", url: "/openapi.json" })).json().paths;
    const methods = Object.fromEntries(Object.entries(paths).map(([path, ops]) => [path, Object.keys(ops as object).sort()]));
    expect(methods).toEqual({
      "/v1/databases": ["get", "post"],
      "/v1/databases/{id}": ["delete", "get"],
      "/v1/databases/{id}/examples": ["get", "post"],
      "/v1/databases/{id}/examples/{exampleId}": ["delete"],
      "/v1/conversations": ["get"],
      "/v1/conversations/{id}": ["delete", "get"],
      "/v1/sql": ["post"],
      "/v1/stream": ["get"],
      "/healthz": ["get"],
      "/readyz": ["get"],
      "/metrics": ["get"],
      "/openapi.json": ["get"],
      "/": ["get"],
      "/extra/{n}": ["get"],
    });
    const extra = paths["/extra/{n}"].get;
    expect(extra.summary).toBe(doc.summary);
    expect(extra.parameters).toEqual([{ name: "n", in: "path", required: true, description: "A number.", schema: { type: "string" } }]);
    expect(extra.responses["200"].content["application/json"].schema.properties.n.type).toBe("number");
    expect(extra.responses["404"].description).toBe("DB_NOT_FOUND");
    expect(extra).not.toHaveProperty("security");
    expect(paths["/v1/databases"].get.responses["200"].content["application/json"].schema.properties.databases.items).toEqual({
      $ref: "#/components/schemas/Database",
    });
    expect(Object.keys(paths["/v1/databases"].post.requestBody.content)).toEqual(
      expect.arrayContaining(["application/json", "application/octet-stream", "application/vnd.sqlite3", "application/x-sqlite3"]),
    );
  });
});
