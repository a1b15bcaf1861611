import { afterEach, describe, expect, it } from "vitest";
import { fakePolicy, makeApp, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("the model's profile and name in the API", () => {
  it("passes a request's profile to the decoder, and none when the body names none", async () => {
    t = await makeApp();
    await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q", profile: "skyrl-sql" } });
    await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(t.decoder.calls.map((c) => c.profile)).toEqual(["skyrl-sql", undefined]);
  });

  it("refuses an unknown profile with BAD_REQUEST at body.profile, before decoding", async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q", profile: "gpt-sql" } });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe("BAD_REQUEST");
    expect(res.json().issues.map((i: { path: string[] }) => i.path.join("."))).toContain("body.profile");
    expect(t.decoder.calls).toHaveLength(0);
  });

  it("GET /readyz reports the default profile with its reason when the runtime gives one", async () => {
    t = await makeApp({ deps: { profile: { id: "skyrl-sql", reason: 'general.name "SkyRL-SQL-7B" names SkyRL-SQL' } } });
    const body = (await t.app.inject({ method: "GET", url: "/readyz" })).json();
    expect(body.profile).toEqual({ id: "skyrl-sql", reason: 'general.name "SkyRL-SQL-7B" names SkyRL-SQL' });
  });

  it("passes a request's constrained to the decoder, and none when the body does not say, so the decoder's default applies", async () => {
    t = await makeApp();
    for (const constrained of [true, false, undefined]) {
      await t.app.inject({
        method: "POST",
        url: "/v1/sql",
        payload: { database: t.dbId, question: "q", ...(constrained === undefined ? {} : { constrained }) },
      });
    }
    expect(t.decoder.calls.map((c) => c.constrained)).toEqual([true, false, undefined]);
  });

  it("GET /readyz says whether requests that do not say are decoded constrained", async () => {
    t = await makeApp({ deps: { constrained: true } });
    expect((await t.app.inject({ method: "GET", url: "/readyz" })).json().constrained).toBe(true);
  });

  it("GET /readyz names the model by its GGUF general.name, else its file name, never the server's folders", async () => {
    const named = fakePolicy();
    named.info = { ...named.info, model: "/srv/models/omnisql-7b-q4_k_m.gguf", metadata: { name: "OmniSQL 7B" } };
    t = await makeApp({ deps: { policy: named } });
    expect((await t.app.inject({ method: "GET", url: "/readyz" })).json().modelName).toBe("OmniSQL 7B");
    await t.cleanup();

    const unnamed = fakePolicy();
    unnamed.info = { ...unnamed.info, model: "/srv/models/omnisql-7b-q4_k_m.gguf" };
    t = await makeApp({ deps: { policy: unnamed } });
    const body = (await t.app.inject({ method: "GET", url: "/readyz" })).json();
    expect(body.modelName).toBe("omnisql-7b-q4_k_m.gguf");
  });

  it("says how the vote chose the winner in the answer", async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(res.json().decidedBy).toBe("majority");
  });
});
