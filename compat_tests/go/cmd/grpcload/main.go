// Command grpcload is the gRPC load generator of scripts/bench_peers.py: raw apache.rocketmq.v2 protobuf calls
// (the v5 client's generated API, no client library in between), as a 5.x client makes them, against any
// MessagingService endpoint (rmqd, the Java proxy, the Rust proxy), and a null server that answers at once (the
// generator's own ceiling). It prints one JSON line, {"op": "result", ...}, and exits non-zero with the error on
// stderr when a step fails.
//
//	grpcload -mode send -endpoint ADDR -topic T [-conc 16] [-size 1024] [-seconds 10] [-max N]
//	grpcload -mode recv -endpoint ADDR -topic T -group G -max N [-conc 4] [-batch 32] [-seconds 60]
//	grpcload -mode lite -endpoint ADDR -topic T -group G [-lite-topics 100] [-consumers 4] [-conc 4] [-seconds 10]
//	grpcload -mode null -listen 127.0.0.1:0 [-size 1024]
//
// send: one producer (its Telemetry settings first, as the clients open), -conc goroutines each sending one
// message per SendMessage call, as a client's synchronous send; latency per call. recv: one simple consumer,
// -conc goroutines each receiving a batch and acking every message with its own AckMessage call (as the clients'
// ack), until -max messages are acked; latency of the receive calls and of the acks. lite: -consumers lite push
// consumers (LITE_PUSH_CONSUMER) each subscribed to its share of -lite-topics lite topics (SyncLiteSubscription
// COMPLETE_ADD), -conc producer goroutines sending lite messages over all of them while the consumers receive and
// ack each message; latency from the send to the receive (the send time travels in the body). null: a server that
// answers every call at once and stores nothing.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"rmqdcompat/internal/event"
)

type opts struct {
	mode, endpoint, topic, group, listen string
	conc, size, batch, liteTopics, consumers int
	max                                      int64
	seconds                                  float64
	invisible, poll                          time.Duration
}

func main() {
	var o opts
	flag.StringVar(&o.mode, "mode", "", "send, recv, lite or null")
	flag.StringVar(&o.endpoint, "endpoint", "", "gRPC endpoint host:port")
	flag.StringVar(&o.topic, "topic", "", "topic (created beforehand)")
	flag.StringVar(&o.group, "group", "", "consumer group (created beforehand)")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "null mode: address to listen on")
	flag.IntVar(&o.conc, "conc", 1, "calls in flight (goroutines)")
	flag.IntVar(&o.size, "size", 1024, "body bytes")
	flag.IntVar(&o.batch, "batch", 32, "messages per receive")
	flag.IntVar(&o.liteTopics, "lite-topics", 100, "lite mode: lite topics")
	flag.IntVar(&o.consumers, "consumers", 4, "lite mode: lite consumers")
	flag.Int64Var(&o.max, "max", 0, "send: stop after this many messages; recv: messages to ack (0: no bound)")
	flag.Float64Var(&o.seconds, "seconds", 10, "longest run, seconds")
	flag.DurationVar(&o.invisible, "invisible", 30*time.Second, "invisible duration of received messages")
	flag.DurationVar(&o.poll, "poll", 5*time.Second, "long-polling timeout of a receive")
	flag.Parse()
	switch o.mode {
	case "send":
		runSend(o)
	case "recv":
		runRecv(o)
	case "lite":
		runLite(o)
	case "null":
		runNull(o)
	default:
		fmt.Fprintln(os.Stderr, "usage: grpcload -mode send|recv|lite|null ... (see the source's comment)")
		os.Exit(2)
	}
}

// ------------------------------------------------------------------------------------------------ client side

var idPrefix = fmt.Sprintf("01%012X%08X", rand.Int63()&0xFFFFFFFFFFFF, uint32(os.Getpid()))
var idSeq atomic.Uint64

// newMessageID is a 5.x message id: version 01, 34 hex digits, unique.
func newMessageID() string { return fmt.Sprintf("%s%012X", idPrefix, idSeq.Add(1)) }

// session is one client: its connection, its id and its Telemetry stream (opened with its Settings, as the 5.x
// clients do before any other call; the Java proxy reads a client's settings on later calls).
type session struct {
	conn   *grpc.ClientConn
	stub   pb.MessagingServiceClient
	id     string
	md     metadata.MD
	stream pb.MessagingService_TelemetryClient
}

func (s *session) ctx(parent context.Context) context.Context {
	return metadata.NewOutgoingContext(parent, s.md)
}

func endpoints(addr string) *pb.Endpoints {
	host, port, err := net.SplitHostPort(addr)
	event.Check("endpoint", err)
	var p int
	fmt.Sscanf(port, "%d", &p)
	return &pb.Endpoints{Scheme: pb.AddressScheme_IPv4, Addresses: []*pb.Address{{Host: host, Port: int32(p)}}}
}

func openSession(o opts, settings *pb.Settings) *session {
	conn, err := grpc.NewClient(o.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	event.Check("dial", err)
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s@%d#grpcload-%d", host, os.Getpid(), rand.Int63())
	s := &session{conn: conn, stub: pb.NewMessagingServiceClient(conn), id: id, md: metadata.Pairs(
		"x-mq-client-id", id, "x-mq-language", "GO", "x-mq-protocol", "v2", "x-mq-client-version", "5.1.4",
		"x-mq-date-time", time.Now().UTC().Format("20060102T150405Z"))}
	settings.AccessPoint = endpoints(o.endpoint)
	settings.RequestTimeout = durationpb.New(10 * time.Second)
	settings.UserAgent = &pb.UA{Language: pb.Language_GOLANG, Version: "5.1.4", Platform: "linux", Hostname: host}
	stream, err := s.stub.Telemetry(s.ctx(context.Background()))
	event.Check("open telemetry", err)
	event.Check("send settings", stream.Send(&pb.TelemetryCommand{Command: &pb.TelemetryCommand_Settings{
		Settings: settings}}))
	got := make(chan error, 1)
	go func() {
		for {
			cmd, err := stream.Recv()
			if err != nil {
				select {
				case got <- err:
				default:
				}
				return
			}
			if cmd.GetSettings() != nil {
				select {
				case got <- nil:
				default:
				}
			}
		}
	}()
	select {
	case err := <-got:
		event.Check("settings answer", err)
	case <-time.After(15 * time.Second):
		event.Fail(errors.New("no settings answer within 15 s"))
	}
	s.stream = stream
	return s
}

func (s *session) heartbeat(group string, ctype pb.ClientType) {
	req := &pb.HeartbeatRequest{ClientType: ctype}
	if group != "" {
		req.Group = &pb.Resource{Name: group}
	}
	ctx, cancel := context.WithTimeout(s.ctx(context.Background()), 10*time.Second)
	defer cancel()
	r, err := s.stub.Heartbeat(ctx, req)
	event.Check("heartbeat", err)
	if r.GetStatus().GetCode() != pb.Code_OK {
		event.Fail(fmt.Errorf("heartbeat: %v", r.GetStatus()))
	}
}

func (s *session) close(group string) {
	req := &pb.NotifyClientTerminationRequest{}
	if group != "" {
		req.Group = &pb.Resource{Name: group}
	}
	ctx, cancel := context.WithTimeout(s.ctx(context.Background()), 5*time.Second)
	s.stub.NotifyClientTermination(ctx, req)
	cancel()
	s.stream.CloseSend()
	s.conn.Close()
}

func producerSettings(topic string) *pb.Settings {
	return &pb.Settings{ClientType: pb.ClientType_PRODUCER.Enum(), PubSub: &pb.Settings_Publishing{
		Publishing: &pb.Publishing{Topics: []*pb.Resource{{Name: topic}}}}}
}

func consumerSettings(topic, group string, ctype pb.ClientType) *pb.Settings {
	return &pb.Settings{ClientType: ctype.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{
		Group: &pb.Resource{Name: group}, Subscriptions: []*pb.SubscriptionEntry{{Topic: &pb.Resource{Name: topic},
			Expression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}}}}}}
}

// message is one 1 KB (-size) message as a client builds it; its body starts with the send time (ns).
func message(topic string, body []byte, lite string) *pb.Message {
	b := make([]byte, len(body))
	copy(b, body)
	if len(b) >= 8 {
		binary.BigEndian.PutUint64(b, uint64(time.Now().UnixNano()))
	}
	sp := &pb.SystemProperties{MessageId: newMessageID(), BodyEncoding: pb.Encoding_IDENTITY,
		MessageType: pb.MessageType_NORMAL, BornTimestamp: timestamppb.Now(), BornHost: "grpcload"}
	if lite != "" {
		sp.LiteTopic, sp.MessageType = &lite, pb.MessageType_LITE
	}
	return &pb.Message{Topic: &pb.Resource{Name: topic}, SystemProperties: sp, Body: b}
}

func body(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

// lat keeps call durations of one goroutine.
type lat []time.Duration

func percentiles(all []lat) (p50, p99 float64, n int) {
	var v []time.Duration
	for _, l := range all {
		v = append(v, l...)
	}
	if len(v) == 0 {
		return 0, 0, 0
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	pick := func(q float64) float64 {
		i := int(q * float64(len(v)))
		if i >= len(v) {
			i = len(v) - 1
		}
		return float64(v[i].Microseconds()) / 1000
	}
	return pick(0.5), pick(0.99), len(v)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func okStatus(st *pb.Status) bool { return st.GetCode() == pb.Code_OK }

func runSend(o opts) {
	s := openSession(o, producerSettings(o.topic))
	s.heartbeat("", pb.ClientType_PRODUCER)
	b := body(o.size)
	send := func(ctx context.Context) error {
		r, err := s.stub.SendMessage(s.ctx(ctx), &pb.SendMessageRequest{Messages: []*pb.Message{
			message(o.topic, b, "")}})
		if err != nil {
			return err
		}
		if !okStatus(r.GetStatus()) || len(r.GetEntries()) != 1 || !okStatus(r.GetEntries()[0].GetStatus()) {
			return fmt.Errorf("send refused: %v", r.GetStatus())
		}
		return nil
	}
	for i := 0; i < 20; i++ { // warm the connection and the server's path
		event.Check("warm-up send", send(context.Background()))
	}
	var sent, failed atomic.Int64
	var lastErr atomic.Value
	lats := make([]lat, o.conc)
	cpu0, t0 := cpuSeconds(), time.Now()
	stop := t0.Add(time.Duration(o.seconds * float64(time.Second)))
	var wg sync.WaitGroup
	for k := 0; k < o.conc; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for time.Now().Before(stop) && (o.max == 0 || sent.Load()+failed.Load() < o.max) {
				c0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := send(ctx)
				cancel()
				if err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
					continue
				}
				lats[k] = append(lats[k], time.Since(c0))
				sent.Add(1)
			}
		}(k)
	}
	wg.Wait()
	elapsed := time.Since(t0).Seconds()
	p50, p99, _ := percentiles(lats)
	s.close("")
	f := event.Fields{"mode": "send", "sent": sent.Load() + 20, "measured": sent.Load(), "failed": failed.Load(),
		"seconds": elapsed, "tps": float64(sent.Load()) / elapsed, "p50_ms": p50, "p99_ms": p99,
		"client_cpu_s": cpuSeconds() - cpu0, "conc": o.conc}
	if e := lastErr.Load(); e != nil {
		f["last_error"] = e
	}
	event.Emit("result", f)
}

// receiveQueue is the queue a consumer receives from: the broker of its assignment (the proxy pops from the
// broker the request names).
func (s *session) receiveQueue(topic, group string) *pb.MessageQueue {
	ctx, cancel := context.WithTimeout(s.ctx(context.Background()), 10*time.Second)
	defer cancel()
	r, err := s.stub.QueryAssignment(ctx, &pb.QueryAssignmentRequest{Topic: &pb.Resource{Name: topic},
		Group: &pb.Resource{Name: group}, Endpoints: endpoints(s.conn.Target())})
	event.Check("query assignment", err)
	if !okStatus(r.GetStatus()) || len(r.GetAssignments()) == 0 {
		event.Fail(fmt.Errorf("query assignment: %v", r.GetStatus()))
	}
	return r.GetAssignments()[0].GetMessageQueue()
}

type received struct {
	id, handle, lite string
	body             []byte
}

// receive is one ReceiveMessage call: the messages it streamed (nil, nil: none within the long poll).
func (s *session) receive(ctx context.Context, o opts, mq *pb.MessageQueue) ([]received, error) {
	req := &pb.ReceiveMessageRequest{Group: &pb.Resource{Name: o.group}, MessageQueue: mq,
		FilterExpression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}, BatchSize: int32(o.batch),
		InvisibleDuration: durationpb.New(o.invisible), AutoRenew: false, LongPollingTimeout: durationpb.New(o.poll)}
	ctx, cancel := context.WithTimeout(ctx, o.poll+10*time.Second)
	defer cancel()
	stream, err := s.stub.ReceiveMessage(s.ctx(ctx), req)
	if err != nil {
		return nil, err
	}
	var out []received
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if st := r.GetStatus(); st != nil && st.GetCode() != pb.Code_OK && st.GetCode() != pb.Code_MESSAGE_NOT_FOUND {
			return out, fmt.Errorf("receive: %v", st)
		}
		if m := r.GetMessage(); m != nil {
			sp := m.GetSystemProperties()
			out = append(out, received{id: sp.GetMessageId(), handle: sp.GetReceiptHandle(), lite: sp.GetLiteTopic(),
				body: m.GetBody()})
		}
	}
}

func (s *session) ack(ctx context.Context, topic, group string, m received) error {
	e := &pb.AckMessageEntry{MessageId: m.id, ReceiptHandle: m.handle}
	if m.lite != "" {
		e.LiteTopic = &m.lite
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := s.stub.AckMessage(s.ctx(ctx), &pb.AckMessageRequest{Group: &pb.Resource{Name: group},
		Topic: &pb.Resource{Name: topic}, Entries: []*pb.AckMessageEntry{e}})
	if err != nil {
		return err
	}
	if !okStatus(r.GetStatus()) {
		return fmt.Errorf("ack: %v", r.GetStatus())
	}
	return nil
}

func runRecv(o opts) {
	s := openSession(o, consumerSettings(o.topic, o.group, pb.ClientType_SIMPLE_CONSUMER))
	s.heartbeat(o.group, pb.ClientType_SIMPLE_CONSUMER)
	mq := s.receiveQueue(o.topic, o.group)
	var acked, failed, receives, empty atomic.Int64
	var lastErr atomic.Value
	recvLats, ackLats := make([]lat, o.conc), make([]lat, o.conc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.seconds*float64(time.Second)))
	defer cancel()
	cpu0, t0 := cpuSeconds(), time.Now()
	var last atomic.Int64 // ns since t0 of the last ack
	var wg sync.WaitGroup
	for k := 0; k < o.conc; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for ctx.Err() == nil && (o.max == 0 || acked.Load() < o.max) {
				if dl, ok := ctx.Deadline(); ok && time.Until(dl) < o.poll+time.Second {
					break // a long poll the run's deadline cannot hold is refused (ILLEGAL_POLLING_TIME) at once
				}
				c0 := time.Now()
				got, err := s.receive(ctx, o, mq)
				receives.Add(1)
				if err != nil && ctx.Err() == nil {
					failed.Add(1)
					lastErr.Store(err.Error())
				}
				if len(got) == 0 {
					empty.Add(1)
					continue
				}
				recvLats[k] = append(recvLats[k], time.Since(c0))
				for _, m := range got {
					a0 := time.Now()
					if err := s.ack(context.Background(), o.topic, o.group, m); err != nil {
						failed.Add(1)
						lastErr.Store(err.Error())
						continue
					}
					ackLats[k] = append(ackLats[k], time.Since(a0))
					acked.Add(1)
					last.Store(int64(time.Since(t0)))
				}
			}
			cancel() // the others stop their long polls
		}(k)
	}
	wg.Wait()
	elapsed := time.Duration(last.Load()).Seconds()
	r50, r99, _ := percentiles(recvLats)
	a50, a99, _ := percentiles(ackLats)
	s.close(o.group)
	f := event.Fields{"mode": "recv", "acked": acked.Load(), "failed": failed.Load(), "receives": receives.Load(),
		"empty_receives": empty.Load(), "seconds": elapsed, "tps": float64(acked.Load()) / max(elapsed, 1e-9),
		"p50_ms": a50, "p99_ms": a99, "recv_p50_ms": r50, "recv_p99_ms": r99, "client_cpu_s": cpuSeconds() - cpu0,
		"conc": o.conc}
	if e := lastErr.Load(); e != nil {
		f["last_error"] = e
	}
	event.Emit("result", f)
}

func (s *session) syncLite(topic, group string, names []string) {
	ctx, cancel := context.WithTimeout(s.ctx(context.Background()), 15*time.Second)
	defer cancel()
	r, err := s.stub.SyncLiteSubscription(ctx, &pb.SyncLiteSubscriptionRequest{
		Action: pb.LiteSubscriptionAction_COMPLETE_ADD, Topic: &pb.Resource{Name: topic},
		Group: &pb.Resource{Name: group}, LiteTopicSet: names})
	event.Check("sync lite subscription", err)
	if !okStatus(r.GetStatus()) {
		event.Fail(fmt.Errorf("sync lite subscription: %v", r.GetStatus()))
	}
}

func runLite(o opts) {
	names := make([]string, o.liteTopics)
	for i := range names {
		names[i] = fmt.Sprintf("lt-%d", i)
	}
	consumers := make([]*session, o.consumers)
	for i := range consumers {
		c := openSession(o, consumerSettings(o.topic, o.group, pb.ClientType_LITE_PUSH_CONSUMER))
		c.heartbeat(o.group, pb.ClientType_LITE_PUSH_CONSUMER)
		var mine []string
		for j := i; j < len(names); j += o.consumers {
			mine = append(mine, names[j])
		}
		c.syncLite(o.topic, o.group, mine)
		consumers[i] = c
	}
	p := openSession(o, producerSettings(o.topic))
	p.heartbeat("", pb.ClientType_PRODUCER)
	mq := consumers[0].receiveQueue(o.topic, o.group)
	b := body(max(o.size, 8))
	var sent, got, acked, failed atomic.Int64
	var lastErr atomic.Value
	fail := func(err error) {
		failed.Add(1)
		lastErr.Store(err.Error())
	}
	run := time.Duration(o.seconds * float64(time.Second))
	sendCtx, stopSend := context.WithTimeout(context.Background(), run)
	defer stopSend()
	recvCtx, stopRecv := context.WithCancel(context.Background())
	cpu0, t0 := cpuSeconds(), time.Now()
	var wg, cwg sync.WaitGroup
	for k := 0; k < o.conc; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for i := k; sendCtx.Err() == nil && (o.max == 0 || sent.Load() < o.max); i += o.conc {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r, err := p.stub.SendMessage(p.ctx(ctx), &pb.SendMessageRequest{Messages: []*pb.Message{
					message(o.topic, b, names[i%len(names)])}})
				cancel()
				switch {
				case err != nil:
					fail(err)
				case !okStatus(r.GetStatus()):
					fail(fmt.Errorf("lite send: %v", r.GetStatus()))
				default:
					sent.Add(1)
				}
			}
		}(k)
	}
	lats := make([]lat, len(consumers))
	for i, c := range consumers {
		cwg.Add(1)
		go func(i int, c *session) {
			defer cwg.Done()
			for recvCtx.Err() == nil {
				msgs, err := c.receive(recvCtx, o, mq)
				if err != nil && recvCtx.Err() == nil {
					fail(err)
				}
				now := time.Now().UnixNano()
				for _, m := range msgs {
					got.Add(1)
					if len(m.body) >= 8 {
						lats[i] = append(lats[i], time.Duration(now-int64(binary.BigEndian.Uint64(m.body))))
					}
					if err := c.ack(context.Background(), o.topic, o.group, m); err != nil {
						fail(err)
						continue
					}
					acked.Add(1)
				}
			}
		}(i, c)
	}
	wg.Wait()
	sendDone := time.Since(t0)
	// the consumers take what is still on its way: until all that was sent is acked, or 10 s more
	deadline := time.Now().Add(10 * time.Second)
	for acked.Load() < sent.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(t0).Seconds()
	stopRecv()
	cwg.Wait()
	p50, p99, _ := percentiles(lats)
	p.close("")
	for _, c := range consumers {
		c.close(o.group)
	}
	f := event.Fields{"mode": "lite", "sent": sent.Load(), "received": got.Load(), "acked": acked.Load(),
		"failed": failed.Load(), "seconds": elapsed, "send_seconds": sendDone.Seconds(),
		"tps": float64(acked.Load()) / elapsed, "p50_ms": p50, "p99_ms": p99, "client_cpu_s": cpuSeconds() - cpu0,
		"conc": o.conc, "consumers": o.consumers, "lite_topics": o.liteTopics}
	if e := lastErr.Load(); e != nil {
		f["last_error"] = e
	}
	event.Emit("result", f)
}

// ------------------------------------------------------------------------------------------------ null server

type null struct {
	pb.UnimplementedMessagingServiceServer
	addr *pb.Endpoints
	body []byte
	seq  atomic.Int64
}

var ok = &pb.Status{Code: pb.Code_OK, Message: "OK"}

func (n *null) queues(topic *pb.Resource) []*pb.MessageQueue {
	var out []*pb.MessageQueue
	for i := 0; i < 8; i++ {
		out = append(out, &pb.MessageQueue{Topic: topic, Id: int32(i), Permission: pb.Permission_READ_WRITE,
			Broker:             &pb.Broker{Name: "null", Endpoints: n.addr},
			AcceptMessageTypes: []pb.MessageType{pb.MessageType_NORMAL, pb.MessageType_LITE}})
	}
	return out
}

func (n *null) QueryRoute(_ context.Context, r *pb.QueryRouteRequest) (*pb.QueryRouteResponse, error) {
	return &pb.QueryRouteResponse{Status: ok, MessageQueues: n.queues(r.GetTopic())}, nil
}

func (n *null) Heartbeat(context.Context, *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	return &pb.HeartbeatResponse{Status: ok}, nil
}

func (n *null) QueryAssignment(_ context.Context, r *pb.QueryAssignmentRequest) (*pb.QueryAssignmentResponse, error) {
	return &pb.QueryAssignmentResponse{Status: ok, Assignments: []*pb.Assignment{{
		MessageQueue: &pb.MessageQueue{Topic: r.GetTopic(), Id: -1, Permission: pb.Permission_READ_WRITE,
			Broker: &pb.Broker{Name: "null", Endpoints: n.addr}}}}}, nil
}

func (n *null) SendMessage(_ context.Context, r *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	out := &pb.SendMessageResponse{Status: ok}
	for i, m := range r.GetMessages() {
		out.Entries = append(out.Entries, &pb.SendResultEntry{Status: ok,
			MessageId: m.GetSystemProperties().GetMessageId(), Offset: n.seq.Add(1) + int64(i)})
	}
	return out, nil
}

func (n *null) ReceiveMessage(r *pb.ReceiveMessageRequest, stream pb.MessagingService_ReceiveMessageServer) error {
	if err := stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Status{Status: ok}}); err != nil {
		return err
	}
	for i := int32(0); i < r.GetBatchSize(); i++ {
		seq := n.seq.Add(1)
		b := make([]byte, len(n.body))
		copy(b, n.body)
		handle, attempt := fmt.Sprintf("null-%d", seq), int32(1)
		binary.BigEndian.PutUint64(b, uint64(time.Now().UnixNano()))
		sp := &pb.SystemProperties{MessageId: fmt.Sprintf("01NULL%028d", seq), BodyEncoding: pb.Encoding_IDENTITY,
			MessageType: pb.MessageType_NORMAL, ReceiptHandle: &handle, DeliveryAttempt: &attempt,
			BornTimestamp: timestamppb.Now(), StoreTimestamp: timestamppb.Now(), BornHost: "null",
			StoreHost: "null", BodyDigest: &pb.Digest{Type: pb.DigestType_MD5, Checksum: "0"}}
		if strings.HasPrefix(r.GetGroup().GetName(), "Lite") {
			lt := fmt.Sprintf("lt-%d", seq%100)
			sp.LiteTopic, sp.MessageType = &lt, pb.MessageType_LITE
		}
		if err := stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Message{
			Message: &pb.Message{Topic: r.GetMessageQueue().GetTopic(), SystemProperties: sp, Body: b}}}); err != nil {
			return err
		}
	}
	return stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_DeliveryTimestamp{
		DeliveryTimestamp: timestamppb.Now()}})
}

func (n *null) AckMessage(_ context.Context, r *pb.AckMessageRequest) (*pb.AckMessageResponse, error) {
	out := &pb.AckMessageResponse{Status: ok}
	for _, e := range r.GetEntries() {
		out.Entries = append(out.Entries, &pb.AckMessageResultEntry{MessageId: e.GetMessageId(),
			ReceiptHandle: e.GetReceiptHandle(), Status: ok})
	}
	return out, nil
}

func (n *null) SyncLiteSubscription(context.Context, *pb.SyncLiteSubscriptionRequest) (*pb.SyncLiteSubscriptionResponse, error) {
	return &pb.SyncLiteSubscriptionResponse{Status: ok}, nil
}

func (n *null) NotifyClientTermination(context.Context, *pb.NotifyClientTerminationRequest) (*pb.NotifyClientTerminationResponse, error) {
	return &pb.NotifyClientTerminationResponse{Status: ok}, nil
}

func (n *null) Telemetry(stream pb.MessagingService_TelemetryServer) error {
	for {
		cmd, err := stream.Recv()
		if err != nil {
			return nil
		}
		if st := cmd.GetSettings(); st != nil {
			if err := stream.Send(&pb.TelemetryCommand{Status: ok, Command: &pb.TelemetryCommand_Settings{
				Settings: st}}); err != nil {
				return nil
			}
		}
	}
}

func runNull(o opts) {
	lis, err := net.Listen("tcp", o.listen)
	event.Check("listen", err)
	addr := lis.Addr().String()
	n := &null{addr: endpoints(addr), body: body(max(o.size, 8))}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	pb.RegisterMessagingServiceServer(srv, n)
	event.Emit("listening", event.Fields{"addr": addr})
	event.Check("serve", srv.Serve(lis))
}
