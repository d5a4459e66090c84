package omaclient

// End to end from Go: a tool implemented in Go, a sidecar killed with SIGKILL mid-call, a new
// sidecar on the same store adopting the run, completion, and no committed call delivered twice.
// Runs the Python sidecar as a child: OMA_PYTHON (default <repo>/.venv/bin/python), OMA_ROOT
// (the repository; set by ../build.sh).

import (
	"bufio"
	"context"
	"fmt"
	"io/ioutil"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	omav1 "oma.local/gen/omav1"
)

const token = "go-e2e-token-0123456789abcdef"

func freePort(t *testing.T) int {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}

func startSidecar(t *testing.T, port int, store string) *exec.Cmd {
	root := os.Getenv("OMA_ROOT")
	python := os.Getenv("OMA_PYTHON")
	if python == "" {
		python = filepath.Join(root, ".venv", "bin", "python")
	}
	cmd := exec.Command(python, "-m", "sidecar", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--store", "file://"+store, "--heartbeat", "0.5", "--lease-ttl", "2")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OMA_SIDECAR_TOKEN="+token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "oma-sidecar listening on ") {
			go func() {
				for lines.Scan() {
				}
			}()
			return cmd
		}
	}
	t.Fatal("the sidecar exited before listening")
	return nil
}

func TestKill9RestoreFromGo(t *testing.T) {
	dir, err := ioutil.TempDir("", "oma-go-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store := filepath.Join(dir, "state.json")
	port := freePort(t)
	sidecar := startSidecar(t, port, store)
	defer func() { _ = sidecar.Process.Kill(); _, _ = sidecar.Process.Wait() }()

	client, err := Dial(fmt.Sprintf("127.0.0.1:%d", port), token)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Without the token: UNAUTHENTICATED, with the reason in google.rpc.ErrorInfo.
	_, err = client.System.GetServerInfo(ctx, &omav1.GetServerInfoRequest{})
	if status.Code(err) != codes.Unauthenticated || ErrorReason(err) != "UNAUTHENTICATED" {
		t.Fatalf("want UNAUTHENTICATED, got %v (%q)", err, ErrorReason(err))
	}

	crashed := make(chan struct{})
	stalled := make(chan struct{}, 1)
	var runsMu sync.Mutex
	runs := map[string]int{} // idempotency key -> handler executions
	host := client.ServeTools(ctx, "go-host", []Tool{{
		Name:        "lookup",
		InputSchema: map[string]interface{}{"type": "object"},
		Handler: func(ctx context.Context, input map[string]interface{}, call *omav1.ToolCall) (string, error) {
			runsMu.Lock()
			runs[call.IdempotencyKey]++
			runsMu.Unlock()
			select {
			case <-crashed:
			default:
				if call.TaskId == "t2" {
					stalled <- struct{}{}
					<-crashed // outstanding when the sidecar dies; its result finds no sidecar
				}
			}
			return fmt.Sprintf("go says %v for %s", input["query"], call.TaskId), nil
		},
	}})
	<-host.Registered

	runID := fmt.Sprintf("go-%d", time.Now().UnixNano())
	request := &omav1.StartRunRequest{
		RunId: runID, RequestId: runID,
		Team: &omav1.TeamSpec{Name: "go-team", Agents: []*omav1.AgentSpec{{
			Name: "worker", Provider: "scripted", Tools: []string{"lookup"},
			Scripted: &omav1.ScriptedModel{Turns: []*omav1.ScriptedTurn{
				{ToolCalls: []*omav1.ScriptedToolCall{{Name: "lookup", InputJson: `{"query": "weather"}`}}},
				{Text: "done: {{last_tool_result}}"},
			}},
		}}},
		Mode: &omav1.StartRunRequest_Tasks{Tasks: &omav1.TasksMode{Tasks: []*omav1.TaskSpec{
			{Id: "t1", Title: "One", Description: "Do one."},
			{Id: "t2", Title: "Two", Description: "Do two.", DependsOn: []string{"t1"}},
		}}},
	}
	if _, err := client.Runs.StartRun(client.Ctx(ctx), request); err != nil {
		t.Fatal(err)
	}
	again, err := client.Runs.StartRun(client.Ctx(ctx), request)
	if err != nil || again.Created {
		t.Fatalf("a retried StartRun must not create a run: %v %v", again, err)
	}
	<-stalled
	_ = sidecar.Process.Signal(syscall.SIGKILL)
	_, _ = sidecar.Process.Wait()
	close(crashed)
	if keys := host.Ledger.CommittedKeys(); len(keys) != 1 || !keys[runID+":t1:toolu_0_0"] {
		t.Fatalf("committed before the crash: %v", keys)
	}

	// The new sidecar (a new owner) adopts the run once the dead one's lease expired, from its
	// checkpoint, as attempt 2: no RestoreRun needed.
	sidecar = startSidecar(t, port, store)
	<-host.Registered
	var last *omav1.RunEvent
	if err := client.Watch(ctx, runID, 0, func(event *omav1.RunEvent) { last = event }); err != nil {
		t.Fatal(err)
	}
	if last.GetRunStatus().GetStatus() != omav1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("last event %v", last)
	}
	done, err := client.Runs.GetRun(client.Ctx(ctx), &omav1.GetRunRequest{RunId: runID, View: omav1.RunView_RUN_VIEW_FULL})
	if err != nil || done.Tasks[1].Result != "done: go says weather for t2" || done.Attempt != 2 {
		t.Fatalf("result: %v %v", done, err)
	}
	deliveries := host.Ledger.Snapshot()
	keys := []string{}
	for _, call := range deliveries {
		keys = append(keys, call.IdempotencyKey)
	}
	want := []string{runID + ":t1:toolu_0_0", runID + ":t2:toolu_0_0", runID + ":t2:toolu_0_0"}
	if strings.Join(keys, ",") != strings.Join(want, ",") || !deliveries[2].Redelivery {
		t.Fatalf("deliveries: %v", keys)
	}
	// t2's result, kept unacknowledged when its sidecar died, answered the redelivery: the
	// handler ran once per call.
	runsMu.Lock()
	defer runsMu.Unlock()
	if len(runs) != 2 || runs[runID+":t1:toolu_0_0"] != 1 || runs[runID+":t2:toolu_0_0"] != 1 {
		t.Fatalf("handler executions: %v", runs)
	}
}
