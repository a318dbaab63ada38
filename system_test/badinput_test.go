//go:build e2e

package system_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// badInput is one request the server must refuse with invalid_argument.
type badInput struct {
	name      string
	procedure string
	json      []byte // the body of a plain JSON POST
	grpc      []byte // the protobuf message sent over gRPC
	// field is the field the ErrorDetail must name. "" for inputs refused
	// while decoding a gRPC message (malformed bodies, invalid UTF-8
	// strings): Connect answers those with invalid_argument before any
	// handler runs, and with no ErrorDetail.
	field string
}

// jsonFields are the fields named over JSON where gRPC names none: the
// server checks a JSON body itself before Connect decodes it ("body" when
// it is not a JSON object at all).
var jsonFields = map[string]string{
	"name not UTF-8": "name",
	"malformed body": "body",
}

func mustProto(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// invalidUTF8Acquire is an AcquireRequest whose name is the byte 0xff. The Go
// protobuf library refuses to marshal that, so it is built by hand.
func invalidUTF8Acquire() []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte{0xff})
	return append(b, mustProto(&fencev1.AcquireRequest{Ttl: durationpb.New(5 * time.Second)})...)
}

func badInputs() []badInput {
	long := func(n int) string { return strings.Repeat("n", n) }
	acquire := func(m *fencev1.AcquireRequest) []byte { return mustProto(m) }
	sec5 := durationpb.New(5 * time.Second)
	h25 := durationpb.New(25 * time.Hour)
	bigValue := make([]byte, 1<<20+1)
	return []badInput{
		{"ttl 5ms", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"bad","ttl":"0.005s"}`), acquire(&fencev1.AcquireRequest{Name: "bad", Ttl: durationpb.New(5 * time.Millisecond)}), "ttl"},
		{"ttl 25h", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"bad","ttl":"90000s"}`), acquire(&fencev1.AcquireRequest{Name: "bad", Ttl: h25}), "ttl"},
		{"missing ttl", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"bad"}`), acquire(&fencev1.AcquireRequest{Name: "bad"}), "ttl"},
		{"wait -1s", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"bad","ttl":"5s","wait":"-1s"}`), acquire(&fencev1.AcquireRequest{Name: "bad", Ttl: sec5, Wait: durationpb.New(-time.Second)}), "wait"},
		{"wait 25h", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"bad","ttl":"5s","wait":"90000s"}`), acquire(&fencev1.AcquireRequest{Name: "bad", Ttl: sec5, Wait: h25}), "wait"},
		{"lock_delay 25h", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"bad","ttl":"5s","lockDelay":"90000s"}`), acquire(&fencev1.AcquireRequest{Name: "bad", Ttl: sec5, LockDelay: h25}), "lock_delay"},
		{"empty name", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"","ttl":"5s"}`), acquire(&fencev1.AcquireRequest{Ttl: sec5}), "name"},
		{"name of 513 bytes", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"` + long(513) + `","ttl":"5s"}`), acquire(&fencev1.AcquireRequest{Name: long(513), Ttl: sec5}), "name"},
		{"name not UTF-8", fencev1connect.LockServiceAcquireProcedure,
			[]byte("{\"name\":\"\xff\",\"ttl\":\"5s\"}"), invalidUTF8Acquire(), ""},
		{"owner of 257 bytes", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name":"bad","owner":"` + long(257) + `","ttl":"5s"}`), acquire(&fencev1.AcquireRequest{Name: "bad", Owner: long(257), Ttl: sec5}), "owner"},
		{"value of 1 MiB + 1", fencev1connect.ResourceServiceWriteProcedure,
			[]byte(`{"resource":"bad","token":1,"value":"` + base64.StdEncoding.EncodeToString(bigValue) + `"}`),
			mustProto(&fencev1.WriteRequest{Resource: "bad", Token: 1, Value: bigValue}), "value"},
		{"renew token 0", fencev1connect.LockServiceRenewProcedure,
			[]byte(`{"name":"keep","token":0}`), mustProto(&fencev1.RenewRequest{Name: "keep"}), "token"},
		{"release token 0", fencev1connect.LockServiceReleaseProcedure,
			[]byte(`{"name":"keep","token":"0"}`), mustProto(&fencev1.ReleaseRequest{Name: "keep"}), "token"},
		{"write token 0", fencev1connect.ResourceServiceWriteProcedure,
			[]byte(`{"resource":"keep-res","token":0,"value":"eA=="}`), mustProto(&fencev1.WriteRequest{Resource: "keep-res", Value: []byte("x")}), "token"},
		{"add token 0", fencev1connect.ResourceServiceAddProcedure,
			[]byte(`{"resource":"keep-res","delta":"1"}`), mustProto(&fencev1.AddRequest{Resource: "keep-res", Delta: 1}), "token"},
		{"malformed body", fencev1connect.LockServiceAcquireProcedure,
			[]byte(`{"name": "bad", "ttl": `), []byte{0xff, 0xff, 0xff}, ""},
	}
}

// TestBadInput sends every refused input of the API bounds (G7) to a real
// server over plain JSON and over gRPC, checks each is refused with
// invalid_argument and an ErrorDetail naming the field and its bound, and
// then checks that the server still serves and its state is untouched.
func TestBadInput(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	c := connectAPI(srv)

	kept, err := c.acquire(ctx, "keep", "keeper", time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.write(ctx, "keep-res", kept.GetToken(), "before"); err != nil {
		t.Fatal(err)
	}

	for _, in := range badInputs() {
		t.Run("json/"+in.name, func(t *testing.T) {
			status, body := postJSON(t, srv, in.procedure, in.json)
			je, detail, err := decodeJSONError(body)
			if err != nil {
				t.Fatalf("HTTP %d: %v", status, err)
			}
			if status != http.StatusBadRequest || je.Code != "invalid_argument" {
				t.Fatalf("HTTP %d code %q (%s), want 400 invalid_argument", status, je.Code, body)
			}
			field := in.field
			if f, ok := jsonFields[in.name]; ok {
				field = f
			}
			checkDetail(t, detail, field, je.Message)
		})
		t.Run("grpc/"+in.name, func(t *testing.T) {
			err := rawGRPC(ctx, srv, in.procedure, in.grpc)
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("got %v (code %v), want invalid_argument", err, connect.CodeOf(err))
			}
			checkDetail(t, errorDetail(err), in.field, err.Error())
		})
	}

	// The server still serves, and nothing changed.
	if !srv.Running() {
		t.Fatalf("the server exited: %v", srv.ExitState())
	}
	lock, err := c.get(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if lock.GetLease().GetToken() != kept.GetToken() || lock.GetLease().GetOwner() != "keeper" {
		t.Errorf("lock keep after the bad inputs: %v, want still held by keeper with token %d", lock, kept.GetToken())
	}
	st, err := c.read(ctx, "keep-res")
	if err != nil {
		t.Fatal(err)
	}
	if string(st.GetValue()) != "before" || st.GetVersion() != 1 || st.GetLastToken() != kept.GetToken() {
		t.Errorf("keep-res after the bad inputs: %v, want value \"before\", version 1, last_token %d", st, kept.GetToken())
	}
	list, err := c.Locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if locks := list.Msg.GetLocks(); len(locks) != 1 || locks[0].GetName() != "keep" {
		t.Errorf("locks after the bad inputs: %v, want only \"keep\"", locks)
	}
	after, err := c.acquire(ctx, "after", "checker", time.Minute, 0)
	if err != nil {
		t.Fatalf("acquire after the bad inputs: %v", err)
	}
	if after.GetToken() != kept.GetToken()+1 {
		t.Errorf("token after the bad inputs %d, want %d: a refused input must not consume a token", after.GetToken(), kept.GetToken()+1)
	}
	srv.Stop()
}

// checkDetail checks the ErrorDetail of an invalid_argument refusal: it must
// say INVALID_ARGUMENT, name field and state a bound. For decode-level
// refusals (field "") Connect sends no detail; if one is there it must still
// say INVALID_ARGUMENT.
func checkDetail(t *testing.T, d *fencev1.ErrorDetail, field, message string) {
	t.Helper()
	if field == "" {
		if d != nil && d.GetReason() != "INVALID_ARGUMENT" {
			t.Errorf("detail %v, want reason INVALID_ARGUMENT", d)
		}
		return
	}
	if d == nil {
		t.Fatalf("no fence.v1.ErrorDetail in the refusal %q", message)
	}
	if d.GetReason() != "INVALID_ARGUMENT" || d.GetField() != field || d.GetBound() == "" {
		t.Errorf("detail reason %q field %q bound %q, want INVALID_ARGUMENT, %q and a bound (message %q)", d.GetReason(), d.GetField(), d.GetBound(), field, message)
	}
}

// rawMessage is a protobuf message already encoded; rawCodec sends it as is,
// so that the test can send bytes the protobuf library would not marshal.
// Connect also uses the codec for the error status, a real proto.Message.
type rawMessage struct{ b []byte }

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *rawMessage:
		return m.b, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(b []byte, v any) error {
	switch m := v.(type) {
	case *rawMessage:
		m.b = append([]byte(nil), b...)
		return nil
	case proto.Message: // the grpc-status-details-bin trailer
		return proto.Unmarshal(b, m)
	}
	return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
}

// rawGRPC sends msg to procedure over gRPC (h2c) and returns the error.
func rawGRPC(ctx context.Context, srv *fenceServer, procedure string, msg []byte) error {
	cl := connect.NewClient[rawMessage, rawMessage](h2cClient(), srv.URL()+procedure,
		connect.WithGRPC(), connect.WithCodec(rawCodec{}))
	_, err := cl.CallUnary(ctx, connect.NewRequest(&rawMessage{b: msg}))
	if err == nil {
		return errors.New("accepted")
	}
	return err
}
