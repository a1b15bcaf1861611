/**
 * The remote policy backend, split by job: the HTTP endpoint (endpoint.ts), the SSE stream
 * (sse.ts), the trajectory (trajectory.ts), what the server reports (probe.ts), chat rendering
 * (template.ts) and the policy that ties them (policy.ts).
 */
export { createRemotePolicy, type RemotePolicyOptions } from "./policy.js";
