package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// Fuzzing the request decoding through the real handlers: a real server
// (real node, durable raft log in a temp dir) is built once per fuzz
// process and its Handler is called in-process with the fuzzed body on a
// fuzzed procedure. Every reply must be a success whose body decodes as the
// procedure's response, or a well-formed Connect error: a known code with
// the HTTP status Connect maps it to, never internal or unknown, and a
// Fence ErrorDetail whose reason maps to that code wherever the server
// owes one. After every input the server must still answer a good request.
//
// The inputs are (proc, flags, body): proc picks a procedure (modulo
// len(fuzzProcs)); flags bit 0 gzips the body (Content-Encoding: gzip, so
// the plain JSON handler gunzips it first), bit 1 sends the raw
// bytes labelled gzip (the server's gzip reader gets garbage), bit 2 adds
// "; charset=utf-8" to the JSON media type.
//
// Run: TMPDIR=/dev/shm go test -run '^$' -fuzz '^FuzzJSONRequest$' -fuzztime 3m -parallel 1 ./server
// (the data dir on tmpfs makes each raft fsync cheap). Seeds live in
// testdata/fuzz/FuzzJSONRequest and testdata/fuzz/FuzzProtoRequest.

// fuzzProc is a procedure and its response message.
type fuzzProc struct {
	path  string
	unary bool
	resp  func() proto.Message
}

// fuzzProcs: the API's twelve unary procedures, the bidi stream (HTTP/1.1
// requests to it are answered 505 by Connect), and a path that is none.
var fuzzProcs = []fuzzProc{
	{fencev1connect.LockServiceAcquireProcedure, true, func() proto.Message { return new(fencev1.AcquireResponse) }},
	{fencev1connect.LockServiceRenewProcedure, true, func() proto.Message { return new(fencev1.RenewResponse) }},
	{fencev1connect.LockServiceReleaseProcedure, true, func() proto.Message { return new(fencev1.ReleaseResponse) }},
	{fencev1connect.LockServiceGetProcedure, true, func() proto.Message { return new(fencev1.GetResponse) }},
	{fencev1connect.LockServiceListProcedure, true, func() proto.Message { return new(fencev1.ListResponse) }},
	{fencev1connect.ResourceServiceWriteProcedure, true, func() proto.Message { return new(fencev1.WriteResponse) }},
	{fencev1connect.ResourceServiceAddProcedure, true, func() proto.Message { return new(fencev1.AddResponse) }},
	{fencev1connect.ResourceServiceReadProcedure, true, func() proto.Message { return new(fencev1.ReadResponse) }},
	{fencev1connect.ResourceServiceDeleteProcedure, true, func() proto.Message { return new(fencev1.DeleteResponse) }},
	{fencev1connect.SessionServiceOpenProcedure, true, func() proto.Message { return new(fencev1.OpenSessionResponse) }},
	{fencev1connect.SessionServiceKeepAliveProcedure, true, func() proto.Message { return new(fencev1.KeepAliveResponse) }},
	{fencev1connect.SessionServiceCloseProcedure, true, func() proto.Message { return new(fencev1.CloseSessionResponse) }},
	{fencev1connect.SessionServiceStreamProcedure, false, nil},
	{"/fence.v1.LockService/Nope", false, nil},
}

const (
	fuzzGzip        = 1 << iota // gzip the body
	fuzzBadGzip                 // label the raw body gzip
	fuzzJSONCharset             // application/json; charset=utf-8
)

// fuzzRequestTimeout bounds one fuzzed request: an acquire that waits is cut
// (deadline_exceeded) rather than stall the fuzzer.
const fuzzRequestTimeout = 250 * time.Millisecond

// fuzzServer builds a real server for a fuzz target, closed at cleanup.
func fuzzServer(tb testing.TB) *Server {
	tb.Helper()
	s, err := newOverFake(tb, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, state.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// serveFuzz sends body to proc through s's handler and returns the reply.
func serveFuzz(s *Server, path, contentType string, flags uint8, body []byte, timeout time.Duration) *httptest.ResponseRecorder {
	enc := ""
	switch {
	case flags&fuzzGzip != 0:
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body, enc = b.Bytes(), "gzip"
	case flags&fuzzBadGzip != 0:
		enc = "gzip"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if enc != "" {
		req.Header.Set("Content-Encoding", enc)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}

// connectErrorBody is a Connect unary error as it is sent.
type connectErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"details"`
}

// checkFuzzReply fails t if the reply to a request of p is neither a
// success nor a well-formed Connect error.
// plainJSON: the body went to serveJSON uncompressed (application/json),
// which names the field of every refusal it makes.
func checkFuzzReply(t *testing.T, p fuzzProc, binary, plainJSON bool, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Encoding") == "gzip" {
		// A reply of 4 KiB or more to a gzipped request is gzipped
		// (compressMinBytes): a List of many locks.
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == nil {
			body, err = io.ReadAll(zr)
		}
		if err != nil {
			t.Fatalf("%s: a reply labelled gzip does not decompress (%v): %q", p.path, err, rec.Body.Bytes())
		}
	}
	if !p.unary {
		// The stream over HTTP/1.1 is refused by Connect (505); an
		// unknown path is the mux's 404.
		if rec.Code == http.StatusOK || rec.Code == http.StatusInternalServerError {
			t.Fatalf("%s: status %d body %q", p.path, rec.Code, body)
		}
		return
	}
	if rec.Code == http.StatusOK {
		msg := p.resp()
		var err error
		wantCT := "application/json"
		if binary {
			wantCT = "application/proto"
			err = proto.Unmarshal(body, msg)
		} else {
			err = protojson.Unmarshal(body, msg)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, wantCT) || err != nil {
			t.Fatalf("%s: 200 with content type %q and a body that does not decode as %T (%v): %q", p.path, ct, msg, err, body)
		}
		return
	}
	var e connectErrorBody
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: status %d with content type %q, want a Connect error (application/json): %q", p.path, rec.Code, ct, body)
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("%s: status %d, error body is not JSON (%v): %q", p.path, rec.Code, err, body)
	}
	var code connect.Code
	if err := code.UnmarshalText([]byte(e.Code)); err != nil {
		t.Fatalf("%s: status %d, unknown code %q: %q", p.path, rec.Code, e.Code, body)
	}
	if code == connect.CodeInternal || code == connect.CodeUnknown || e.Message == "" {
		t.Fatalf("%s: status %d, code %s (an untyped failure) or no message: %q", p.path, rec.Code, code, body)
	}
	if want := fuzzCodeStatus[code]; rec.Code != want {
		t.Fatalf("%s: code %s with HTTP status %d, Connect maps it to %d: %q", p.path, code, rec.Code, want, body)
	}
	var detail *fencev1.ErrorDetail
	for _, d := range e.Details {
		if d.Type != "fence.v1.ErrorDetail" {
			t.Fatalf("%s: detail of type %q: %q", p.path, d.Type, body)
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		detail = new(fencev1.ErrorDetail)
		if err != nil || proto.Unmarshal(raw, detail) != nil {
			t.Fatalf("%s: detail does not decode: %q", p.path, body)
		}
		if got := apierr.CodeOf(fence.Reason(detail.GetReason())); got != code {
			t.Fatalf("%s: code %s with a detail of reason %q (code %s): %q", p.path, code, detail.GetReason(), got, body)
		}
	}
	switch code {
	case connect.CodeDeadlineExceeded, connect.CodeCanceled, connect.CodeUnavailable:
		// Our deadline, or the node: no Fence refusal.
	case connect.CodeInvalidArgument:
		// Connect's own decoding errors (binary or compressed bodies)
		// carry no detail; every refusal of a plain JSON body names a
		// field, and never the "not reached" fallback.
		if plainJSON && (detail == nil || detail.GetField() == "") {
			t.Fatalf("%s: invalid_argument of a plain JSON body without a field: %q", p.path, body)
		}
		if detail != nil && detail.GetField() == "body" && strings.Contains(e.Message, "decodes as") {
			t.Fatalf("%s: the fallback refusal (no member to blame) was reached: %q", p.path, body)
		}
	default:
		// failed_precondition, resource_exhausted, already_exists: Fence
		// refusals, which always carry their detail.
		if detail == nil {
			t.Fatalf("%s: %s without a Fence ErrorDetail: %q", p.path, code, body)
		}
	}
}

// fuzzCodeStatus is the Connect protocol's HTTP status of each code.
var fuzzCodeStatus = map[connect.Code]int{
	connect.CodeCanceled: 499, connect.CodeUnknown: 500, connect.CodeInvalidArgument: 400, connect.CodeDeadlineExceeded: 504,
	connect.CodeNotFound: 404, connect.CodeAlreadyExists: 409, connect.CodePermissionDenied: 403, connect.CodeResourceExhausted: 429,
	connect.CodeFailedPrecondition: 400, connect.CodeAborted: 409, connect.CodeOutOfRange: 400, connect.CodeUnimplemented: 501,
	connect.CodeInternal: 500, connect.CodeUnavailable: 503, connect.CodeDataLoss: 500, connect.CodeUnauthenticated: 401,
}

// checkStillServing sends good requests and wants them answered: a read,
// and an acquire that goes through raft and the machine (granted, or BUSY
// when an input holds the lock or put it in lock-delay: a decision of the
// machine either way).
func checkStillServing(t *testing.T, s *Server) {
	t.Helper()
	rec := serveFuzz(s, fencev1connect.LockServiceGetProcedure, "application/json", 0, []byte(`{"name":"fuzz-canary"}`), 10*time.Second)
	var got fencev1.GetResponse
	if rec.Code != http.StatusOK || protojson.Unmarshal(rec.Body.Bytes(), &got) != nil || got.GetLock().GetName() != "fuzz-canary" {
		t.Fatalf("the server no longer answers a good request: %d %q", rec.Code, rec.Body.Bytes())
	}
	rec = serveFuzz(s, fencev1connect.LockServiceAcquireProcedure, "application/json", 0, []byte(`{"name":"fuzz-canary","ttl":"0.01s"}`), 10*time.Second)
	if rec.Code != http.StatusOK && !(rec.Code == http.StatusTooManyRequests && strings.Contains(rec.Body.String(), `lock \"fuzz-canary\" is`)) {
		t.Fatalf("the server no longer applies a good acquire: %d %q", rec.Code, rec.Body.Bytes())
	}
}

// FuzzJSONRequest fuzzes JSON request bodies (Connect unary, application/json).
func FuzzJSONRequest(f *testing.F) {
	f.Add(uint8(0), uint8(0), []byte(`{"name":"a","owner":"o","ttl":"5s"}`))
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, proc, flags uint8, body []byte) {
		p := fuzzProcs[int(proc)%len(fuzzProcs)]
		ct := "application/json"
		if flags&fuzzJSONCharset != 0 {
			ct += "; charset=utf-8"
		}
		rec := serveFuzz(s, p.path, ct, flags, body, fuzzRequestTimeout)
		checkFuzzReply(t, p, false, flags&(fuzzGzip|fuzzBadGzip) == 0, rec)
		checkStillServing(t, s)
	})
}

// FuzzProtoRequest fuzzes binary protobuf request bodies (Connect unary,
// application/proto).
func FuzzProtoRequest(f *testing.F) {
	seed, _ := proto.Marshal(&fencev1.AcquireRequest{Name: "a", Owner: "o"})
	f.Add(uint8(0), uint8(0), seed)
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, proc, flags uint8, body []byte) {
		p := fuzzProcs[int(proc)%len(fuzzProcs)]
		rec := serveFuzz(s, p.path, "application/proto", flags, body, fuzzRequestTimeout)
		checkFuzzReply(t, p, true, false, rec)
		checkStillServing(t, s)
	})
}

// rawMessage is a request message sent as its bytes, unchecked (rawCodec).
type rawMessage struct{ b []byte }

// rawCodec lets a client send any bytes as a binary protobuf message; it
// decodes replies as protobuf.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(m any) ([]byte, error) {
	if r, ok := m.(*rawMessage); ok {
		return r.b, nil
	}
	return proto.Marshal(m.(proto.Message))
}

func (rawCodec) Unmarshal(b []byte, m any) error { return proto.Unmarshal(b, m.(proto.Message)) }

// FuzzStreamRequest fuzzes the messages of SessionService.Stream (binary
// protobuf over HTTP/2, Connect streaming or, flags bit 0, gRPC) on a real
// listener. Each input opens a session, names it in a first message, then
// sends msg1 and msg2 (when not empty), each prefixed with the session's id
// (a later field in the fuzzed bytes overrides it), and reads the replies
// until the stream ends:
//   - a message that does not decode ends the stream with invalid_argument;
//   - otherwise every reply answers a call that was sent and is a result or
//     a typed refusal (an ErrorDetail with a reason and a message);
//   - the stream ends cleanly or with a Connect code that is not internal
//     or unknown;
//   - afterwards the server answers a good request.
func FuzzStreamRequest(f *testing.F) {
	acq, _ := proto.Marshal(&fencev1.SessionRequest{Call: 1, Seq: 1, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: "a", Owner: "o"}}})
	f.Add(uint8(0), acq, []byte{})
	_, url := startServerWith(f, Config{})
	h2 := h2cClient()
	f.Cleanup(h2.CloseIdleConnections)
	opts := []connect.ClientOption{connect.WithCodec(rawCodec{})}
	stream := [2]*connect.Client[rawMessage, fencev1.SessionReply]{
		connect.NewClient[rawMessage, fencev1.SessionReply](h2, url+fencev1connect.SessionServiceStreamProcedure, opts...),
		connect.NewClient[rawMessage, fencev1.SessionReply](h2, url+fencev1connect.SessionServiceStreamProcedure, append(opts, connect.WithGRPC())...),
	}
	sessions := fencev1connect.NewSessionServiceClient(h2, url)
	locks := fencev1connect.NewLockServiceClient(h2, url)
	f.Fuzz(func(t *testing.T, flags uint8, msg1, msg2 []byte) {
		open, err := sessions.Open(context.Background(), connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Minute)}))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		id := open.Msg.GetSession().GetId()
		defer sessions.Close(context.Background(), connect.NewRequest(&fencev1.CloseSessionRequest{Session: id}))
		prefix, _ := proto.Marshal(&fencev1.SessionRequest{Session: id})

		ctx, cancel := context.WithTimeout(context.Background(), 2*fuzzRequestTimeout)
		defer cancel()
		st := stream[flags&1].CallBidiStream(ctx)
		calls := map[uint64]bool{}
		undecodable := false
		st.Send(&rawMessage{prefix}) // names the session: no reply
		for _, msg := range [][]byte{msg1, msg2} {
			if len(msg) == 0 || undecodable {
				continue
			}
			b := append(slices.Clone(prefix), msg...)
			var m fencev1.SessionRequest
			if proto.Unmarshal(b, &m) != nil {
				undecodable = true
			} else {
				calls[m.GetCall()] = true // answered, an op or not
			}
			st.Send(&rawMessage{b}) // a failed send shows in Receive
		}
		st.CloseRequest()
		for {
			r, err := st.Receive()
			if err != nil {
				code := connect.CodeOf(err)
				switch {
				case errors.Is(err, io.EOF):
					if undecodable {
						t.Fatalf("a message that does not decode was taken")
					}
				case code == connect.CodeInternal || code == connect.CodeUnknown:
					t.Fatalf("stream ended with %v", err)
				case undecodable && code != connect.CodeInvalidArgument && code != connect.CodeDeadlineExceeded:
					t.Fatalf("a message that does not decode ended the stream with %v", err)
				}
				break
			}
			if !calls[r.GetCall()] {
				t.Fatalf("reply %v to a call that was not sent (sent %v)", r, calls)
			}
			switch res := r.GetResult().(type) {
			case nil:
				t.Fatalf("reply %v without a result", r)
			case *fencev1.SessionReply_Error:
				if reason := fence.Reason(res.Error.GetReason()); apierr.CodeOf(reason) == connect.CodeUnknown || r.GetMessage() == "" {
					t.Fatalf("refusal %v: unknown reason or no message", r)
				}
			}
		}
		st.CloseResponse()
		g, err := locks.Get(context.Background(), connect.NewRequest(&fencev1.GetRequest{Name: "fuzz-canary"}))
		if err != nil || g.Msg.GetLock().GetName() != "fuzz-canary" {
			t.Fatalf("the server no longer answers a good request: %v %v", g, err)
		}
	})
}

// Regression (FuzzProtoRequest/791d9d198758e446, a fault of the fuzz
// target, not of the server): once the fuzzer had made many locks, a List
// with a gzipped request got a gzipped reply (4 KiB or more), which the
// target read as a body that does not decode. The target now decompresses
// a reply labelled gzip; this test makes such a reply and checks it.
func TestFuzzReplyGzipped(t *testing.T) {
	s := fuzzServer(t)
	for i := range 80 {
		body := fmt.Sprintf(`{"name":"fuzz-gzip-%03d-padding-to-make-the-list-long","ttl":"3600s"}`, i)
		if rec := serveFuzz(s, fencev1connect.LockServiceAcquireProcedure, "application/json", 0, []byte(body), 10*time.Second); rec.Code != http.StatusOK {
			t.Fatalf("acquire: %d %s", rec.Code, rec.Body)
		}
	}
	p := fuzzProcs[4]
	rec := serveFuzz(s, p.path, "application/proto", 0x99, nil, 10*time.Second)
	if p.path != fencev1connect.LockServiceListProcedure || rec.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("%s: reply not gzipped (%d, %q): the test no longer makes the case", p.path, rec.Code, rec.Header())
	}
	checkFuzzReply(t, p, true, false, rec)
}

// Regression (FuzzJSONRequest/439359f841044e62): "{}\f" was refused with
// the fallback the old JSON check called unreachable ("body: must be a JSON
// object that decodes as ..."), because bytes.TrimSpace took the form feed
// for JSON whitespace and the body looked like an empty object. JSON allows
// only space, tab, CR and LF around a value: such a body is malformed JSON,
// refused as such, at the byte where the stray character is.
func TestJSONBodyWithNonJSONSpaceIsMalformed(t *testing.T) {
	s := fuzzServer(t)
	p := fuzzProcs[10] // KeepAlive, as the fuzzer found it
	// at: the stray character's position, counted from 1 as every
	// "malformed JSON (at byte N)" is.
	for body, at := range map[string]int{"{}\f": 3, "\f{}": 1, "{}\v": 3, "{}\u00a0": 3, " {}\u0085": 4} {
		rec := serveFuzz(s, p.path, "application/json", 0, []byte(body), 10*time.Second)
		checkFuzzReply(t, p, false, true, rec)
		want := fmt.Sprintf(`a JSON object, got malformed JSON (at byte %d)`, at)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%q: %d %s, want %q", body, rec.Code, rec.Body, want)
		}
	}
}
