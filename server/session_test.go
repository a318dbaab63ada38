package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// The session flow as curl sends it: plain JSON POSTs to Open, a
// session-bound acquire (no ttl) and a sequenced add, KeepAlive, Close;
// the lock is free once the session is closed.
func TestSessionJSONFlow(t *testing.T) {
	_, url := startServer(t)
	post := func(path, body string, out any) {
		t.Helper()
		r := postJSON(t, url, path, []byte(body), nil)
		if r.status != http.StatusOK {
			t.Fatalf("POST %s %s: status %d body %s", path, body, r.status, r.body)
		}
		if err := json.Unmarshal([]byte(r.body), out); err != nil {
			t.Fatalf("POST %s: %v in %s", path, err, r.body)
		}
	}
	var open struct {
		Session struct {
			Id             uint64 // 64-bit integers are JSON numbers
			Ttl, Remaining string
		}
	}
	post("/fence.v1.SessionService/Open", `{"ttl":"10s"}`, &open)
	if open.Session.Id == 0 || open.Session.Ttl != "10s" || open.Session.Remaining == "" {
		t.Fatalf("open = %+v", open)
	}
	// Requests take 64-bit integers as numbers or decimal strings.
	id := strconv.FormatUint(open.Session.Id, 10)
	var acq struct {
		Lease struct {
			Token uint64
			Ttl   string
		}
	}
	post("/fence.v1.LockService/Acquire", `{"name":"j","owner":"curl","session":{"id":"`+id+`","seq":"1","ack":"1"}}`, &acq)
	if acq.Lease.Token == 0 || acq.Lease.Ttl != "10s" {
		t.Fatalf("session-bound acquire = %+v, want a lease with the session's ttl", acq)
	}
	var add struct {
		Value    int64
		Replayed bool
	}
	body := `{"resource":"jr","token":` + strconv.FormatUint(acq.Lease.Token, 10) + `,"delta":"3","session":{"id":"` + id + `","seq":"2","ack":"2"}}`
	post("/fence.v1.ResourceService/Add", body, &add)
	if add.Value != 3 || add.Replayed {
		t.Fatalf("add = %+v", add)
	}
	post("/fence.v1.ResourceService/Add", body, &add)
	if add.Value != 3 || !add.Replayed {
		t.Fatalf("retried add (same seq) = %+v, want the saved 3, replayed", add)
	}
	var ka struct{ Session struct{ Id uint64 } }
	post("/fence.v1.SessionService/KeepAlive", `{"session":"`+id+`"}`, &ka)
	if ka.Session.Id != open.Session.Id {
		t.Fatalf("keepalive = %+v", ka)
	}
	var closed map[string]any
	post("/fence.v1.SessionService/Close", `{"session":"`+id+`"}`, &closed)
	if li := lockOf(t, url, "j"); li.GetLease() != nil {
		t.Fatalf("lock after Close = %v, want free", li)
	}
	r := postJSON(t, url, "/fence.v1.SessionService/KeepAlive", []byte(`{"session":"`+id+`"}`), nil)
	if r.status != http.StatusBadRequest || r.code != "failed_precondition" || r.detail.GetReason() != "SESSION_EXPIRED" || fmt.Sprint(r.detail.GetSession()) != id {
		t.Fatalf("keepalive after Close: status %d body %s, want failed_precondition SESSION_EXPIRED", r.status, r.body)
	}
}

// Malformed and out-of-bounds session requests are refused naming the
// field, as curl sees them (unknown fields included) and through a client.
func TestSessionBadInput(t *testing.T) {
	_, url := startServer(t)
	for _, tc := range []struct {
		path, body, field, bound string
	}{
		{"/fence.v1.SessionService/Open", `{"ttl":"soon"}`, "ttl", "duration"},
		{"/fence.v1.SessionService/Open", `{"tll":"1s"}`, "tll", "ttl"},
		{"/fence.v1.SessionService/Open", `{"ttl": `, "body", "a JSON object"},
		{"/fence.v1.SessionService/Open", `{}`, "ttl", "set"},
		{"/fence.v1.SessionService/Open", `{"ttl":"0.005s"}`, "ttl", "at least"},
		{"/fence.v1.SessionService/Open", `{"ttl":"90000s"}`, "ttl", "at most"},
		{"/fence.v1.SessionService/Open", `{"ttl":"1s","requestId":"` + strings.Repeat("i", 257) + `"}`, "request_id", "at most"},
		{"/fence.v1.SessionService/KeepAlive", `{}`, "session", "set"},
		{"/fence.v1.SessionService/KeepAlive", `{"session":"-1"}`, "session", "unsigned"},
		{"/fence.v1.SessionService/Close", `{"session":"0"}`, "session", "set"},
		{"/fence.v1.LockService/Acquire", `{"name":"x"}`, "ttl", "set"},
		{"/fence.v1.LockService/Acquire", `{"name":"x","ttl":"1s","session":{"seq":"1"}}`, "session.id", "set"},
		{"/fence.v1.LockService/Acquire", `{"name":"x","session":{"id":"0","seq":"1"}}`, "session.id", "set"},
		{"/fence.v1.LockService/Acquire", `{"name":"x","session":{"id":"1","seq":"2","ack":"3"}}`, "session.ack", "at most seq"},
		{"/fence.v1.ResourceService/Write", `{"resource":"r","token":"1","session":{"ack":"1"}}`, "session.id", "set"},
		{"/fence.v1.LockService/Release", `{"name":"x","token":"1","session":{"id":"1","sequence":"1"}}`, "session.sequence", "a field of fence.v1.SessionRef (id, seq, ack)"},
		{"/fence.v1.LockService/Release", `{"name":"x","token":"1","session":{"id":"1","seq":"many"}}`, "session.seq", "unsigned 64-bit"},
		{"/fence.v1.LockService/Release", `{"name":"x","token":"1","session":7}`, "session", "a JSON object"},
	} {
		r := postJSON(t, url, tc.path, []byte(tc.body), nil)
		wantInvalidJSON(t, tc.path+" "+tc.body, r, tc.field, tc.bound, "")
	}
	// The same through a Connect client.
	c := sessionClients(url)[0].c
	_, err := c.Open(context.Background(), connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Millisecond)}))
	checkInvalid(t, err, "ttl")
}

// A unary call bound to a session: an acquire without ttl lives with the
// session (its TTL is the session's), a sequenced write is applied once,
// and ending the session releases the lease.
func TestUnarySessionBound(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	sc := sessionClients(url)[0].c
	for _, c := range protocols(url) {
		t.Run(c.name, func(t *testing.T) {
			id := openSession(t, sc, time.Hour)
			a, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "u-" + c.name, Owner: "me", Session: &fencev1.SessionRef{Id: id, Seq: 1, Ack: 1}}))
			if err != nil || a.Msg.Lease.GetTtl().AsDuration() != time.Hour {
				t.Fatalf("session-bound acquire = %v, %v; want the session's ttl", a, err)
			}
			tok := a.Msg.Lease.GetToken()
			w := &fencev1.WriteRequest{Resource: "ur-" + c.name, Token: tok, Value: []byte("x"), Session: &fencev1.SessionRef{Id: id, Seq: 2, Ack: 2}}
			w1, err := c.res.Write(ctx, connect.NewRequest(w))
			if err != nil || w1.Msg.Replayed {
				t.Fatalf("write = %v, %v", w1, err)
			}
			w2, err := c.res.Write(ctx, connect.NewRequest(w))
			if err != nil || !w2.Msg.Replayed || w2.Msg.State.GetVersion() != w1.Msg.State.GetVersion() {
				t.Fatalf("retried write = %v, %v; want replayed, version %d", w2, err, w1.Msg.State.GetVersion())
			}
			if _, err := sc.Close(ctx, connect.NewRequest(&fencev1.CloseSessionRequest{Session: id})); err != nil {
				t.Fatal(err)
			}
			if li := lockOf(t, url, "u-"+c.name); li.GetLease() != nil {
				t.Fatalf("lock after Close = %v, want free", li)
			}
			// A sequenced call on the closed session is SESSION_EXPIRED.
			_, err = c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: "ur-" + c.name, Token: tok, Value: []byte("y"), Session: &fencev1.SessionRef{Id: id, Seq: 3, Ack: 3}}))
			if !errors.Is(apierr.FromConnect(err), fence.ErrSessionExpired) {
				t.Fatalf("sequenced write on the closed session = %v, want SESSION_EXPIRED", err)
			}
		})
	}
}
