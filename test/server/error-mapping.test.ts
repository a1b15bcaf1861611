import { afterEach, describe, expect, it } from "vitest";
import { ERROR_CATALOG } from "../../src/errors/index.js";
import { toApiError } from "../../src/server/testing.js";
import { makeApp, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

function expectCatalogError(res: { statusCode: number; json(): unknown; headers: Record<string, unknown> }, code: keyof typeof ERROR_CATALOG): void {
  expect(res.statusCode).toBe(ERROR_CATALOG[code].status);
  expect(String(res.headers["content-type"])).toContain("application/json");
  const body = res.json() as { code: string; message: string };
  expect(body.code).toBe(code);
  expect(typeof body.message).toBe("string");
}

describe("error mapping", () => {
  it("answers unknown routes and methods with NOT_FOUND", async () => {
    t = await makeApp();
    expectCatalogError(await t.app.inject({ method: "GET", url: "/v1/nothing" }), "NOT_FOUND");
    expectCatalogError(await t.app.inject({ method: "PUT", url: "/v1/sql" }), "NOT_FOUND");
    const res = await t.app.inject({ method: "GET", url: "/v2/x?key=secret-key-123" });
    expect(res.json().message).not.toContain("secret-key-123");
  });

  it("maps fastify's body errors: too large → PAYLOAD_TOO_LARGE, bad JSON → BAD_REQUEST, media type → UNSUPPORTED_MEDIA_TYPE", async () => {
    t = await makeApp({ server: { bodyLimitBytes: 2048 } });
    expectCatalogError(await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: "x", question: "q".repeat(5000) } }), "PAYLOAD_TOO_LARGE");
    expectCatalogError(await t.app.inject({ method: "POST", url: "/v1/sql", headers: { "content-type": "application/json" }, payload: "[1," }), "BAD_REQUEST");
    expectCatalogError(
      await t.app.inject({ method: "POST", url: "/v1/sql", headers: { "content-type": "application/xml" }, payload: "<a/>" }),
      "UNSUPPORTED_MEDIA_TYPE",
    );
    expectCatalogError(
      await t.app.inject({ method: "POST", url: "/v1/sql", headers: { "content-type": "application/octet-stream" }, payload: Buffer.from("x") }),
      "BAD_REQUEST",
    );
    expectCatalogError(await t.app.inject({ method: "POST", url: "/v1/sql", headers: { "content-type": "application/json" }, payload: "" }), "BAD_REQUEST");
  });

  it("maps arbitrary thrown values by status and hides unknown failures as INTERNAL", () => {
    expect(toApiError(Object.assign(new Error("x"), { statusCode: 413 })).code).toBe("PAYLOAD_TOO_LARGE");
    expect(toApiError(Object.assign(new Error("x"), { statusCode: 415 })).code).toBe("UNSUPPORTED_MEDIA_TYPE");
    expect(toApiError(Object.assign(new Error("x"), { statusCode: 418 })).code).toBe("BAD_REQUEST");
    expect(toApiError(Object.assign(new Error("x"), { code: "FST_ERR_CTP_BODY_TOO_LARGE", statusCode: 413 })).code).toBe("PAYLOAD_TOO_LARGE");
    const internal = toApiError(new TypeError("cannot read x of undefined"));
    expect(internal.code).toBe("INTERNAL");
    expect(internal.message).not.toContain("cannot read");
    expect(toApiError("boom").code).toBe("INTERNAL");
  });
});
