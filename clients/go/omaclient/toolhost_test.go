package omaclient

// The ToolHost's stream contract against a fake sidecar (a grpc-go server in this process): a
// host that never reads Registered keeps reconnecting, a redelivery joins the execution still
// running for its idempotency key, a result whose session ended goes with CompleteToolCall, a
// kept result answers a later redelivery, CancelToolCall cancels the handler's context, ping
// needs no reply, Drain, and the tool definition's consequential flag and timeout.

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	omav1 "oma.local/gen/omav1"
)

const testKey = "r1:t1:toolu_1"

type fakeSession struct {
	stream   omav1.ToolHostService_ConnectServer
	register *omav1.Register
	received chan *omav1.ToolHostMessage
	end      chan error
}

// send writes a message to the host (the test is the only writer after the register ack).
func (s *fakeSession) send(t *testing.T, message *omav1.ToolServerMessage) {
	t.Helper()
	if err := s.stream.Send(message); err != nil {
		t.Fatalf("send to the host: %v", err)
	}
}

// blip ends the session with UNAVAILABLE, as a dropped connection would.
func (s *fakeSession) blip() { s.end <- status.Error(codes.Unavailable, "network blip") }

func (s *fakeSession) next(t *testing.T, what string) *omav1.ToolHostMessage {
	t.Helper()
	select {
	case message := <-s.received:
		return message
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

type fakeSidecar struct {
	omav1.UnimplementedToolHostServiceServer
	endAfterRegister bool
	registrations    int64
	sessions         chan *fakeSession
	completions      chan *omav1.ToolResult
	mu               sync.Mutex
	answer           func(*omav1.ToolResult) (*omav1.ResultAck, error)
	server           *grpc.Server
	address          string
}

func (f *fakeSidecar) Connect(stream omav1.ToolHostService_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	ack := &omav1.RegisterAck{SessionId: fmt.Sprint(atomic.AddInt64(&f.registrations, 1))}
	if err := stream.Send(&omav1.ToolServerMessage{Msg: &omav1.ToolServerMessage_RegisterAck{RegisterAck: ack}}); err != nil {
		return err
	}
	if f.endAfterRegister {
		return status.Error(codes.Unavailable, "bye")
	}
	session := &fakeSession{
		stream: stream, register: first.GetRegister(),
		received: make(chan *omav1.ToolHostMessage, 64), end: make(chan error, 1),
	}
	go func() {
		for {
			message, err := stream.Recv()
			if err != nil {
				return
			}
			session.received <- message
		}
	}()
	f.sessions <- session
	select {
	case err := <-session.end:
		return err
	case <-stream.Context().Done():
		return nil
	}
}

func (f *fakeSidecar) CompleteToolCall(ctx context.Context, request *omav1.CompleteToolCallRequest) (*omav1.CompleteToolCallResponse, error) {
	f.completions <- request.Result
	f.mu.Lock()
	answer := f.answer
	f.mu.Unlock()
	ack, err := answer(request.Result)
	if err != nil {
		return nil, err
	}
	return &omav1.CompleteToolCallResponse{Ack: ack}, nil
}

func (f *fakeSidecar) setAnswer(answer func(*omav1.ResultAck) (*omav1.ResultAck, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = func(result *omav1.ToolResult) (*omav1.ResultAck, error) {
		return answer(&omav1.ResultAck{CallId: result.CallId})
	}
}

func (f *fakeSidecar) session(t *testing.T, what string) *fakeSession {
	t.Helper()
	select {
	case session := <-f.sessions:
		return session
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

func (f *fakeSidecar) completion(t *testing.T, what string) *omav1.ToolResult {
	t.Helper()
	select {
	case result := <-f.completions:
		return result
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

func startFake(t *testing.T, endAfterRegister bool) (*fakeSidecar, *Client) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeSidecar{
		endAfterRegister: endAfterRegister,
		sessions:         make(chan *fakeSession, 64),
		completions:      make(chan *omav1.ToolResult, 64),
		server:           grpc.NewServer(),
		address:          listener.Addr().String(),
	}
	fake.setAnswer(func(ack *omav1.ResultAck) (*omav1.ResultAck, error) {
		ack.Status = omav1.ResultAck_STATUS_COMMITTED
		return ack, nil
	})
	omav1.RegisterToolHostServiceServer(fake.server, fake)
	go func() { _ = fake.server.Serve(listener) }()
	client, err := Dial(fake.address, "fake-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.Close()
		fake.server.Stop()
	})
	return fake, client
}

func callMessage(callID string, attempt int32) *omav1.ToolServerMessage {
	call := &omav1.ToolCall{
		CallId: callID, RunId: "r1", TaskId: "t1", ToolCallId: "toolu_1", IdempotencyKey: testKey,
		ToolName: "charge", InputJson: `{"amount": 10}`, DeliveryAttempt: attempt, Redelivery: attempt > 1,
	}
	return &omav1.ToolServerMessage{Msg: &omav1.ToolServerMessage_Call{Call: call}}
}

// gated is a tool whose handler waits for release (or its context); runs counts executions.
type gated struct {
	runs    int64
	started chan context.Context
	release chan struct{}
}

func newGated() *gated {
	return &gated{started: make(chan context.Context, 16), release: make(chan struct{})}
}

func (g *gated) tool() Tool {
	return Tool{Name: "charge", Handler: func(ctx context.Context, input map[string]interface{}, call *omav1.ToolCall) (string, error) {
		atomic.AddInt64(&g.runs, 1)
		g.started <- ctx
		select {
		case <-g.release:
			return fmt.Sprintf("charged %v", input["amount"]), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
}

func (g *gated) waitStarted(t *testing.T) context.Context {
	t.Helper()
	select {
	case ctx := <-g.started:
		return ctx
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for the handler")
		return nil
	}
}

func eventually(t *testing.T, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRegisteredNeverBlocksTheReceiveLoop(t *testing.T) {
	fake, client := startFake(t, true) // every session ends right after its register ack
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := client.ServeTools(ctx, "h", []Tool{newGated().tool()})
	// Registered is never read: the host must keep reconnecting (it used to hang at the 17th).
	deadline := time.Now().Add(15 * time.Second)
	for atomic.LoadInt64(&fake.registrations) < 25 {
		if time.Now().After(deadline) {
			t.Fatalf("the host stopped reconnecting after %d sessions", atomic.LoadInt64(&fake.registrations))
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-host.Registered:
	default:
		t.Fatal("a registration is notified")
	}
	if host.Sessions() < 17 {
		t.Fatalf("sessions: %d", host.Sessions())
	}
}

func TestRedeliveryJoinsTheRunningExecution(t *testing.T) {
	fake, client := startFake(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newGated()
	host := client.ServeTools(ctx, "h", []Tool{g.tool()})
	first := fake.session(t, "session 1")
	first.send(t, callMessage("c1", 1))
	handlerCtx := g.waitStarted(t)
	first.blip()
	second := fake.session(t, "session 2")
	second.send(t, callMessage("c2", 2))
	eventually(t, "the redelivery", func() bool { return len(host.Ledger.Snapshot()) == 2 })
	time.Sleep(100 * time.Millisecond)
	if handlerCtx.Err() != nil {
		t.Fatal("a dropped session must not cancel the running handler")
	}
	if runs := atomic.LoadInt64(&g.runs); runs != 1 {
		t.Fatalf("the handler ran %d times for one key", runs)
	}
	close(g.release)
	result := second.next(t, "the result").GetResult()
	if result.GetCallId() != "c2" || result.GetSuccess().GetOutputText() != "charged 10" {
		t.Fatalf("result: %v", result)
	}
	time.Sleep(100 * time.Millisecond)
	if runs := atomic.LoadInt64(&g.runs); runs != 1 || len(fake.completions) != 0 || len(second.received) != 0 {
		t.Fatalf("one execution, one result: %d runs, %d completions", runs, len(fake.completions))
	}
}

func TestLateResultGoesWithCompleteToolCall(t *testing.T) {
	fake, client := startFake(t, false)
	fake.setAnswer(func(ack *omav1.ResultAck) (*omav1.ResultAck, error) {
		ack.Status = omav1.ResultAck_STATUS_DUPLICATE
		return ack, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newGated()
	host := client.ServeTools(ctx, "h", []Tool{g.tool()})
	first := fake.session(t, "session 1")
	first.send(t, callMessage("c1", 1))
	g.waitStarted(t)
	first.blip()
	second := fake.session(t, "session 2")
	close(g.release)
	late := fake.completion(t, "CompleteToolCall")
	if late.CallId != "c1" || late.ToolCallId != "toolu_1" || late.GetSuccess().GetOutputText() != "charged 10" {
		t.Fatalf("late result: %v", late)
	}
	eventually(t, "the DUPLICATE ack", func() bool {
		st, ok := host.Ledger.Ack("c1")
		return ok && st == omav1.ResultAck_STATUS_DUPLICATE
	})
	if len(second.received) != 0 {
		t.Fatal("nothing on the new session")
	}
}

func TestKeptResultAnswersALaterRedelivery(t *testing.T) {
	fake, client := startFake(t, false)
	fake.setAnswer(func(ack *omav1.ResultAck) (*omav1.ResultAck, error) {
		return nil, status.Error(codes.Unavailable, "down")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newGated()
	host := client.ServeTools(ctx, "h", []Tool{g.tool()})
	first := fake.session(t, "session 1")
	first.send(t, callMessage("c1", 1))
	g.waitStarted(t)
	first.blip()
	second := fake.session(t, "session 2")
	close(g.release)
	fake.completion(t, "CompleteToolCall (UNAVAILABLE)") // an error: no crash, the result is kept
	fake.setAnswer(func(ack *omav1.ResultAck) (*omav1.ResultAck, error) {
		ack.Status = omav1.ResultAck_STATUS_UNKNOWN_CALL
		return ack, nil
	})
	second.blip()
	third := fake.session(t, "session 3")
	third.send(t, callMessage("c2", 2))
	result := third.next(t, "the kept result").GetResult()
	if result.GetCallId() != "c2" || result.GetSuccess().GetOutputText() != "charged 10" {
		t.Fatalf("result: %v", result)
	}
	if runs := atomic.LoadInt64(&g.runs); runs != 1 {
		t.Fatalf("the handler ran %d times", runs)
	}
	ack := &omav1.ResultAck{CallId: "c2", Status: omav1.ResultAck_STATUS_COMMITTED}
	third.send(t, &omav1.ToolServerMessage{Msg: &omav1.ToolServerMessage_ResultAck{ResultAck: ack}})
	eventually(t, "committed", func() bool { return host.Ledger.CommittedKeys()[testKey] })
}

func TestCancelToolCallCancelsTheHandlerContext(t *testing.T) {
	fake, client := startFake(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newGated()
	host := client.ServeTools(ctx, "h", []Tool{g.tool()})
	session := fake.session(t, "session")
	session.send(t, &omav1.ToolServerMessage{Msg: &omav1.ToolServerMessage_Ping{Ping: &omav1.Ping{}}})
	session.send(t, callMessage("c1", 1))
	handlerCtx := g.waitStarted(t)
	cancelled := &omav1.CancelToolCall{CallId: "c1", Reason: "deadline passed"}
	session.send(t, &omav1.ToolServerMessage{Msg: &omav1.ToolServerMessage_Cancel{Cancel: cancelled}})
	select {
	case <-handlerCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	if err := host.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if len(session.received) != 0 || len(fake.completions) != 0 {
		t.Fatal("no result for a cancelled call, and no answer to a ping")
	}
	host.Ledger.mu.Lock()
	reason := host.Ledger.Cancels["c1"]
	host.Ledger.mu.Unlock()
	if reason != "deadline passed" {
		t.Fatalf("cancel reason %q", reason)
	}
	// The call is gone: a new delivery of the key runs the handler again.
	session.send(t, callMessage("c2", 2))
	g.waitStarted(t)
	if runs := atomic.LoadInt64(&g.runs); runs != 2 {
		t.Fatalf("runs: %d", runs)
	}
}

func TestToolDefinitionAndDrain(t *testing.T) {
	fake, client := startFake(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newGated()
	charge := g.tool()
	charge.Consequential = true
	charge.Timeout = 90*time.Second + 500*time.Millisecond
	plain := Tool{Name: "plain", Handler: func(context.Context, map[string]interface{}, *omav1.ToolCall) (string, error) {
		return "ok", nil
	}}
	host := client.ServeTools(ctx, "h", []Tool{charge, plain})
	session := fake.session(t, "session")
	tools := session.register.GetTools()
	if len(tools) != 2 || !tools[0].Consequential || tools[0].GetTimeout().AsDuration() != charge.Timeout {
		t.Fatalf("definitions: %v", tools)
	}
	if tools[1].Consequential || tools[1].Timeout != nil || tools[1].InputSchemaJson != `{"type":"object"}` {
		t.Fatalf("plain definition: %v", tools[1])
	}
	session.send(t, callMessage("c1", 1))
	g.waitStarted(t)
	drained := make(chan error, 1)
	go func() { drained <- host.Drain(ctx) }()
	if message := session.next(t, "drain"); message.GetDrain() == nil {
		t.Fatalf("want drain, got %v", message)
	}
	select {
	case <-drained:
		t.Fatal("Drain returned while a handler runs")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.release)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if result := session.next(t, "the result").GetResult(); result.GetCallId() != "c1" {
		t.Fatalf("result: %v", result)
	}
	session.blip()
	again := fake.session(t, "session 2")
	if message := again.next(t, "drain again"); message.GetDrain() == nil {
		t.Fatalf("after a reconnect, want drain, got %v", message)
	}
}
