// A run whose agent calls a tool implemented in Node, against a running `oma serve`:
//   cd clients/node && npm ci && node example.js [host:port]
// The token comes from OMA_SIDECAR_TOKEN or ~/.oma/sidecar.token (the file `oma serve` prints).
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { SidecarClient } from "./src/client.js";

const address = process.argv[2] ?? "127.0.0.1:50051";
const token =
  process.env.OMA_SIDECAR_TOKEN ?? readFileSync(path.join(os.homedir(), ".oma", "sidecar.token"), "utf8").trim();
const client = new SidecarClient(address, token);

// The tool lives in this process; the sidecar delivers each call with an idempotency key
// (run_id:task_id:tool_call_id) that stays the same if the call is delivered again.
const host = client.serveTools("node-example", [
  {
    name: "lookup",
    description: "Look a query up.",
    inputSchema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
    handler: async ({ query }, call) => `3 documents about ${query} (key ${call.idempotency_key})`,
  },
]);
await host.registered();

const { run } = await client.startRun({
  run_id: `node-example-${Date.now()}`,
  team: {
    name: "example",
    agents: [
      {
        name: "researcher",
        provider: "scripted", // offline; use "anthropic" or "openai" with a model for real
        tools: ["lookup"],
        scripted: {
          turns: [
            { tool_calls: [{ name: "lookup", input_json: '{"query": "sidecars"}' }] },
            { text: "Found: {{last_tool_result}}" },
          ],
        },
      },
    ],
  },
  tasks: {
    tasks: [
      { id: "research", title: "Research", description: "Find the facts." },
      { id: "write", title: "Write", description: "Summarize.", depends_on: ["research"] },
    ],
  },
});
console.log("started", run.run_id);
for await (const event of client.watch(run.run_id)) {
  console.log(`  #${event.seq} ${event.type} ${event.task_id}`);
}
const done = await client.getRun(run.run_id, { full: true });
for (const task of done.tasks) console.log(`${task.title}: ${task.result}`);
// What happened, drawn by the sidecar from the run's checkpoint (timeline.timeline holds the
// same as JSON, to draw it yourself; timeline.html is a page to save).
const timeline = await client.getRunTimeline(run.run_id, { width: 80 });
console.log(timeline.text);
host.stop();
client.close();
