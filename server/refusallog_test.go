package server

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/testkit/testutil"
)

// refusalLines are the "request refused" lines of a JSON log.
func refusalLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON log line: %q: %v", sc.Text(), err)
		}
		if m["msg"] == "request refused" {
			out = append(out, m)
		}
	}
	return out
}

// A refused request (unary or on a session stream) is logged at debug
// level with its procedure and reason, and not at all at info level.
func TestRefusalsLoggedAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		t.Run(level.String(), func(t *testing.T) {
			logs := &testutil.Buffer{}
			_, url := startServerWith(t, Config{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))})
			ctx := context.Background()
			c := protocols(url)[1]
			a, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "x", Owner: "A", Ttl: durationpb.New(time.Hour)}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "x", Owner: "B", Ttl: durationpb.New(time.Hour)})); err == nil {
				t.Fatal("second acquire granted")
			}
			if _, err := c.locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: "x", Token: a.Msg.Lease.Token + 1})); err == nil {
				t.Fatal("release with another token accepted")
			}
			sc := sessionClients(url)[0].c
			id := openSession(t, sc, time.Minute)
			ts := startStream(t, sc, &fencev1.SessionRequest{Session: id})
			refusedWith(t, ts.call(&fencev1.SessionRequest{Call: 1, Seq: 1, Ack: 1, Op: acquireOp("x", "C", 0)}), "BUSY")

			got := refusalLines(t, logs.String())
			if level == slog.LevelInfo {
				if len(got) != 0 {
					t.Fatalf("refusals logged at info level: %v", got)
				}
				return
			}
			want := []struct{ proc, reason string }{
				{"/fence.v1.LockService/Acquire", "BUSY"},
				{"/fence.v1.LockService/Release", "UNKNOWN_TOKEN"},
				{"/fence.v1.SessionService/Stream", "BUSY"},
			}
			if len(got) != len(want) {
				t.Fatalf("refusal lines %v, want %d", got, len(want))
			}
			for i, w := range want {
				if got[i]["level"] != "DEBUG" || got[i]["procedure"] != w.proc || got[i]["reason"] != w.reason || got[i]["err"] == "" {
					t.Errorf("line %d = %v, want DEBUG %s %s with the message", i, got[i], w.proc, w.reason)
				}
			}
		})
	}
}
