// Command omaexample starts a run whose agent calls a tool implemented in Go, prints the run's
// events and its result. Against a running `oma serve`:
//
//	omaexample -address 127.0.0.1:50051 -token-file ~/.oma/sidecar.token
package main

import (
	"context"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"path/filepath"
	"strings"
	"time"

	omav1 "oma.local/gen/omav1"
	"oma.local/omaclient"
)

func main() {
	home, _ := os.UserHomeDir()
	address := flag.String("address", "127.0.0.1:50051", "sidecar host:port")
	tokenFile := flag.String("token-file", filepath.Join(home, ".oma", "sidecar.token"), "bearer token file")
	flag.Parse()
	token := os.Getenv("OMA_SIDECAR_TOKEN")
	if token == "" {
		raw, err := ioutil.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "token:", err)
			os.Exit(2)
		}
		token = strings.TrimSpace(string(raw))
	}
	if err := run(*address, token); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err, omaclient.ErrorReason(err))
		os.Exit(1)
	}
}

func run(address, token string) error {
	client, err := omaclient.Dial(address, token)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	info, err := client.System.GetServerInfo(client.Ctx(ctx), &omav1.GetServerInfoRequest{})
	if err != nil {
		return err
	}
	fmt.Println("sidecar", info.ServerVersion, info.Capabilities)

	host := client.ServeTools(ctx, "go-example", []omaclient.Tool{{
		Name:        "lookup",
		Description: "Look a query up (implemented in Go).",
		InputSchema: map[string]interface{}{
			"type":       "object",
			"properties": map[string]interface{}{"query": map[string]interface{}{"type": "string"}},
			"required":   []string{"query"},
		},
		Handler: func(ctx context.Context, input map[string]interface{}, call *omav1.ToolCall) (string, error) {
			return fmt.Sprintf("go says %v", input["query"]), nil
		},
	}})
	select {
	case <-host.Registered:
	case <-ctx.Done():
		return ctx.Err()
	}

	runID := fmt.Sprintf("go-example-%d", time.Now().UnixNano())
	started, err := client.Runs.StartRun(client.Ctx(ctx), ExampleRequest(runID))
	if err != nil {
		return err
	}
	fmt.Println("started", started.Run.RunId)
	err = client.Watch(ctx, runID, 0, func(event *omav1.RunEvent) {
		fmt.Printf("  #%d %s %s\n", event.Seq, event.Type, event.TaskId)
	})
	if err != nil {
		return err
	}
	done, err := client.Runs.GetRun(client.Ctx(ctx), &omav1.GetRunRequest{RunId: runID, View: omav1.RunView_RUN_VIEW_FULL})
	if err != nil {
		return err
	}
	for _, task := range done.Tasks {
		fmt.Printf("%s: %s\n", task.Title, task.Result)
	}
	if done.Status != omav1.RunStatus_RUN_STATUS_COMPLETED {
		return fmt.Errorf("run ended %s", done.Status)
	}
	return nil
}

// ExampleRequest is two dependent tasks on the scripted model whose agent calls "lookup".
func ExampleRequest(runID string) *omav1.StartRunRequest {
	return &omav1.StartRunRequest{
		RunId:     runID,
		RequestId: runID + "-request",
		Team: &omav1.TeamSpec{Name: "go-team", Agents: []*omav1.AgentSpec{{
			Name: "worker", Provider: "scripted", Tools: []string{"lookup"},
			Scripted: &omav1.ScriptedModel{Turns: []*omav1.ScriptedTurn{
				{ToolCalls: []*omav1.ScriptedToolCall{{Name: "lookup", InputJson: `{"query": "weather"}`}}},
				{Text: "done: {{last_tool_result}}"},
			}},
		}}},
		Mode: &omav1.StartRunRequest_Tasks{Tasks: &omav1.TasksMode{Tasks: []*omav1.TaskSpec{
			{Id: "t1", Title: "Research", Description: "Find the facts."},
			{Id: "t2", Title: "Write", Description: "Summarize.", DependsOn: []string{"t1"}},
		}}},
	}
}
