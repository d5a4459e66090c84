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

	"google.golang.org/protobuf/types/known/durationpb"

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
// error becomes an error result the model sees. Its ctx is cancelled when the sidecar cancels
// the call (CancelToolCall: the run was cancelled or the call's deadline passed; no result is
// sent then) or the host's context ends; not when a session drops (a redelivery joins the
// running execution, see ToolHost). Deduplicate side effects on call.IdempotencyKey: a call can
// be delivered more than once.
type Tool struct {
	Name        string
	Description string
	InputSchema map[string]interface{}
	// Consequential marks a tool with side effects: its calls run as OMA "unsafe" tools (one
	// dispatched before a crash is reported to the model as an unknown outcome, not redelivered).
	Consequential bool
	// Timeout is the per-call timeout, waiting for a host included; 0: the sidecar's
	// --host-call-timeout (5 min). A negative one makes the sidecar reject the tool.
	Timeout time.Duration
	Handler func(ctx context.Context, input map[string]interface{}, call *omav1.ToolCall) (string, error)
}

// Ledger records what a host saw: deliveries, the ack of every result it sent (also of results
// completed with CompleteToolCall), the idempotency key of each call_id it answered (Sent) and
// the reason of every CancelToolCall (Cancels).
type Ledger struct {
	mu         sync.Mutex
	Deliveries []*omav1.ToolCall
	Acks       map[string]omav1.ResultAck_Status
	Sent       map[string]string
	Cancels    map[string]string
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

// Ack is the recorded ack of the result sent for callID, if any.
func (l *Ledger) Ack(callID string) (omav1.ResultAck_Status, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.Acks[callID]
	return st, ok
}

// KeepUnacked is how many finished results a ToolHost keeps (oldest dropped first) while the
// sidecar has not acknowledged them.
const KeepUnacked = 1024

// ToolHost keeps a Connect session open (reconnecting) until its context is cancelled.
//
// One execution per idempotency key: a call delivered again (after a reconnect, or by a new
// sidecar) while its handler still runs in this host waits for that execution and answers with
// its result; the handler never runs twice at once for a key. A finished result stays until the
// sidecar acknowledges it (the last KeepUnacked of them), so a redelivery after a lost result is
// answered without running the handler again. A result goes on the session of the call's latest
// delivery if that session is still open, else with CompleteToolCall (a late result for an
// earlier delivery counts if no other result won; a DUPLICATE or UNKNOWN_CALL ack is only
// recorded).
type ToolHost struct {
	Ledger *Ledger
	// Registered is notified after a session registered (again, after a reconnect). It holds at
	// most one notification and the host never waits for it to be read: one receive means "a
	// session registered since the last receive".
	Registered chan struct{}

	client      *Client
	ctx         context.Context
	hostID      string
	tools       map[string]Tool
	definitions []*omav1.ToolDefinition
	mu          sync.Mutex
	live        *hostSession
	draining    bool
	sessions    int
	executions  map[string]*execution // idempotency key -> execution
	keyOf       map[string]string     // call_id of a delivery -> idempotency key
	order       []*execution          // executions by start, for KeepUnacked
}

type hostSession struct {
	send func(*omav1.ToolHostMessage) error
}

type delivery struct {
	call    *omav1.ToolCall
	session *hostSession
}

type execution struct {
	key        string
	deliveries []delivery
	cancel     context.CancelFunc
	done       bool
	cancelled  bool
	result     *omav1.ToolResult // the outcome, once done
	finished   chan struct{}
}

// ServeTools runs a tool host for tools under hostID in the background until ctx ends. It
// panics if a tool's InputSchema cannot be encoded as JSON (nil: {"type": "object"}).
func (c *Client) ServeTools(ctx context.Context, hostID string, tools []Tool) *ToolHost {
	host := &ToolHost{
		Ledger: &Ledger{
			Acks: map[string]omav1.ResultAck_Status{}, Sent: map[string]string{}, Cancels: map[string]string{},
		},
		Registered: make(chan struct{}, 1),
		client:     c,
		ctx:        ctx,
		hostID:     hostID,
		tools:      map[string]Tool{},
		executions: map[string]*execution{},
		keyOf:      map[string]string{},
	}
	for _, tool := range tools {
		host.tools[tool.Name] = tool
		host.definitions = append(host.definitions, toolDefinition(tool))
	}
	go func() {
		for ctx.Err() == nil {
			_ = host.session()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return host
}

func toolDefinition(tool Tool) *omav1.ToolDefinition {
	schema := []byte(`{"type":"object"}`)
	if tool.InputSchema != nil {
		encoded, err := json.Marshal(tool.InputSchema)
		if err != nil { // a programming error, like a bad regexp.MustCompile pattern
			panic(fmt.Sprintf("omaclient: tool %q: the input schema is not JSON: %v", tool.Name, err))
		}
		schema = encoded
	}
	definition := &omav1.ToolDefinition{
		Name: tool.Name, Description: tool.Description, InputSchemaJson: string(schema),
		Consequential: tool.Consequential,
	}
	if tool.Timeout != 0 {
		definition.Timeout = durationpb.New(tool.Timeout)
	}
	return definition
}

// Sessions is how many sessions have registered so far.
func (h *ToolHost) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions
}

// Drain asks the sidecar for no new calls (ToolHostMessage.drain, sent again after a reconnect)
// and returns once no handler runs any more (their results sent), or ctx ends. Then cancel the
// host's context.
func (h *ToolHost) Drain(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	live := h.live
	h.mu.Unlock()
	if live != nil {
		_ = live.send(&omav1.ToolHostMessage{Msg: &omav1.ToolHostMessage_Drain{Drain: &omav1.Drain{}}})
	}
	return h.Idle(ctx)
}

// Idle returns once no handler of this host is running, or ctx ends.
func (h *ToolHost) Idle(ctx context.Context) error {
	for {
		h.mu.Lock()
		var running *execution
		for _, ex := range h.executions {
			if !ex.done {
				running = ex
				break
			}
		}
		h.mu.Unlock()
		if running == nil {
			return nil
		}
		select {
		case <-running.finished:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (h *ToolHost) session() error {
	sessionCtx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	stream, err := h.client.Tools.Connect(h.client.Ctx(sessionCtx))
	if err != nil {
		return err
	}
	var sendMu sync.Mutex
	sess := &hostSession{send: func(message *omav1.ToolHostMessage) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(message)
	}}
	h.mu.Lock()
	h.live = sess
	draining := h.draining
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.live == sess {
			h.live = nil
		}
		h.mu.Unlock()
	}()
	register := &omav1.Register{HostId: h.hostID, MaxConcurrentCalls: 16, Tools: h.definitions}
	if err := sess.send(&omav1.ToolHostMessage{Msg: &omav1.ToolHostMessage_Register{Register: register}}); err != nil {
		return err
	}
	if draining {
		if err := sess.send(&omav1.ToolHostMessage{Msg: &omav1.ToolHostMessage_Drain{Drain: &omav1.Drain{}}}); err != nil {
			return err
		}
	}
	for {
		message, err := stream.Recv()
		if err != nil {
			return err
		}
		switch m := message.Msg.(type) {
		case *omav1.ToolServerMessage_RegisterAck:
			h.mu.Lock()
			h.sessions++
			h.mu.Unlock()
			select { // never block the receive loop on a reader that is not there
			case h.Registered <- struct{}{}:
			default:
			}
		case *omav1.ToolServerMessage_ResultAck:
			h.acked(m.ResultAck)
		case *omav1.ToolServerMessage_Call:
			h.take(sess, m.Call)
		case *omav1.ToolServerMessage_Cancel:
			h.cancelCall(m.Cancel)
		default: // ping: a keepalive, no reply needed
		}
	}
}

func (h *ToolHost) take(sess *hostSession, call *omav1.ToolCall) {
	h.Ledger.mu.Lock()
	h.Ledger.Deliveries = append(h.Ledger.Deliveries, call)
	h.Ledger.mu.Unlock()
	key := call.IdempotencyKey
	if key == "" {
		key = call.CallId
	}
	h.mu.Lock()
	h.keyOf[call.CallId] = key
	running := h.executions[key]
	if running != nil && !running.cancelled {
		running.deliveries = append(running.deliveries, delivery{call, sess}) // join it
		var answer func()
		if running.done {
			answer = h.answerLocked(running)
		}
		h.mu.Unlock()
		if answer != nil {
			answer()
		}
		return
	}
	ctx, cancel := context.WithCancel(h.ctx)
	ex := &execution{key: key, deliveries: []delivery{{call, sess}}, cancel: cancel, finished: make(chan struct{})}
	h.executions[key] = ex
	h.order = append(h.order, ex)
	var previous chan struct{}
	if running != nil {
		previous = running.finished // a cancelled execution still stopping runs out first
	}
	h.mu.Unlock()
	go h.execute(ctx, ex, call, previous)
}

func (h *ToolHost) execute(ctx context.Context, ex *execution, call *omav1.ToolCall, previous chan struct{}) {
	defer ex.cancel()
	if previous != nil {
		<-previous
	}
	result := &omav1.ToolResult{}
	text, err := serveCall(ctx, h.tools, call)
	if err != nil {
		result.Outcome = &omav1.ToolResult_Error{Error: &omav1.ToolError{Message: err.Error()}}
	} else {
		result.Outcome = &omav1.ToolResult_Success{Success: &omav1.ToolSuccess{OutputText: text}}
	}
	h.mu.Lock()
	ex.done = true
	ex.result = result
	close(ex.finished)
	if ex.cancelled || h.ctx.Err() != nil {
		h.forgetLocked(ex)
		h.mu.Unlock()
		return
	}
	answer := h.answerLocked(ex)
	h.trimLocked()
	h.mu.Unlock()
	answer()
}

// answerLocked returns how to send ex's result for its latest delivery: on that delivery's
// session if it is still the open one, else (or if that send fails) with CompleteToolCall.
func (h *ToolHost) answerLocked(ex *execution) func() {
	last := ex.deliveries[len(ex.deliveries)-1]
	result := &omav1.ToolResult{CallId: last.call.CallId, ToolCallId: last.call.ToolCallId, Outcome: ex.result.Outcome}
	h.Ledger.mu.Lock()
	h.Ledger.Sent[result.CallId] = ex.key
	h.Ledger.mu.Unlock()
	live := last.session == h.live
	return func() {
		if live {
			err := last.session.send(&omav1.ToolHostMessage{Msg: &omav1.ToolHostMessage_Result{Result: result}})
			if err == nil {
				return
			}
		}
		h.complete(result)
	}
}

// complete sends a result whose session is gone with the unary CompleteToolCall. If the
// sidecar cannot be reached the result stays kept for a redelivery of the call.
func (h *ToolHost) complete(result *omav1.ToolResult) {
	if h.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	response, err := h.client.Tools.CompleteToolCall(h.client.Ctx(ctx), &omav1.CompleteToolCallRequest{Result: result})
	if err != nil || response.GetAck() == nil {
		return
	}
	ack := response.GetAck()
	if ack.CallId == "" {
		ack.CallId = result.CallId
	}
	h.acked(ack)
}

func (h *ToolHost) acked(ack *omav1.ResultAck) {
	h.Ledger.mu.Lock()
	h.Ledger.Acks[ack.CallId] = ack.Status
	h.Ledger.mu.Unlock()
	switch ack.Status {
	case omav1.ResultAck_STATUS_COMMITTED, omav1.ResultAck_STATUS_DUPLICATE, omav1.ResultAck_STATUS_NOT_DURABLE:
	default:
		return // UNKNOWN_CALL: maybe a restarted sidecar; keep the result for a redelivery
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ex := h.executionOfLocked(ack.CallId); ex != nil && ex.done {
		h.forgetLocked(ex)
	}
}

func (h *ToolHost) cancelCall(cancel *omav1.CancelToolCall) {
	h.Ledger.mu.Lock()
	h.Ledger.Cancels[cancel.CallId] = cancel.Reason
	h.Ledger.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	ex := h.executionOfLocked(cancel.CallId)
	if ex == nil {
		return
	}
	ex.cancelled = true
	if ex.done {
		h.forgetLocked(ex)
	} else {
		ex.cancel()
	}
}

func (h *ToolHost) executionOfLocked(callID string) *execution {
	ex := h.executions[h.keyOf[callID]]
	if ex == nil {
		return nil
	}
	for _, d := range ex.deliveries {
		if d.call.CallId == callID {
			return ex
		}
	}
	return nil
}

func (h *ToolHost) forgetLocked(ex *execution) {
	if h.executions[ex.key] == ex {
		delete(h.executions, ex.key)
	}
	for _, d := range ex.deliveries {
		if h.keyOf[d.call.CallId] == ex.key {
			delete(h.keyOf, d.call.CallId)
		}
	}
}

func (h *ToolHost) trimLocked() {
	kept := h.order[:0]
	done := 0
	for _, ex := range h.order {
		if h.executions[ex.key] == ex && ex.done {
			done++
		}
	}
	for _, ex := range h.order {
		if h.executions[ex.key] != ex {
			continue // forgotten
		}
		if ex.done && done > KeepUnacked {
			h.forgetLocked(ex)
			done--
			continue
		}
		kept = append(kept, ex)
	}
	h.order = kept
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
