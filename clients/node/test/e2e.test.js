// End to end from Node: start a run whose agent uses a tool implemented here, watch its events,
// kill -9 the sidecar mid-call, start a new one, it adopts the run, see it complete with no
// committed tool call delivered twice. Then (when the sidecar reports the "approval_gates"
// capability) suspend a run at an approval gate, verify the canonical JSON against its hash,
// approve it and see the run complete.
//
// Runs the Python sidecar as a child process: OMA_PYTHON (default ../../.venv/bin/python).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import grpc from "@grpc/grpc-js";
import { SidecarClient, errorInfo, errorReason } from "../src/client.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, "..", "..", "..");
const PYTHON = process.env.OMA_PYTHON ?? path.join(ROOT, ".venv", "bin", "python");
const TOKEN = `node-e2e-${randomUUID()}`;

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

/** Start `python -m sidecar`; resolves with the child once it printed its address. */
function startSidecar(port, store) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      PYTHON,
      ["-m", "sidecar", "--listen", `127.0.0.1:${port}`, "--store", `file://${store}`, "--heartbeat", "0.5",
        "--lease-ttl", "2"],
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

const LOOKUP_SCHEMA = {
  type: "object",
  properties: { query: { type: "string" } },
  required: ["query"],
};

function scriptedAgent(tool) {
  return {
    name: "worker",
    provider: "scripted",
    tools: [tool],
    scripted: {
      turns: [
        { tool_calls: [{ name: tool, input_json: JSON.stringify({ query: "weather" }) }] },
        { text: "done: {{last_tool_result}}" },
      ],
    },
  };
}

function chain(ids) {
  return ids.map((id, index) => ({
    id,
    title: `Task ${id}`,
    description: `Do ${id}.`,
    depends_on: index ? [ids[index - 1]] : [],
  }));
}

test("node drives a run with Node tools through a sidecar kill -9 and adoption", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "oma-node-e2e-"));
  const store = path.join(dir, "state.json");
  const port = await freePort();
  const client = new SidecarClient(`127.0.0.1:${port}`, TOKEN);
  let sidecar = await startSidecar(port, store);
  let crashed = false;
  let stall;
  const stalled = new Promise((resolve) => (stall = resolve));
  let crash;
  const afterCrash = new Promise((resolve) => (crash = resolve));
  const runs = new Map(); // idempotency key -> handler executions
  const host = client.serveTools("node-host", [
    {
      name: "lookup",
      description: "Look a query up (implemented in Node).",
      inputSchema: LOOKUP_SCHEMA,
      handler: async (input, call) => {
        runs.set(call.idempotency_key, (runs.get(call.idempotency_key) ?? 0) + 1);
        if (call.task_id === "t2" && !crashed) {
          stall();
          await afterCrash; // outstanding when the sidecar dies; its result finds no sidecar
        }
        return `node says ${input.query} for ${call.task_id}`;
      },
    },
  ]);
  t.after(() => {
    host.stop();
    client.close();
    if (sidecar.exitCode === null) sidecar.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  // Unauthenticated calls are refused with the documented code and reason.
  const intruder = new SidecarClient(`127.0.0.1:${port}`, "wrong-token");
  await assert.rejects(intruder.serverInfo(), (error) => {
    assert.equal(error.code, grpc.status.UNAUTHENTICATED);
    assert.equal(errorReason(error), "UNAUTHENTICATED");
    // The rich status, read with the error-detail protos shipped in clients/node/proto.
    assert.deepEqual(errorInfo(error), { reason: "UNAUTHENTICATED", domain: "oma.v1", metadata: {} });
    return true;
  });
  intruder.close();

  // A malformed request: INVALID_ARGUMENT, and ErrorInfo names the field.
  await assert.rejects(
    client.startRun({ run_id: "bad\n", team: { name: "t", agents: [scriptedAgent("lookup")] } }),
    (error) => {
      assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
      const info = errorInfo(error);
      assert.equal(info.reason, "VALIDATION");
      assert.equal(info.metadata.field, "run_id");
      return true;
    },
  );

  await withTimeout(host.registered(), 10000, "register");
  const info = await client.serverInfo();
  assert.ok(info.capabilities.includes("tool_host"));

  const runId = `node-${randomUUID().slice(0, 8)}`;
  const started = await client.startRun({
    run_id: runId,
    team: { name: "node-team", agents: [scriptedAgent("lookup")] },
    tasks: { tasks: chain(["t1", "t2", "t3"]) },
  });
  assert.equal(started.created, true);

  // Watch until t2's tool call is outstanding, then kill the sidecar.
  // The default stream is the run's journal: t1's completion is its task/status event, which
  // the watcher reads from the durable journal before the sidecar dies.
  const seen = [];
  let t1Seen;
  const t1Completed = new Promise((resolve) => (t1Seen = resolve));
  const watching = (async () => {
    try {
      for await (const event of client.watch(runId)) {
        seen.push(event);
        if (event.type === "task/status" && event.task_id === "t1" && event.task_status?.status === "TASK_STATUS_COMPLETED") {
          t1Seen(event);
        }
      }
    } catch {
      // the stream breaks when the sidecar dies
    }
  })();
  await withTimeout(stalled, 15000, "t2 call");
  const t1Done = await withTimeout(t1Completed, 10000, "t1 completed in the journal");
  const lastSeq = Math.max(...seen.map((event) => event.seq));
  // Event data arrives as a plain object, not as a google.protobuf.Struct.
  assert.equal(t1Done.data.status, "completed", JSON.stringify(t1Done.data));
  assert.equal(typeof t1Done.data, "object", JSON.stringify(t1Done.data));
  await kill9(sidecar);
  crashed = true;
  crash();
  await watching;
  assert.deepEqual([...host.committedKeys()], [`${runId}:t1:toolu_0_0`]);

  // A new sidecar on the same store (a new owner) adopts the run once the dead one's lease
  // expired, from its checkpoint, as attempt 2: no RestoreRun needed.
  sidecar = await startSidecar(port, store);
  await client.ready();
  await withTimeout(host.registered(), 10000, "re-register");

  const after = await withTimeout(collect(client.watch(runId, { afterSeq: lastSeq })), 20000, "watch");
  assert.ok(after.every((event) => event.seq === 0 || event.seq > lastSeq), "seqs are never reused");
  assert.equal(after.at(-1).run_status.status, "RUN_STATUS_COMPLETED");
  const run = await client.getRun(runId, { full: true });
  assert.equal(run.status, "RUN_STATUS_COMPLETED");
  assert.equal(run.attempt, 2);
  assert.deepEqual(
    run.tasks.map((task) => task.result),
    ["t1", "t2", "t3"].map((id) => `done: node says weather for ${id}`),
  );

  // The run's journal as a stream: journal seqs across both attempts, resumable by seq.
  const journal = await withTimeout(collect(client.watch(runId, { journal: true })), 10000, "journal");
  const journalSeqs = journal.map((event) => event.seq);
  assert.deepEqual(journalSeqs, [...new Set(journalSeqs)].sort((a, b) => a - b), "strictly increasing");
  assert.deepEqual(new Set(journal.map((event) => event.attempt)), new Set([1, 2]));
  assert.equal(journal.at(-1).type, "run/end");
  assert.equal(journal.at(-1).run_status.status, "RUN_STATUS_COMPLETED");
  const middle = journalSeqs[Math.floor(journalSeqs.length / 2)];
  const rest = await collect(client.watch(runId, { journal: true, afterSeq: middle }));
  assert.deepEqual(rest.map((event) => event.seq), journalSeqs.filter((seq) => seq > middle));

  // The host ledger: t1 committed once and never delivered again; t2 came back with the same
  // key, flagged as a redelivery; nothing committed was ever delivered afterwards.
  const keys = host.ledger.deliveries.map((call) => call.idempotency_key);
  assert.deepEqual(keys, [`${runId}:t1:toolu_0_0`, `${runId}:t2:toolu_0_0`, `${runId}:t2:toolu_0_0`, `${runId}:t3:toolu_0_0`]);
  assert.equal(host.ledger.deliveries[2].redelivery, true);
  const committed = new Set();
  for (const call of host.ledger.deliveries) {
    assert.ok(!committed.has(call.idempotency_key), `${call.idempotency_key} delivered after commit`);
    if (host.ledger.acks.get(call.call_id) === "STATUS_COMMITTED") committed.add(call.idempotency_key);
  }
  assert.equal(host.committedKeys().size, 3);
  // t2's result, kept unacknowledged when its sidecar died, answered the redelivery: the
  // handler ran once per call.
  assert.deepEqual([...runs.values()], [1, 1, 1]);

  // The restored run's timeline, drawn from the run's journal: every task in a lane; t2's call,
  // issued by attempt 1 and delivered again to the host in attempt 2, is marked re-ran.
  const { text, html, timeline } = await client.getRunTimeline(runId, { width: 80 });
  assert.equal(timeline.run_id, runId);
  assert.equal(timeline.attempt, 2);
  assert.deepEqual(timeline.lanes.map((lane) => lane.task_id), ["t1", "t2", "t3"]);
  const calls = timeline.lanes.flatMap((lane) =>
    lane.turns.flatMap((turn) => turn.calls.map((call) => [lane.task_id, call.tool_name, call.mark])),
  );
  assert.deepEqual(calls, [
    ["t1", "lookup", "executed"],
    ["t2", "lookup", "re-ran"],
    ["t3", "lookup", "executed"],
  ]);
  for (const id of ["t1", "t2", "t3"]) {
    assert.ok(text.includes(`Task ${id}`), `the text shows Task ${id}`);
    assert.ok(html.includes(`Task ${id}`), `the page shows Task ${id}`);
  }
  assert.ok(text.split("\n").every((line) => line.length <= 80), "the text fits 80 columns");

  // History and fork (D17): the run's points; a fork at its last tool commit, restored to the
  // end, delivers no call to the host again (every call was committed at that point).
  const points = await client.getRunHistory(runId);
  assert.equal(points[0].boundary, "admission");
  const commit = points.filter((point) => point.boundary === "tool_commit").at(-1);
  assert.ok(commit, "the history holds the tool commits");
  const forkId = `${runId}-fork`;
  const fork = await client.forkRun(runId, { atSeq: commit.seq, newRunId: forkId });
  assert.equal(fork.parent_seq, commit.seq);
  assert.equal(fork.run.status, "RUN_STATUS_INTERRUPTED");
  const delivered = host.ledger.deliveries.length;
  await client.restoreRun(forkId);
  const forked = await withTimeout(collect(client.watch(forkId)), 10000, "fork");
  assert.equal(forked.at(-1).run_status.status, "RUN_STATUS_COMPLETED");
  assert.equal(host.ledger.deliveries.length, delivered, "no call delivered again");

  await assert.rejects(client.getRunTimeline("no-such-run"), (error) => {
    assert.equal(error.code, grpc.status.NOT_FOUND);
    assert.equal(errorReason(error), "RUN_NOT_FOUND");
    return true;
  });
});

test("node decides a suspended approval (when the sidecar supports approval gates)", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "oma-node-apr-"));
  const port = await freePort();
  const sidecar = await startSidecar(port, path.join(dir, "state.json"));
  const client = new SidecarClient(`127.0.0.1:${port}`, TOKEN);
  t.after(() => {
    client.close();
    sidecar.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });
  const info = await client.serverInfo();
  if (!info.capabilities.includes("approval_gates")) {
    // Like every other service skip: skipped locally, a failure under CI=true.
    if (process.env.CI === "true") assert.fail("the sidecar does not report the approval_gates capability");
    t.skip("the sidecar does not report the approval_gates capability yet");
    return;
  }
  const host = client.serveTools("node-approver", [
    { name: "lookup", inputSchema: LOOKUP_SCHEMA, handler: async (input) => `approved lookup of ${input.query}` },
  ]);
  t.after(() => host.stop());
  await withTimeout(host.registered(), 10000, "register");
  const runId = `node-apr-${randomUUID().slice(0, 8)}`;
  await client.startRun({
    run_id: runId,
    team: { name: "node-team", agents: [scriptedAgent("lookup")] },
    tasks: { tasks: chain(["t1"]) },
    approval_gates: { tool_calls: ["lookup"] },
  });
  const events = await withTimeout(collect(client.watch(runId)), 20000, "suspend");
  assert.equal(events.at(-1).run_status.status, "RUN_STATUS_SUSPENDED");
  const { approvals } = await client.listApprovals(runId);
  assert.equal(approvals.length, 1);
  const [approval] = approvals;
  const digest = createHash("sha256").update(approval.canonical_json, "utf8").digest("hex");
  assert.equal(digest, approval.request_hash, "the hash binds exactly the JSON the reviewer sees");
  await assert.rejects(
    client.decideApproval({ ...approval, request_hash: "0".repeat(64) }, { approve: true, reviewer: "ann" }),
    (error) => errorReason(error) === "APPROVAL_STALE_DECISION",
  );
  const decided = await client.decideApproval(approval, { approve: true, reviewer: "ann" });
  assert.equal(decided.approval.state, "APPROVAL_STATE_APPROVED");
  const last = Math.max(...events.map((event) => event.seq));
  const resumed = await withTimeout(collect(client.watch(runId, { afterSeq: last })), 20000, "resume");
  assert.equal(resumed.at(-1).run_status.status, "RUN_STATUS_COMPLETED");
});
