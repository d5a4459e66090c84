// The ToolHost's stream contract against a fake sidecar (a grpc-js server in this process):
// a redelivery joins the execution still running for its idempotency key, a result whose
// session ended goes with CompleteToolCall, a kept result answers a later redelivery,
// CancelToolCall aborts the handler's signal, ping needs no reply, drain, the tool definition's
// consequential flag and timeout, and listRuns / listApprovals paging. Then the network blip
// against the real sidecar: the host's TCP connection is reset mid-handler and the handler still
// runs once.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import grpc from "@grpc/grpc-js";
import { SidecarClient, loadOma } from "../src/client.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, "..", "..", "..");
const PYTHON = process.env.OMA_PYTHON ?? path.join(ROOT, ".venv", "bin", "python");
const TOKEN = `node-host-${randomUUID()}`;
const KEY = "r1:t1:toolu_1";

/** A FIFO whose get() waits for the next item. */
class Queue {
  #items = [];
  #takers = [];
  put(item) {
    const take = this.#takers.shift();
    if (take) take(item);
    else this.#items.push(item);
  }
  get(ms = 5000, what = "an item") {
    if (this.#items.length) return Promise.resolve(this.#items.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
      this.#takers.push((item) => {
        clearTimeout(timer);
        resolve(item);
      });
    });
  }
  get size() {
    return this.#items.length;
  }
}

/** ToolHostService, RunService and ApprovalService as the tests script them. */
async function fakeSidecar({ complete = () => ({ status: "STATUS_COMMITTED" }), pages = {} } = {}) {
  const oma = loadOma();
  const server = new grpc.Server();
  const sessions = new Queue();
  const completions = new Queue();
  const listed = [];
  server.addService(oma.ToolHostService.service, {
    Connect(stream) {
      const session = { stream, received: new Queue() };
      stream.on("data", (message) => {
        if (message.msg === "register") {
          session.register = message.register;
          stream.write({ register_ack: { session_id: randomUUID() } });
          sessions.put(session);
        } else {
          session.received.put(message);
        }
      });
      stream.on("error", () => {});
    },
    CompleteToolCall(call, callback) {
      completions.put(call.request.result);
      const answer = complete(call.request.result);
      if (answer instanceof Error) callback(answer);
      else callback(null, { ack: { call_id: call.request.result.call_id, ...answer } });
    },
  });
  const page = (field) => (call, callback) => {
    listed.push(call.request);
    const items = pages[field] ?? [];
    const size = call.request.page_size || 50;
    const offset = Number(call.request.page_token || 0);
    const next = offset + size < items.length ? String(offset + size) : "";
    callback(null, { [field]: items.slice(offset, offset + size), next_page_token: next });
  };
  server.addService(oma.RunService.service, { ListRuns: page("runs") });
  server.addService(oma.ApprovalService.service, { ListApprovals: page("approvals") });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  const client = new SidecarClient(`127.0.0.1:${port}`, TOKEN);
  return {
    client,
    sessions,
    completions,
    listed,
    close() {
      client.close();
      server.forceShutdown();
    },
  };
}

function toolCall(callId, { redelivery = false, attempt = 1 } = {}) {
  return {
    call_id: callId,
    run_id: "r1",
    task_id: "t1",
    tool_call_id: "toolu_1",
    idempotency_key: KEY,
    tool_name: "charge",
    input_json: '{"amount": 10}',
    delivery_attempt: attempt,
    redelivery,
  };
}

/** A tool whose handler waits for release(); `runs` counts its executions. */
function gatedTool(extra = {}) {
  let release;
  const started = new Queue();
  const gate = new Promise((resolve) => (release = resolve));
  const tool = {
    name: "charge",
    inputSchema: { type: "object" },
    runs: 0,
    async handler(input, call, { signal }) {
      tool.runs += 1;
      started.put({ call, signal });
      await Promise.race([
        gate,
        new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
      ]);
      return `charged ${input.amount}`;
    },
    ...extra,
  };
  return { tool, started, release: () => release() };
}

function blip(session) {
  session.stream.emit("error", { code: grpc.status.UNAVAILABLE, details: "network blip" });
}

test("a redelivery while the handler runs joins it: one execution, answered on the new session", async (t) => {
  const fake = await fakeSidecar();
  const { tool, started, release } = gatedTool();
  const host = fake.client.serveTools("h", [tool], { reconnectDelayMs: 10 });
  t.after(() => {
    host.stop();
    fake.close();
  });
  const first = await fake.sessions.get(5000, "session 1");
  first.stream.write({ call: toolCall("c1") });
  await started.get(5000, "the handler");
  blip(first);
  const second = await fake.sessions.get(5000, "session 2");
  second.stream.write({ call: toolCall("c2", { redelivery: true, attempt: 2 }) });
  await host.registered();
  await new Promise((resolve) => setTimeout(resolve, 100)); // the redelivery is taken
  assert.equal(tool.runs, 1, "the handler is not started again for the same key");
  release();
  const { result } = await second.received.get(5000, "the result");
  assert.equal(result.call_id, "c2");
  assert.equal(result.success.output_text, "charged 10");
  assert.equal(fake.completions.size, 0, "nothing sent with CompleteToolCall");
  assert.equal(tool.runs, 1);
  assert.equal(started.size, 0);
  assert.deepEqual(
    host.ledger.deliveries.map((call) => [call.call_id, call.redelivery]),
    [["c1", false], ["c2", true]],
  );
});

test("a result whose session ended goes with CompleteToolCall; a DUPLICATE answer is recorded", async (t) => {
  const fake = await fakeSidecar({ complete: () => ({ status: "STATUS_DUPLICATE" }) });
  const { tool, started, release } = gatedTool();
  const host = fake.client.serveTools("h", [tool], { reconnectDelayMs: 10 });
  t.after(() => {
    host.stop();
    fake.close();
  });
  const first = await fake.sessions.get(5000, "session 1");
  first.stream.write({ call: toolCall("c1") });
  await started.get(5000, "the handler");
  blip(first);
  const second = await fake.sessions.get(5000, "session 2");
  release();
  const late = await fake.completions.get(5000, "CompleteToolCall");
  assert.deepEqual(
    { call_id: late.call_id, tool_call_id: late.tool_call_id, output: late.success.output_text },
    { call_id: "c1", tool_call_id: "toolu_1", output: "charged 10" },
  );
  await waitFor(() => host.ledger.acks.get("c1") === "STATUS_DUPLICATE", "the ack");
  assert.equal(second.received.size, 0, "nothing on the new session");
  // DUPLICATE: the sidecar holds a result; the host keeps serving.
  second.stream.write({ call: { ...toolCall("c9"), idempotency_key: "r1:t1:toolu_9", tool_call_id: "toolu_9" } });
  await started.get(5000, "another call");
  assert.equal(tool.runs, 2);
});

test("a result the sidecar did not take answers a later redelivery without running again", async (t) => {
  let failing = true;
  const fake = await fakeSidecar({
    complete: () =>
      failing
        ? Object.assign(new Error("down"), { code: grpc.status.UNAVAILABLE })
        : { status: "STATUS_UNKNOWN_CALL" },
  });
  const { tool, started, release } = gatedTool();
  const host = fake.client.serveTools("h", [tool], { reconnectDelayMs: 10 });
  t.after(() => {
    host.stop();
    fake.close();
  });
  const first = await fake.sessions.get(5000, "session 1");
  first.stream.write({ call: toolCall("c1") });
  await started.get(5000, "the handler");
  blip(first);
  const second = await fake.sessions.get(5000, "session 2");
  release();
  await fake.completions.get(5000, "CompleteToolCall (UNAVAILABLE)"); // an error: no crash
  failing = false;
  blip(second);
  const third = await fake.sessions.get(5000, "session 3");
  third.stream.write({ call: toolCall("c2", { redelivery: true, attempt: 2 }) });
  const { result } = await third.received.get(5000, "the kept result");
  assert.equal(result.call_id, "c2");
  assert.equal(result.success.output_text, "charged 10");
  assert.equal(tool.runs, 1);
  third.stream.write({ result_ack: { call_id: "c2", status: "STATUS_COMMITTED" } });
  await waitFor(() => host.committedKeys().has(KEY), "committed");
});

test("CancelToolCall aborts the handler's signal and no result is sent; ping needs no reply", async (t) => {
  const fake = await fakeSidecar();
  const { tool, started } = gatedTool();
  const host = fake.client.serveTools("h", [tool], { reconnectDelayMs: 10 });
  t.after(() => {
    host.stop();
    fake.close();
  });
  const session = await fake.sessions.get(5000, "session");
  session.stream.write({ ping: {} });
  session.stream.write({ call: toolCall("c1") });
  const { signal } = await started.get(5000, "the handler");
  assert.equal(signal.aborted, false);
  session.stream.write({ cancel: { call_id: "c1", reason: "deadline passed" } });
  await waitFor(() => signal.aborted, "the abort");
  assert.equal(signal.reason.name, "AbortError");
  assert.match(signal.reason.message, /deadline passed/);
  assert.equal(host.ledger.cancels.get("c1"), "deadline passed");
  await host.idle();
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(session.received.size, 0, "no result, and no answer to the ping");
  assert.equal(fake.completions.size, 0);
  // The call is gone: a new delivery of the key runs the handler again.
  session.stream.write({ call: toolCall("c2", { redelivery: true, attempt: 2 }) });
  await started.get(5000, "the second execution");
  assert.equal(tool.runs, 2);
});

test("the tool definition carries consequential and timeout; drain() asks for no new calls", async (t) => {
  const fake = await fakeSidecar();
  const { tool, started, release } = gatedTool({ consequential: true, timeoutMs: 90500 });
  const host = fake.client.serveTools("h", [tool, { name: "plain", handler: () => "ok" }], { reconnectDelayMs: 10 });
  t.after(() => {
    host.stop();
    fake.close();
  });
  const session = await fake.sessions.get(5000, "session");
  const [charge, plain] = session.register.tools;
  assert.equal(charge.consequential, true);
  assert.deepEqual({ seconds: Number(charge.timeout.seconds), nanos: charge.timeout.nanos }, { seconds: 90, nanos: 5e8 });
  assert.equal(plain.consequential, false);
  assert.equal(plain.timeout, null);
  assert.throws(() => fake.client.serveTools("bad", [{ name: "x", handler: () => "", timeoutMs: -1 }]), RangeError);

  session.stream.write({ call: toolCall("c1") });
  await started.get(5000, "the handler");
  let drained = false;
  const draining = host.drain().then(() => (drained = true));
  assert.equal((await session.received.get(5000, "drain")).msg, "drain");
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(drained, false, "drain() waits for the running handler");
  release();
  await draining;
  assert.equal((await session.received.get(5000, "the result")).result.call_id, "c1");
  // After a reconnect the new session is told to drain too.
  blip(session);
  const again = await fake.sessions.get(5000, "session 2");
  assert.equal((await again.received.get(5000, "drain again")).msg, "drain");
});

test("listRuns and listApprovals read every page, or one page with pageSize / pageToken", async (t) => {
  const runs = Array.from({ length: 1203 }, (_, index) => ({ run_id: `r${index}` }));
  const approvals = Array.from({ length: 120 }, (_, index) => ({ id: `a${index}` }));
  const fake = await fakeSidecar({ pages: { runs, approvals } });
  t.after(() => fake.close());
  const all = await fake.client.listRuns(["RUN_STATUS_SUSPENDED"]);
  assert.equal(all.runs.length, 1203);
  assert.equal(all.runs.at(-1).run_id, "r1202");
  assert.equal(all.next_page_token, "");
  assert.deepEqual(
    fake.listed.map((request) => [request.page_size, request.page_token, request.statuses]),
    [0, 500, 1000].map((offset) => [500, offset ? String(offset) : "", ["RUN_STATUS_SUSPENDED"]]),
  );
  const one = await fake.client.listRuns([], { pageSize: 2 });
  assert.deepEqual(one.runs.map((run) => run.run_id), ["r0", "r1"]);
  const next = await fake.client.listRuns([], { pageToken: one.next_page_token, pageSize: 2 });
  assert.deepEqual(next.runs.map((run) => run.run_id), ["r2", "r3"]);

  const pending = await fake.client.listApprovals("run-1");
  assert.equal(pending.approvals.length, 120);
  assert.equal(fake.listed.at(-1).run_id, "run-1");
  const first = await fake.client.listApprovals("", [], {});
  assert.equal(first.approvals.length, 120, "an empty options object reads every page");
  const page = await fake.client.listApprovals("", ["APPROVAL_STATE_PENDING"], { pageToken: "" });
  assert.equal(page.approvals.length, 50, "the server's default page");
  assert.equal(page.next_page_token, "50");
  const rest = await fake.client.listApprovals("", [], { pageToken: page.next_page_token, pageSize: 500 });
  assert.equal(rest.approvals.at(-1).id, "a119");
  assert.equal(rest.next_page_token, "");
});

async function waitFor(predicate, what, ms = 5000) {
  const end = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function startSidecar(port, store) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      PYTHON,
      ["-m", "sidecar", "--listen", `127.0.0.1:${port}`, "--store", `file://${store}`, "--heartbeat", "0.5"],
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

test("a network blip mid-handler: the real sidecar redelivers, the handler still runs once", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "oma-node-blip-"));
  const port = await freePort();
  const sidecar = await startSidecar(port, path.join(dir, "state.json"));
  // The host reaches the sidecar through a TCP proxy whose connections the test resets.
  const sockets = new Set();
  const proxy = net.createServer((inbound) => {
    const outbound = net.connect(port, "127.0.0.1");
    inbound.pipe(outbound);
    outbound.pipe(inbound);
    sockets.add(inbound);
    const done = () => {
      inbound.destroy();
      outbound.destroy();
      sockets.delete(inbound);
    };
    for (const socket of [inbound, outbound]) {
      socket.on("error", done);
      socket.on("close", done);
    }
  });
  const proxyPort = await freePort();
  await new Promise((resolve) => proxy.listen(proxyPort, "127.0.0.1", resolve));
  const client = new SidecarClient(`127.0.0.1:${port}`, TOKEN);
  const hostClient = new SidecarClient(`127.0.0.1:${proxyPort}`, TOKEN);
  let active = 0;
  let most = 0;
  const executions = [];
  const host = hostClient.serveTools("blip-host", [
    {
      name: "charge",
      inputSchema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
      handler: async (input, call) => {
        active += 1;
        most = Math.max(most, active);
        executions.push(call.idempotency_key);
        await new Promise((resolve) => setTimeout(resolve, 1500));
        active -= 1;
        return `charged ${input.query}`;
      },
    },
  ]);
  t.after(() => {
    host.stop();
    client.close();
    hostClient.close();
    proxy.close();
    sidecar.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });
  await host.registered();
  await client.startRun({
    run_id: "blip",
    team: {
      name: "t",
      agents: [{ name: "w", provider: "scripted", tools: ["charge"], scripted: { turns: [
        { tool_calls: [{ name: "charge", input_json: '{"query":"$10"}' }] },
        { text: "done: {{last_tool_result}}" },
      ] } }],
    },
    tasks: { tasks: [{ id: "t1", title: "T1", description: "d" }] },
  });
  await waitFor(() => executions.length === 1, "the first execution", 10000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  for (const socket of sockets) socket.destroy(); // the blip
  let run;
  for (let i = 0; i < 200 && run?.status !== "RUN_STATUS_COMPLETED"; i += 1) {
    run = await client.getRun("blip", { full: true });
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal(run.status, "RUN_STATUS_COMPLETED");
  assert.equal(run.tasks[0].result, "done: charged $10");
  const deliveries = host.ledger.deliveries.map((call) => [call.idempotency_key, call.redelivery]);
  assert.deepEqual(deliveries, [["blip:t1:toolu_0_0", false], ["blip:t1:toolu_0_0", true]]);
  assert.deepEqual(executions, ["blip:t1:toolu_0_0"], "one execution for the key");
  assert.equal(most, 1);
  assert.equal(host.sessions, 2);
  assert.ok(host.committedKeys().has("blip:t1:toolu_0_0"));
});
