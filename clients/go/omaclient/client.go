// Package omaclient is a small Go client of the oma-actors sidecar (package oma.v1): start,
// watch and restore runs, and serve tools implemented in Go over ToolHostService.Connect.
//
// It builds offline against Debian's grpc-go 1.33 in GOPATH mode (see ../README.md); the
// generated package oma.local/gen/omav1 comes from proto/oma/v1/sidecar.proto (../build.sh).
package omaclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	omav1 "oma.local/gen/omav1"
)

// Client holds one connection and the four service stubs.
type Client struct {
	Conn      *grpc.ClientConn
	Runs      omav1.RunServiceClient
	Approvals omav1.ApprovalServiceClient
	Tools     omav1.ToolHostServiceClient
	System    omav1.SystemServiceClient
	token     string
}

// Dial connects to a plaintext loopback sidecar (a TLS sidecar needs grpc.WithTransportCredentials).
func Dial(address, token string) (*Client, error) {
	conn, err := grpc.Dial(address, grpc.WithInsecure(), grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second},
		MinConnectTimeout: time.Second,
	}))
	if err != nil {
		return nil, err
	}
	return &Client{
		Conn:      conn,
		Runs:      omav1.NewRunServiceClient(conn),
		Approvals: omav1.NewApprovalServiceClient(conn),
		Tools:     omav1.NewToolHostServiceClient(conn),
		System:    omav1.NewSystemServiceClient(conn),
		token:     token,
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.Conn.Close() }

// Ctx adds the bearer token to ctx (every RPC but health needs it).
func (c *Client) Ctx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
}

// ErrorReason is the machine-readable reason of a failed call (google.rpc.ErrorInfo.reason).
func ErrorReason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, detail := range st.Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

// Watch streams the run's events after afterSeq to fn until the run ends (heartbeats skipped):
// its journal (seq = journal seq; the sidecar's live notices come between with seq 0), or the
// progress events of a run that keeps no journal. Set Progress in a WatchRunRequest of your own
// for the progress events of any run.
func (c *Client) Watch(ctx context.Context, runID string, afterSeq int64, fn func(*omav1.RunEvent)) error {
	stream, err := c.Runs.WatchRun(c.Ctx(ctx), &omav1.WatchRunRequest{RunId: runID, AfterSeq: afterSeq, AllowGap: true})
	if err != nil {
		return err
	}
	for {
		event, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if event.Type != "heartbeat" {
			fn(event)
		}
	}
}

// Tool is a tool served by this process. Handler gets the JSON input and the call; a returned
// error becomes an error result the model sees. Deduplicate side effects on
// call.IdempotencyKey: a call can be delivered more than once.
type Tool struct {
	Name        string
	Description string
	InputSchema map[string]interface{}
	Handler     func(ctx context.Context, input map[string]interface{}, call *omav1.ToolCall) (string, error)
}

// Ledger records what a host saw: deliveries, and the ack of every result it sent.
type Ledger struct {
	mu         sync.Mutex
	Deliveries []*omav1.ToolCall
	Acks       map[string]omav1.ResultAck_Status
	Sent       map[string]string
}

// CommittedKeys are the idempotency keys whose result the sidecar acknowledged as committed.
func (l *Ledger) CommittedKeys() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := map[string]bool{}
	for callID, st := range l.Acks {
		if st == omav1.ResultAck_STATUS_COMMITTED {
			keys[l.Sent[callID]] = true
		}
	}
	return keys
}

// Snapshot copies the deliveries seen so far.
func (l *Ledger) Snapshot() []*omav1.ToolCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*omav1.ToolCall(nil), l.Deliveries...)
}

// ToolHost keeps a Connect session open (reconnecting) until its context is cancelled.
type ToolHost struct {
	Ledger     *Ledger
	Registered chan struct{} // receives once per registered session
}

// ServeTools runs a tool host for tools under hostID in the background.
func (c *Client) ServeTools(ctx context.Context, hostID string, tools []Tool) *ToolHost {
	host := &ToolHost{
		Ledger:     &Ledger{Acks: map[string]omav1.ResultAck_Status{}, Sent: map[string]string{}},
		Registered: make(chan struct{}, 16),
	}
	go func() {
		for ctx.Err() == nil {
			_ = c.session(ctx, hostID, tools, host)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return host
}

func (c *Client) session(ctx context.Context, hostID string, tools []Tool, host *ToolHost) error {
	sessionCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Tools.Connect(c.Ctx(sessionCtx))
	if err != nil {
		return err
	}
	byName := map[string]Tool{}
	register := &omav1.Register{HostId: hostID, MaxConcurrentCalls: 16}
	for _, tool := range tools {
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil {
			return err
		}
		byName[tool.Name] = tool
		register.Tools = append(register.Tools, &omav1.ToolDefinition{
			Name: tool.Name, Description: tool.Description, InputSchemaJson: string(schema),
		})
	}
	var sendMu sync.Mutex
	send := func(message *omav1.ToolHostMessage) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(message)
	}
	if err := send(&omav1.ToolHostMessage{Msg: &omav1.ToolHostMessage_Register{Register: register}}); err != nil {
		return err
	}
	for {
		message, err := stream.Recv()
		if err != nil {
			return err
		}
		switch m := message.Msg.(type) {
		case *omav1.ToolServerMessage_RegisterAck:
			host.Registered <- struct{}{}
		case *omav1.ToolServerMessage_ResultAck:
			host.Ledger.mu.Lock()
			host.Ledger.Acks[m.ResultAck.CallId] = m.ResultAck.Status
			host.Ledger.mu.Unlock()
		case *omav1.ToolServerMessage_Call:
			call := m.Call
			host.Ledger.mu.Lock()
			host.Ledger.Deliveries = append(host.Ledger.Deliveries, call)
			host.Ledger.mu.Unlock()
			go func() {
				result := &omav1.ToolResult{CallId: call.CallId, ToolCallId: call.ToolCallId}
				text, err := serveCall(sessionCtx, byName, call)
				if sessionCtx.Err() != nil {
					return // the session is gone; the call will be delivered again
				}
				if err != nil {
					result.Outcome = &omav1.ToolResult_Error{Error: &omav1.ToolError{Message: err.Error()}}
				} else {
					result.Outcome = &omav1.ToolResult_Success{Success: &omav1.ToolSuccess{OutputText: text}}
				}
				host.Ledger.mu.Lock()
				host.Ledger.Sent[call.CallId] = call.IdempotencyKey
				host.Ledger.mu.Unlock()
				_ = send(&omav1.ToolHostMessage{Msg: &omav1.ToolHostMessage_Result{Result: result}})
			}()
		}
	}
}

func serveCall(ctx context.Context, tools map[string]Tool, call *omav1.ToolCall) (string, error) {
	tool, ok := tools[call.ToolName]
	if !ok {
		return "", fmt.Errorf("this host has no tool %q", call.ToolName)
	}
	input := map[string]interface{}{}
	if call.InputJson != "" {
		if err := json.Unmarshal([]byte(call.InputJson), &input); err != nil {
			return "", err
		}
	}
	return tool.Handler(ctx, input, call)
}
