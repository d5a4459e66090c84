// Node client of the oma-actors sidecar (package oma.v1), on @grpc/grpc-js + @grpc/proto-loader.
//
//   const client = new SidecarClient("127.0.0.1:50051", token);
//   const host = client.serveTools("node-host", [{ name, description, inputSchema, handler }]);
//   const { run } = await client.startRun({ run_id, request_id, team, tasks });
//   for await (const event of client.watch(run.run_id)) console.log(event.seq, event.type);
//
// Messages use the proto field names (snake_case); enums are strings ("RUN_STATUS_COMPLETED");
// int64 values are Numbers. Events from watch() carry `data` as a plain object (the Struct
// unwrapped). errorInfo(error) reads the google.rpc.ErrorInfo of a failed call (reason, domain,
// metadata such as the offending `field`) with the error-detail protos shipped in ../proto.

import { fileURLToPath } from "node:url";
import path from "node:path";
import { randomUUID } from "node:crypto";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";

const here = path.dirname(fileURLToPath(import.meta.url));
export const PROTO_ROOT = path.resolve(here, "..", "..", "..", "proto");
/** google/rpc/status.proto and error_details.proto, shipped with this client. */
export const DETAILS_PROTO_ROOT = path.resolve(here, "..", "proto");
const DETAILS_TRAILER = "grpc-status-details-bin";
const MAX_PAGE = 500; // the largest page_size of ListRuns and ListApprovals

let cached;

/** The loaded oma.v1 package (services and message types). */
export function loadOma(protoRoot = PROTO_ROOT) {
  if (cached) return cached;
  const definition = protoLoader.loadSync("oma/v1/sidecar.proto", {
    includeDirs: [protoRoot],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  cached = grpc.loadPackageDefinition(definition).oma.v1;
  return cached;
}

/** The `oma-error-reason` trailer of a failed call (e.g. "RUN_NOT_FOUND"), if any. */
export function errorReason(error) {
  const values = error?.metadata?.get?.("oma-error-reason") ?? [];
  return values.length ? String(values[0]) : undefined;
}

let detailTypes;

function errorDetailTypes() {
  if (!detailTypes) {
    const root = new protobuf.Root();
    // google/protobuf/*.proto are bundled with protobufjs; google/rpc/*.proto are ours.
    root.resolvePath = (origin, target) =>
      target.startsWith("google/protobuf/") ? target : path.join(DETAILS_PROTO_ROOT, target);
    root.loadSync(["google/rpc/status.proto", "google/rpc/error_details.proto"], { keepCase: true });
    detailTypes = {
      Status: root.lookupType("google.rpc.Status"),
      ErrorInfo: root.lookupType("google.rpc.ErrorInfo"),
    };
  }
  return detailTypes;
}

/**
 * The google.rpc.ErrorInfo of a failed call, from its `grpc-status-details-bin` trailer:
 * { reason, domain, metadata } (metadata.field names the offending request field of an
 * INVALID_ARGUMENT), or undefined when the call carried none.
 */
export function errorInfo(error) {
  const values = error?.metadata?.get?.(DETAILS_TRAILER) ?? [];
  if (!values.length) return undefined;
  const { Status, ErrorInfo } = errorDetailTypes();
  const status = Status.decode(Buffer.from(values[0]));
  for (const detail of status.details ?? []) {
    if (String(detail.type_url).endsWith("/google.rpc.ErrorInfo")) {
      const info = ErrorInfo.toObject(ErrorInfo.decode(detail.value), { defaults: true });
      return { reason: info.reason, domain: info.domain, metadata: { ...info.metadata } };
    }
  }
  return undefined;
}

/** A google.protobuf.Struct as proto-loader decodes it, as a plain object. */
export function fromStruct(struct) {
  const object = {};
  for (const [key, value] of Object.entries(struct?.fields ?? {})) object[key] = fromValue(value);
  return object;
}

function fromValue(value) {
  // proto-loader spells the well-known types' fields in camelCase even with keepCase.
  const kind = value?.kind;
  switch (kind) {
    case "stringValue":
    case "string_value":
    case "numberValue":
    case "number_value":
    case "boolValue":
    case "bool_value":
      return value[kind];
    case "structValue":
    case "struct_value":
      return fromStruct(value[kind]);
    case "listValue":
    case "list_value":
      return (value[kind]?.values ?? []).map(fromValue);
    default:
      return null; // nullValue, or a kind this client does not know
  }
}

export class SidecarClient {
  /**
   * @param {string} address host:port of the sidecar
   * @param {string} token the bearer token (OMA_SIDECAR_TOKEN or the token file)
   */
  constructor(address, token, { credentials = grpc.credentials.createInsecure() } = {}) {
    const oma = loadOma();
    const options = {
      "grpc.initial_reconnect_backoff_ms": 100,
      "grpc.min_reconnect_backoff_ms": 100,
      "grpc.max_reconnect_backoff_ms": 1000,
    };
    this.address = address;
    this.metadata = new grpc.Metadata();
    this.metadata.set("authorization", `Bearer ${token}`);
    this.runs = new oma.RunService(address, credentials, options);
    this.approvals = new oma.ApprovalService(address, credentials, options);
    this.tools = new oma.ToolHostService(address, credentials, options);
    this.system = new oma.SystemService(address, credentials, options);
  }

  close() {
    for (const stub of [this.runs, this.approvals, this.tools, this.system]) stub.close();
  }

  /** Wait until the channel is connected (e.g. after a sidecar restart). */
  ready(withinMs = 10000) {
    return new Promise((resolve, reject) =>
      this.runs.waitForReady(Date.now() + withinMs, (error) => (error ? reject(error) : resolve())),
    );
  }

  #unary(stub, method, request) {
    return new Promise((resolve, reject) => {
      stub[method](request, this.metadata, (error, response) =>
        error ? reject(error) : resolve(response),
      );
    });
  }

  serverInfo() {
    return this.#unary(this.system, "GetServerInfo", {});
  }

  startRun(request) {
    return this.#unary(this.runs, "StartRun", { request_id: randomUUID(), ...request });
  }

  getRun(runId, { full = false } = {}) {
    const view = full ? "RUN_VIEW_FULL" : "RUN_VIEW_BASIC";
    return this.#unary(this.runs, "GetRun", { run_id: runId, view });
  }

  /**
   * Runs, newest first (RUN_VIEW_BASIC), optionally only in `statuses`: `{ runs,
   * next_page_token }`. By default every page is read (next_page_token is then ""); with
   * `pageToken` or `pageSize` (1..500) one page is returned, and its next_page_token asks for
   * the next one.
   */
  listRuns(statuses = [], { pageSize, pageToken } = {}) {
    return this.#list(this.runs, "ListRuns", { statuses }, "runs", { pageSize, pageToken });
  }

  /** One page (pageSize or pageToken given) or every page of a List call, concatenated. */
  async #list(stub, method, request, field, { pageSize, pageToken }) {
    if (pageSize !== undefined || pageToken !== undefined) {
      return this.#unary(stub, method, { ...request, page_size: pageSize ?? 0, page_token: pageToken ?? "" });
    }
    const items = [];
    let token = "";
    do {
      const page = await this.#unary(stub, method, { ...request, page_size: MAX_PAGE, page_token: token });
      items.push(...page[field]);
      token = page.next_page_token;
    } while (token);
    return { [field]: items, next_page_token: "" };
  }

  restoreRun(runId) {
    return this.#unary(this.runs, "RestoreRun", { run_id: runId });
  }

  cancelRun(runId, reason = "") {
    return this.#unary(this.runs, "CancelRun", { run_id: runId, reason });
  }

  /** Deletes a run no sidecar executes (records, events, checkpoint); `{deleted_keys}`. */
  deleteRun(runId) {
    return this.#unary(this.runs, "DeleteRun", { run_id: runId });
  }

  /**
   * The run's timeline from its latest checkpoint: `{ text, html, timeline_json, timeline }`,
   * `text` wrapped at `width` columns (60..400), `html` a self-contained page, `timeline` the
   * parsed JSON ({ run_id, attempt, status, lanes: [{ task_id, title, turns: [{ calls: [{
   * call_id, tool_name, mark }] }] }], approvals }) for rendering it yourself.
   * FAILED_PRECONDITION/NO_CHECKPOINT until the run saved a checkpoint.
   */
  async getRunTimeline(runId, { width = 80 } = {}) {
    const response = await this.#unary(this.runs, "GetRunTimeline", { run_id: runId, width });
    return { ...response, timeline: JSON.parse(response.timeline_json) };
  }

  /**
   * Every restorable point of a journal-first run, oldest first: `[{ seq, attempt, boundary,
   * task_id, at, label }]` (decision D17). FAILED_PRECONDITION/NO_HISTORY for a run that keeps
   * no history.
   */
  async getRunHistory(runId) {
    const response = await this.#unary(this.runs, "GetRunHistory", { run_id: runId });
    return response.points;
  }

  /**
   * Start run `newRunId` at the history point `atSeq` of `runId`, without re-running effects;
   * the child is registered INTERRUPTED: continue it with restoreRun(newRunId). Returns
   * `{ run_id, parent_run_id, parent_seq, run }`.
   */
  forkRun(runId, { atSeq, newRunId }) {
    return this.#unary(this.runs, "ForkRun", {
      run_id: runId,
      at_seq: atSeq,
      new_run_id: newRunId,
    });
  }

  /**
   * Approvals of one run (or of every run with runId ""), in `states` (empty: pending only):
   * `{ approvals, next_page_token }`. Every page by default; with `pageToken` or `pageSize`
   * (1..500) one page, as listRuns.
   */
  listApprovals(runId = "", states = [], { pageSize, pageToken } = {}) {
    const request = { run_id: runId, states };
    return this.#list(this.approvals, "ListApprovals", request, "approvals", { pageSize, pageToken });
  }

  getApproval(id) {
    return this.#unary(this.approvals, "GetApproval", { id });
  }

  /** Decide on the hash of the content that was shown (approval.request_hash). */
  /**
   * Approve or reject `approval`; `editedInput` (an object) approves a tool call with that
   * input instead of the model's (checked by the tool's schema when the call runs).
   */
  decideApproval(approval, { approve, reviewer, editedInput = undefined }) {
    return this.#unary(this.approvals, "DecideApproval", {
      id: approval.id,
      request_hash: approval.request_hash,
      decision: approve ? "DECISION_APPROVE" : "DECISION_REJECT",
      reviewer: { id: reviewer },
      edited_input_json: editedInput === undefined ? "" : JSON.stringify(editedInput),
    });
  }

  /**
   * The run's events after `afterSeq` until it ends (heartbeats skipped), with `data` as a
   * plain object. By default the run's journal, its one durable log: seq is the journal seq,
   * type OMA's ("task/status", "tool/result", "run/end"), and the sidecar's live notices
   * (run_status, tool_call_*) come between with seq 0. A run that keeps no journal (a memory
   * store) streams its progress events; `progress: true` asks for those in any case,
   * `journal: true` for the journal or JOURNAL_UNAVAILABLE. With allowGap, events really lost
   * arrive as one `gap` event (its seq is gap.to_seq: resuming after it skips the gap).
   */
  async *watch(runId, { afterSeq = 0, allowGap = true, followSuspended = false, types = [], journal = false, progress = false } = {}) {
    const call = this.runs.WatchRun(
      { run_id: runId, after_seq: afterSeq, allow_gap: allowGap, follow_suspended: followSuspended, types, journal, progress },
      this.metadata,
    );
    try {
      for await (const event of call) {
        if (event.type !== "heartbeat") yield { ...event, data: fromStruct(event.data) };
      }
    } finally {
      call.cancel();
    }
  }

  /**
   * Serve tools over ToolHostService.Connect, reconnecting when the stream drops. Each tool:
   * { name, description, inputSchema, handler(input, call, { signal }) -> string |
   * Promise<string>, consequential?, timeoutMs? }. A handler that throws answers with an error
   * result (shown to the model). `signal` is an AbortSignal, aborted when the sidecar cancels
   * the call (CancelToolCall: the run was cancelled or the call's deadline passed; the result
   * is then not sent) or the host stops. `consequential` marks a tool with side effects (its
   * calls run as OMA "unsafe" tools); `timeoutMs` is its per-call timeout, waiting for a host
   * included (default the sidecar's --host-call-timeout). Deduplicate side effects on
   * call.idempotency_key: a call may be delivered more than once (see ToolHost).
   */
  serveTools(hostId, tools, { maxConcurrent = 16, reconnectDelayMs = 100 } = {}) {
    return new ToolHost(this, hostId, tools, { maxConcurrent, reconnectDelayMs });
  }

  /**
   * Complete a delivered call outside the stream (ToolHostService.CompleteToolCall), e.g. when
   * the stream broke after the work was done. `result` is a ToolResult ({ call_id,
   * tool_call_id, success: { output_text } } or { ..., error: { message } }); resolves with its
   * ResultAck ({ call_id, status }: COMMITTED, DUPLICATE, UNKNOWN_CALL or NOT_DURABLE).
   */
  completeToolCall(result, { withinMs = 30000 } = {}) {
    return new Promise((resolve, reject) => {
      this.tools.CompleteToolCall({ result }, this.metadata, { deadline: Date.now() + withinMs }, (error, response) =>
        error ? reject(error) : resolve(response.ack),
      );
    });
  }
}

/** Acks after which the sidecar holds a result for the call: the kept result can go. */
const SETTLED = new Set(["STATUS_COMMITTED", "STATUS_DUPLICATE", "STATUS_NOT_DURABLE"]);
/** Finished executions kept (oldest dropped first) while their result is not acknowledged. */
export const KEEP_UNACKED = 1024;

function toolDefinition(tool) {
  const definition = {
    name: tool.name,
    description: tool.description ?? "",
    input_schema_json: JSON.stringify(tool.inputSchema ?? { type: "object" }),
    consequential: Boolean(tool.consequential),
  };
  if (tool.timeoutMs !== undefined) {
    if (!(Number.isFinite(tool.timeoutMs) && tool.timeoutMs > 0)) {
      throw new RangeError(`tool ${tool.name}: timeoutMs must be a positive number of milliseconds`);
    }
    const nanos = Math.round(tool.timeoutMs * 1e6);
    const seconds = Math.floor(nanos / 1e9);
    definition.timeout = { seconds, nanos: nanos - seconds * 1e9 };
  }
  return definition;
}

/**
 * A running tool host; `ledger` records deliveries, acks (`acks`: call_id -> status, also of
 * results completed with CompleteToolCall), the call_id each result was sent for (`sent`) and
 * cancellations (`cancels`: call_id -> reason); `stop()` ends it.
 *
 * One execution per idempotency key: a call delivered again (after a reconnect, or by a new
 * sidecar) while its handler still runs in this host waits for that execution and answers with
 * its result; the handler never runs twice at once for a key. A finished result stays until
 * the sidecar acknowledges it (the last KEEP_UNACKED of them), so a redelivery after a lost
 * result is answered without running the handler again. A result goes on the session of the
 * call's latest delivery if that session is still open, else with CompleteToolCall (a late
 * result for an earlier delivery counts if no other result won; a DUPLICATE or UNKNOWN_CALL
 * answer is only recorded).
 */
export class ToolHost {
  constructor(client, hostId, tools, { maxConcurrent, reconnectDelayMs }) {
    this.client = client;
    this.hostId = hostId;
    this.tools = new Map(tools.map((tool) => [tool.name, tool]));
    this.definitions = tools.map(toolDefinition);
    this.maxConcurrent = maxConcurrent;
    this.reconnectDelayMs = reconnectDelayMs;
    this.ledger = { deliveries: [], acks: new Map(), sent: new Map(), cancels: new Map() };
    this.stopped = false;
    this.draining = false;
    this.sessions = 0;
    this.#waiters = [];
    this.#connect();
  }

  #stream;
  #live = null; // the open session's stream
  #waiters;
  #registered = false;
  #executions = new Map(); // idempotency key -> execution
  #keyOf = new Map(); // call_id of a delivery -> idempotency key

  /** Resolves once a session is registered (again, after a reconnect). */
  registered() {
    if (this.#registered) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Idempotency keys whose result the sidecar acknowledged as committed. */
  committedKeys() {
    const keys = new Set();
    for (const [callId, status] of this.ledger.acks) {
      if (status === "STATUS_COMMITTED") keys.add(this.ledger.sent.get(callId));
    }
    return keys;
  }

  /**
   * Ask the sidecar for no new calls (ToolHostMessage.drain, sent again after a reconnect);
   * resolves once no handler runs any more (their results sent). Then stop().
   */
  async drain() {
    this.draining = true;
    this.#live?.write({ drain: {} });
    await this.idle();
  }

  /** Resolves once no handler of this host is running. */
  async idle() {
    for (;;) {
      const running = [...this.#executions.values()].filter((execution) => !execution.done);
      if (!running.length) return;
      await Promise.all(running.map((execution) => execution.finished));
    }
  }

  /** End the host: the session closes and running handlers' signals abort. */
  stop() {
    this.stopped = true;
    for (const execution of this.#executions.values()) {
      if (!execution.done) execution.controller.abort(abortError("the tool host stopped"));
    }
    this.#stream?.cancel();
  }

  #connect() {
    if (this.stopped) return;
    const stream = this.client.tools.Connect(this.client.metadata);
    this.#stream = stream;
    this.#live = stream;
    let ended = false;
    const reconnect = () => {
      if (ended) return;
      ended = true;
      if (this.#live === stream) this.#live = null;
      this.#registered = false;
      if (!this.stopped) setTimeout(() => this.#connect(), this.reconnectDelayMs);
    };
    stream.on("data", (message) => this.#onMessage(stream, message));
    stream.on("error", reconnect);
    stream.on("end", reconnect);
    stream.write({
      register: { host_id: this.hostId, max_concurrent_calls: this.maxConcurrent, tools: this.definitions },
    });
    if (this.draining) stream.write({ drain: {} });
  }

  #onMessage(stream, message) {
    switch (message.msg) {
      case "register_ack":
        this.sessions += 1;
        this.#registered = true;
        for (const resolve of this.#waiters.splice(0)) resolve();
        break;
      case "call":
        this.#take(stream, message.call);
        break;
      case "result_ack":
        this.#acked(message.result_ack);
        break;
      case "cancel":
        this.#cancel(message.cancel);
        break;
      default:
        break; // ping: a keepalive, no reply needed
    }
  }

  #take(stream, call) {
    this.ledger.deliveries.push(call);
    const key = call.idempotency_key || call.call_id;
    this.#keyOf.set(call.call_id, key);
    const running = this.#executions.get(key);
    if (running && !running.cancelled) {
      running.deliveries.push({ stream, call }); // join it: its result answers this delivery
      if (running.done) this.#answer(running);
      return;
    }
    const execution = {
      key,
      deliveries: [{ stream, call }],
      controller: new AbortController(),
      done: false,
      cancelled: false,
      outcome: undefined,
    };
    this.#executions.set(key, execution);
    // A cancelled execution of the key that is still stopping runs out first.
    execution.finished = this.#execute(execution, call, running?.finished);
  }

  async #execute(execution, call, previous) {
    await previous;
    try {
      const tool = this.tools.get(call.tool_name);
      if (!tool) throw new Error(`this host has no tool ${call.tool_name}`);
      const input = JSON.parse(call.input_json || "{}");
      const text = await tool.handler(input, call, { signal: execution.controller.signal });
      execution.outcome = { success: { output_text: String(text) } };
    } catch (error) {
      execution.outcome = { error: { message: `${error?.name ?? "Error"}: ${error?.message ?? error}` } };
    }
    execution.done = true;
    if (execution.cancelled || this.stopped) {
      this.#forget(execution);
      return;
    }
    this.#answer(execution);
    this.#trim();
  }

  /** Send the result for the latest delivery: on its session if open, else CompleteToolCall. */
  #answer(execution) {
    const { stream, call } = execution.deliveries.at(-1);
    const result = { call_id: call.call_id, tool_call_id: call.tool_call_id, ...execution.outcome };
    this.ledger.sent.set(call.call_id, execution.key);
    if (stream === this.#live) {
      stream.write({ result });
      return;
    }
    this.client.completeToolCall(result).then(
      (ack) => this.#acked(ack ?? { call_id: call.call_id, status: "STATUS_UNSPECIFIED" }),
      () => {}, // the sidecar is unreachable: a redelivery of the call gets the kept result
    );
  }

  #acked(ack) {
    this.ledger.acks.set(ack.call_id, ack.status);
    const execution = this.#executionOf(ack.call_id);
    if (execution?.done && SETTLED.has(ack.status)) this.#forget(execution);
  }

  #cancel(cancel) {
    this.ledger.cancels.set(cancel.call_id, cancel.reason);
    const execution = this.#executionOf(cancel.call_id);
    if (!execution) return;
    execution.cancelled = true;
    if (execution.done) this.#forget(execution);
    else execution.controller.abort(abortError(`the sidecar cancelled the call: ${cancel.reason}`));
  }

  #executionOf(callId) {
    const execution = this.#executions.get(this.#keyOf.get(callId));
    return execution?.deliveries.some(({ call }) => call.call_id === callId) ? execution : undefined;
  }

  #forget(execution) {
    if (this.#executions.get(execution.key) === execution) this.#executions.delete(execution.key);
    for (const { call } of execution.deliveries) {
      if (this.#keyOf.get(call.call_id) === execution.key) this.#keyOf.delete(call.call_id);
    }
  }

  #trim() {
    let extra = -KEEP_UNACKED;
    for (const execution of this.#executions.values()) if (execution.done) extra += 1;
    for (const execution of this.#executions.values()) {
      if (extra <= 0) break;
      if (execution.done) {
        this.#forget(execution);
        extra -= 1;
      }
    }
  }
}

function abortError(message) {
  const error = new Error(message);
  error.name = "AbortError";
  return error;
}
