// Principals from Node: `oma serve --principals FILE` gives each token a tenant and roles.
// A Node client passes its principal's token exactly as it passes the shared one. Another
// tenant's client sees NOT_FOUND for the run, a host of another tenant never gets its tool
// calls, and a principal without the "host" role cannot serve tools.
//
// Runs the Python sidecar as a child process: OMA_PYTHON (default ../../.venv/bin/python).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import grpc from "@grpc/grpc-js";
import { SidecarClient, errorReason } from "../src/client.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, "..", "..", "..");
const PYTHON = process.env.OMA_PYTHON ?? path.join(ROOT, ".venv", "bin", "python");
const TOKENS = { alice: randomUUID(), acmeHost: randomUUID(), bob: randomUUID() };
const PRINCIPALS = [
  { token: TOKENS.alice, principal: "alice", tenant: "acme", roles: ["runs", "reviewer"] },
  { token: TOKENS.acmeHost, principal: "acme-host", tenant: "acme", roles: ["host"] },
  { token: TOKENS.bob, principal: "bob", tenant: "globex", roles: ["runs"] },
];
const LOOKUP = {
  name: "lookup",
  description: "Look a query up (implemented in Node).",
  inputSchema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
  handler: async (input, call) => `acme says ${input.query} for ${call.task_id}`,
};

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function startSidecar(port, principalsFile) {
  return new Promise((resolve, reject) => {
    const args = ["-m", "sidecar", "--listen", `127.0.0.1:${port}`, "--store", "memory://"];
    const child = spawn(PYTHON, [...args, "--principals", principalsFile, "--heartbeat", "0.5"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const timer = setTimeout(() => reject(new Error(`sidecar did not start:\n${output}`)), 30000);
    child.stdout.on("data", (chunk) => {
      output += chunk;
      if (output.includes("oma-sidecar listening on ")) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sidecar exited with ${code}:\n${output}`));
    });
  });
}

async function collect(iterable) {
  const events = [];
  for await (const event of iterable) events.push(event);
  return events;
}

test("tenants from a principals file: isolation and roles from Node", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "oma-node-principals-"));
  const file = path.join(dir, "principals.json");
  writeFileSync(file, JSON.stringify(PRINCIPALS), { mode: 0o600 });
  const port = await freePort();
  const sidecar = await startSidecar(port, file);
  const address = `127.0.0.1:${port}`;
  const alice = new SidecarClient(address, TOKENS.alice);
  const bob = new SidecarClient(address, TOKENS.bob);
  const acmeHost = new SidecarClient(address, TOKENS.acmeHost);
  const host = acmeHost.serveTools("acme-node-host", [LOOKUP]);
  t.after(() => {
    host.stop();
    for (const client of [alice, bob, acmeHost]) client.close();
    sidecar.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });
  await host.registered();

  const runId = `acme-${randomUUID().slice(0, 8)}`;
  const agent = {
    name: "worker",
    provider: "scripted",
    tools: ["lookup"],
    scripted: {
      turns: [
        { tool_calls: [{ name: "lookup", input_json: JSON.stringify({ query: "weather" }) }] },
        { text: "done: {{last_tool_result}}" },
      ],
    },
  };
  await alice.startRun({
    run_id: runId,
    team: { name: "acme-team", agents: [agent] },
    tasks: { tasks: [{ id: "t1", title: "Task t1", description: "Do t1." }] },
  });
  const events = await collect(alice.watch(runId));
  assert.equal(events.at(-1).run_status.status, "RUN_STATUS_COMPLETED");
  const run = await alice.getRun(runId, { full: true });
  assert.equal(run.tasks[0].result, "done: acme says weather for t1");

  // Another tenant: the run does not exist for it.
  await assert.rejects(bob.getRun(runId), (error) => {
    assert.equal(error.code, grpc.status.NOT_FOUND);
    assert.equal(errorReason(error), "RUN_NOT_FOUND");
    return true;
  });
  const { runs } = await bob.listRuns();
  assert.ok(!runs.some((listed) => listed.run_id === runId));

  // Roles: bob holds no "host" role, so his tool stream is refused.
  const stream = bob.tools.Connect(bob.metadata);
  stream.write({ register: { host_id: "bob-host", tools: [] } });
  await assert.rejects(
    new Promise((resolve, reject) => {
      stream.on("data", resolve);
      stream.on("error", reject);
    }),
    (error) => {
      assert.equal(error.code, grpc.status.PERMISSION_DENIED);
      return true;
    },
  );
  stream.end();
});
