package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// reply is an HTTP reply as a JSON client sees it.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// sendJSON POSTs body to url+path as JSON.
func sendJSON(t *testing.T, url, path, body string) reply {
	t.Helper()
	res, err := http.Post(url+path, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: res.StatusCode, header: res.Header, body: b}
}

// object decodes a JSON object as a JavaScript or PHP program would.
func object(t *testing.T, r reply) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d: body %q is not a JSON object: %v", r.status, r.body, err)
	}
	return m
}

// number is the JSON number at keys in m.
func number(t *testing.T, m map[string]any, keys ...string) float64 {
	t.Helper()
	var v any = m
	for _, k := range keys {
		o, _ := v.(map[string]any)
		v = o[k]
	}
	n, ok := v.(float64)
	if !ok {
		t.Fatalf("%s = %#v in %v, want a JSON number", strings.Join(keys, "."), v, m)
	}
	return n
}

func mustOK(t *testing.T, r reply) {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

// A follower passes its leader's refusal on with the same headers and body
// fields: the refusal it receives is a wire error, whose metadata Connect
// would not send.
func TestJSONContractThroughFollower(t *testing.T) {
	cfg1 := clusterConfig(t, "n1", ClusterConfig{Bootstrap: true})
	n1 := startRun(t, cfg1)
	n1.awaitReady(t)
	n2 := startRun(t, clusterConfig(t, "n2", ClusterConfig{Join: []string{n1.url}}))
	n2.awaitReady(t)
	if role := n2.status(t).GetRole(); role != "follower" {
		t.Fatalf("n2 is %s, want a follower", role)
	}
	a := object(t, sendJSON(t, n2.url, "/fence.v1.LockService/Acquire", `{"name":"f","owner":"A","ttl":60}`))
	tok := number(t, a, "lease", "token")
	mustOK(t, sendJSON(t, n2.url, "/fence.v1.ResourceService/Write", fmt.Sprintf(`{"resource":"f","token":%v,"text":"8"}`, tok)))
	r := sendJSON(t, n2.url, "/fence.v1.LockService/Acquire", `{"name":"f","owner":"B","ttl":60}`)
	if e := object(t, r); r.status != 429 || r.header.Get("Fence-Reason") != "BUSY" || r.header.Get("Retry-After") == "" ||
		e["reason"] != "BUSY" || number(t, e, "facts", "holderToken") != tok {
		t.Fatalf("busy through the follower: %d %v %s", r.status, r.header, r.body)
	}
	mustOK(t, sendJSON(t, n2.url, "/fence.v1.LockService/Release", fmt.Sprintf(`{"name":"f","token":%v}`, tok)))
	b := object(t, sendJSON(t, n2.url, "/fence.v1.LockService/Acquire", `{"name":"f","owner":"B","ttl":60}`))
	tokB := number(t, b, "lease", "token")
	mustOK(t, sendJSON(t, n2.url, "/fence.v1.ResourceService/Write", fmt.Sprintf(`{"resource":"f","token":%v,"text":"9"}`, tokB)))
	r = sendJSON(t, n2.url, "/fence.v1.ResourceService/Write", fmt.Sprintf(`{"resource":"f","token":%v,"text":"5"}`, tok))
	e := object(t, r)
	if r.status != 400 || r.header.Get("Fence-Reason") != "STALE_TOKEN" || r.header.Get("Fence-Last-Token") != fmt.Sprint(tokB) ||
		e["reason"] != "STALE_TOKEN" || number(t, e, "facts", "lastToken") != tokB {
		t.Fatalf("stale write through the follower: %d %v %s", r.status, r.header, r.body)
	}
	// A session-bound renew answers the session (leases bound to it); a
	// retried seq whose saved result is a refusal is marked replayed in
	// its facts — through the follower as at the leader.
	o := object(t, sendJSON(t, n2.url, "/fence.v1.SessionService/Open", `{"ttl":60}`))
	sid := number(t, o, "session", "id")
	g := object(t, sendJSON(t, n2.url, "/fence.v1.LockService/Acquire", fmt.Sprintf(`{"name":"g","owner":"S","session":{"id":%v,"seq":1}}`, sid)))
	tokG := number(t, g, "lease", "token")
	rn := object(t, sendJSON(t, n2.url, "/fence.v1.LockService/Renew", fmt.Sprintf(`{"name":"g","token":%v,"session":{"id":%v,"seq":2,"ack":2}}`, tokG, sid)))
	if number(t, rn, "session", "id") != sid || number(t, rn, "session", "leases") != 1 {
		t.Fatalf("session-bound renew through the follower: %v, want its session with leases 1", rn)
	}
	mustOK(t, sendJSON(t, n2.url, "/fence.v1.LockService/Release", fmt.Sprintf(`{"name":"g","token":%v,"session":{"id":%v,"seq":3,"ack":3}}`, tokG, sid)))
	renew4 := fmt.Sprintf(`{"name":"g","token":%v,"session":{"id":%v,"seq":4,"ack":4}}`, tokG, sid)
	first := sendJSON(t, n2.url, "/fence.v1.LockService/Renew", renew4)
	if e := object(t, first); e["reason"] == nil || at(e, "facts", "replayed") != nil {
		t.Fatalf("renew of a released lease: %d %s, want a refusal without replayed", first.status, first.body)
	}
	again := sendJSON(t, n2.url, "/fence.v1.LockService/Renew", renew4)
	if e := object(t, again); e["reason"] != object(t, first)["reason"] || at(e, "facts", "replayed") != true {
		t.Fatalf("seq 4 again: %d %s, want the same refusal with facts.replayed true", again.status, again.body)
	}
}

// at is the value at keys in m, nil when a key is missing.
func at(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}
