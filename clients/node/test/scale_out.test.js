// End to end from Node against two sidecars sharing one PostgreSQL: the Node host connects to
// both (hosts connect to every sidecar), a run starts on the first, the first is killed (-9)
// with t2's tool call outstanding, and the second adopts the run (attempt 2, no client call):
// t2 comes back to the host through the second sidecar with the same idempotency key, marked as
// a redelivery, and the run completes. Then DeleteRun removes the finished run.
//
// Needs PostgreSQL (OMA_TEST_POSTGRES_DSN, default postgresql://postgres@127.0.0.1:5432/test):
// skipped when it does not answer, failed when CI=true.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createConnection, createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import grpc from "@grpc/grpc-js";
import { SidecarClient, errorReason } from "../src/client.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, "..", "..", "..");
const PYTHON = process.env.OMA_PYTHON ?? path.join(ROOT, ".venv", "bin", "python");
const TOKEN = `node-scale-${randomUUID()}`;
const DSN = process.env.OMA_TEST_POSTGRES_DSN ?? "postgresql://postgres@127.0.0.1:5432/test";
const LEASE_TTL = "2";

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

function reachable(dsn) {
  const url = new URL(dsn);
  return new Promise((resolve) => {
    const socket = createConnection({ host: url.hostname, port: Number(url.port || 5432) });
    socket.setTimeout(2000);
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => (socket.destroy(), resolve(false)));
  });
}

function startSidecar(port, store, owner) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      PYTHON,
      ["-m", "sidecar", "--listen", `127.0.0.1:${port}`, "--store", store, "--owner-id", owner,
        "--lease-ttl", LEASE_TTL, "--heartbeat", "0.5"],
      { cwd: ROOT, env: { ...process.env, OMA_SIDECAR_TOKEN: TOKEN }, stdio: ["ignore", "pipe", "pipe"] },
    );
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

function kill9(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}

async function collect(iterable) {
  const events = [];
  for await (const event of iterable) events.push(event);
  return events;
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function dropTable(table) {
  const code = `import asyncio, asyncpg, sys
async def main():
    connection = await asyncpg.connect(sys.argv[1])
    try:
        await connection.execute('DROP TABLE IF EXISTS "' + sys.argv[2] + '"')
    finally:
        await connection.close()
asyncio.run(main())`;
  spawnSync(PYTHON, ["-c", code, DSN, table], { cwd: ROOT });
}

const LOOKUP_SCHEMA = { type: "object", properties: { query: { type: "string" } }, required: ["query"] };

test("node: two sidecars on PostgreSQL, one killed, the other completes the run", async (t) => {
  if (!(await reachable(DSN))) {
    if (process.env.CI === "true") assert.fail(`PostgreSQL at ${DSN} does not answer`);
    t.skip(`PostgreSQL at ${DSN} does not answer`);
    return;
  }
  const table = `oma_node_scale_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const store = `${DSN}?table=${table}`;
  const ports = [await freePort(), await freePort()];
  const sidecars = [];
  const clients = ports.map((port) => new SidecarClient(`127.0.0.1:${port}`, TOKEN));
  const hosts = [];
  t.after(async () => {
    for (const host of hosts) host.stop();
    for (const client of clients) client.close();
    for (const child of sidecars) await kill9(child);
    dropTable(table);
  });
  sidecars.push(await startSidecar(ports[0], store, "node-side-a"));
  sidecars.push(await startSidecar(ports[1], store, "node-side-b"));

  let killed = false;
  let stall;
  const stalled = new Promise((resolve) => (stall = resolve));
  const tool = {
    name: "lookup",
    inputSchema: LOOKUP_SCHEMA,
    handler: async (input, call) => {
      if (call.task_id === "t2" && !killed) {
        stall();
        return new Promise(() => {}); // outstanding when its sidecar dies
      }
      return `node says ${input.query} for ${call.task_id}`;
    },
  };
  // One Node host connected to every sidecar.
  for (const [index, client] of clients.entries()) hosts.push(client.serveTools(`node-host-${index}`, [tool]));
  await withTimeout(Promise.all(hosts.map((host) => host.registered())), 10000, "register");

  const runId = `node-scale-${randomUUID().slice(0, 8)}`;
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
  const tasks = ["t1", "t2", "t3"].map((id, index, ids) => ({
    id, title: `Task ${id}`, description: `Do ${id}.`, depends_on: index ? [ids[index - 1]] : [],
  }));
  const started = await clients[0].startRun({
    run_id: runId, team: { name: "node-team", agents: [agent] }, tasks: { tasks },
  });
  assert.equal(started.created, true);
  await withTimeout(stalled, 15000, "t2 call");
  await kill9(sidecars[0]);
  killed = true;

  // The survivor adopts the run once side-a's lease expired; watch it there to the end.
  const events = await withTimeout(collect(clients[1].watch(runId)), 30000, "watch on the survivor");
  assert.equal(events.at(-1).run_status.status, "RUN_STATUS_COMPLETED");
  const run = await clients[1].getRun(runId, { full: true });
  assert.equal(run.status, "RUN_STATUS_COMPLETED");
  assert.equal(run.attempt, 2);
  assert.deepEqual(
    run.tasks.map((task) => task.result),
    ["t1", "t2", "t3"].map((id) => `done: node says weather for ${id}`),
  );

  // t2 reached the host again through side-b, same key, flagged; t1 (committed) never again.
  const deliveries = hosts.flatMap((host) => host.ledger.deliveries);
  const count = (key) => deliveries.filter((call) => call.idempotency_key === key).length;
  assert.equal(count(`${runId}:t1:toolu_0_0`), 1);
  assert.equal(count(`${runId}:t2:toolu_0_0`), 2);
  assert.equal(count(`${runId}:t3:toolu_0_0`), 1);
  const again = hosts[1].ledger.deliveries.find((call) => call.idempotency_key === `${runId}:t2:toolu_0_0`);
  assert.ok(again, "the outstanding call is delivered through the adopting sidecar");
  assert.equal(again.redelivery, true);
  assert.equal(again.run_attempt, 2);

  // The finished run is deleted; it is gone from every sidecar.
  const deleted = await clients[1].deleteRun(runId);
  assert.ok(deleted.deleted_keys > 0);
  await assert.rejects(clients[1].getRun(runId), (error) => {
    assert.equal(error.code, grpc.status.NOT_FOUND);
    assert.equal(errorReason(error), "RUN_NOT_FOUND");
    return true;
  });
});
