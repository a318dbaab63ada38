//go:build e2e

package system_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/testkit/harness"
)

// bearer adds Authorization: Bearer <token> to every request.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// sessionClient is a gRPC SessionService client over HTTP/2 without TLS,
// authenticated as token.
func sessionClient(t *testing.T, url, token string) fencev1connect.SessionServiceClient {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return fencev1connect.NewSessionServiceClient(&http.Client{Transport: bearer{token, tr}}, url, connect.WithGRPC())
}

// openStream opens a session and a stream on it, and waits for the reply
// to a keepalive sent as the stream's first message: the stream holds its
// slot once that comes. err is the stream's refusal, if it was refused.
func openStream(t *testing.T, c fencev1connect.SessionServiceClient) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	r, err := c.Open(ctx, connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	sctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	st := c.Stream(sctx)
	if err := st.Send(&fencev1.SessionRequest{Session: r.Msg.GetSession().GetId(), Call: 1,
		Op: &fencev1.SessionRequest_KeepAlive{KeepAlive: &fencev1.KeepAliveRequest{}}}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("Send: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		reply, err := st.Receive()
		if err == nil && reply.GetKeepAlive() == nil {
			t.Errorf("first reply = %v, want a keepalive's", reply)
		}
		got <- err
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("no reply on a new stream within %s", hangGuard)
		return nil
	}
}

// One principal at its stream quota (--max-streams-per-principal) is
// refused RESOURCE_EXHAUSTED naming the quota and itself, while a second
// principal still opens a stream: the first one's refused stream took no
// slot of --max-streams. Then an admin's `fence role quota tenant
// streams=3` raises the quota and the first principal opens one more.
func TestStreamQuotaOneTenantDoesNotStarveAnother(t *testing.T) {
	srv := startServer(t, "--max-streams", "4", "--max-streams-per-principal", "2")
	a, err := harness.EnableAuth(context.Background(), fenceBinary(t), srv.URL(), nil, "tenant", []string{"lock:"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	tenantA, tenantB := sessionClient(t, srv.URL(), a.Tokens[0]), sessionClient(t, srv.URL(), a.Tokens[1])
	for i := range 2 {
		if err := openStream(t, tenantA); err != nil {
			t.Fatalf("tenant A's stream %d: %v", i+1, err)
		}
	}
	err = openStream(t, tenantA)
	id, _, _ := strings.Cut(strings.TrimPrefix(a.Tokens[0], "fence_"), "_")
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "config.max_streams_per_principal") ||
		!strings.Contains(err.Error(), `"token:`+id+`"`) || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("tenant A's third stream: %v, want RESOURCE_EXHAUSTED naming config.max_streams_per_principal, at most 2 and token:%s", err, id)
	}
	if err := openStream(t, tenantB); err != nil {
		t.Fatalf("tenant B's stream while A is at its quota: %v", err)
	}
	if m := metricsText(t, srv.URL()); !strings.Contains(m, `fence_resource_exhausted_total{limit="max_streams_per_principal"} 1`) {
		t.Fatalf("metrics lack the refusal:\n%s", linesWith(m, "fence_resource_exhausted_total"))
	}
	// The role's own quota: 3 streams for tenant's principals.
	cmd := exec.Command(fenceBinary(t), "--server", srv.URL(), "role", "quota", "tenant", "streams=3")
	cmd.Env = append(cmd.Environ(), "FENCE_AUTH_TOKEN="+a.Admin)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "streams=3") {
		t.Fatalf("fence role quota: %v\n%s", err, out)
	}
	if err := openStream(t, tenantA); err != nil {
		t.Fatalf("tenant A's third stream with its role's quota of 3: %v", err)
	}
	if err := openStream(t, tenantA); connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "at most 3") {
		t.Fatalf("tenant A's fourth stream: %v, want RESOURCE_EXHAUSTED at most 3", err)
	}
}

// A stream that is opened and never sends its first message is closed
// DEADLINE_EXCEEDED after --stream-first-message-timeout (here far shorter
// than --read-timeout, which would end it too), and its slot is free.
func TestStreamWithoutFirstMessageIsClosed(t *testing.T) {
	srv := startServer(t, "--stream-first-message-timeout", "300ms", "--read-timeout", "1h")
	a, err := harness.EnableAuth(context.Background(), fenceBinary(t), srv.URL(), nil, "tenant", []string{"lock:"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := sessionClient(t, srv.URL(), a.Tokens[0])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := c.Stream(ctx)
	if err := st.Send(nil); err != nil { // the headers, no message
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := st.Receive()
		ended <- err
	}()
	select {
	case err := <-ended:
		if connect.CodeOf(err) != connect.CodeDeadlineExceeded || !strings.Contains(err.Error(), "config.stream_first_message_timeout") {
			t.Fatalf("silent stream ended with %v, want DEADLINE_EXCEEDED naming config.stream_first_message_timeout", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("a stream without a first message still open after %s", hangGuard)
	}
	if m := metricsText(t, srv.URL()); !strings.Contains(m, "\nfence_streams 0\n") {
		t.Fatalf("the silent stream's slot is still taken:\n%s", linesWith(m, "fence_streams"))
	}
}

// metricsText is the server's /metrics.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// linesWith is the lines of text that contain s.
func linesWith(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
