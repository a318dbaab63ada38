package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// The JSON contract (docs/api.md, "The JSON contract"), as a stranger
// sees it: plain net/http requests written the way curl, PHP's curl and a
// JavaScript fetch send them, against a real server over HTTP.

// reply is one HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// send POSTs body to path with the given headers (Content-Type among them,
// or none at all).
func send(t *testing.T, url, path string, body []byte, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

// sendJSON is a curl-like JSON POST.
func sendJSON(t *testing.T, url, path, body string) reply {
	t.Helper()
	return send(t, url, path, []byte(body), "Content-Type", "application/json")
}

// object decodes a JSON object as a JavaScript or PHP program would: every
// number a float64 (JSON.parse, json_decode's floats are exact below 2^53).
func object(t *testing.T, r reply) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d: body %q is not a JSON object: %v", r.status, r.body, err)
	}
	return m
}

// at walks m by keys.
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

// number is the JSON number at keys; it fails the test when the value is
// not a number (a string "2" is what proto3 JSON would have written).
func number(t *testing.T, m map[string]any, keys ...string) float64 {
	t.Helper()
	n, ok := at(m, keys...).(float64)
	if !ok {
		t.Fatalf("%s = %#v in %v, want a JSON number", strings.Join(keys, "."), at(m, keys...), m)
	}
	return n
}

// quotedInteger reports the first member of a JSON document whose value
// is a string of digits, other than the ones that are text by design (a
// resource value shown as text, a signed token, an owner).
func quotedInteger(body []byte) string {
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	var walk func(key string, v any) string
	walk = func(key string, v any) string {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if found := walk(k, e); found != "" {
					return found
				}
			}
		case []any:
			for _, e := range v {
				if found := walk(key, e); found != "" {
					return found
				}
			}
		case string:
			if key != "text" && key != "owner" && key != "value" && digits.MatchString(v) {
				return key
			}
		}
		return ""
	}
	return walk("", doc)
}

var digits = regexp.MustCompile(`^-?[0-9]+$`)

func TestJSONContract(t *testing.T) {
	_, url := startServer(t)

	// Tokens 99 and 100: the comparison a JavaScript, PHP or Python
	// program writes first must be right. As strings, "100" > "99" is
	// false.
	t.Run("tokens99and100", func(t *testing.T) {
		var last float64
		for last < 98 {
			a := object(t, sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"burn","owner":"x","ttl":"5s"}`))
			last = number(t, a, "lease", "token")
			sendJSON(t, url, "/fence.v1.LockService/Release", fmt.Sprintf(`{"name":"burn","token":%v}`, last))
		}
		a := object(t, sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"sku","owner":"A","ttl":"60s"}`))
		tokA := number(t, a, "lease", "token")
		// A's lease ends (released here: the story's pause, shortened).
		if r := sendJSON(t, url, "/fence.v1.LockService/Release", fmt.Sprintf(`{"name":"sku","token":%v}`, tokA)); r.status != 200 {
			t.Fatalf("release: %d %s", r.status, r.body)
		}
		// B's token comes as a decimal string in its request: accepted too.
		b := object(t, sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"sku","owner":"B","ttl":"60s"}`))
		tokB := number(t, b, "lease", "token")
		if tokA != 99 || tokB != 100 {
			t.Fatalf("tokens %v and %v, want 99 and 100", tokA, tokB)
		}
		if !(tokB > tokA) {
			t.Fatal("100 > 99 is false")
		}
		w := object(t, sendJSON(t, url, "/fence.v1.ResourceService/Write", `{"resource":"stock","token":"100","value":"OA=="}`))
		if number(t, w, "state", "lastToken") != 100 || number(t, w, "state", "version") != 1 {
			t.Fatalf("write: %v", w)
		}
		// A wakes up and writes with 99: refused, the reason in the
		// header and the body, the last token a number in both.
		r := sendJSON(t, url, "/fence.v1.ResourceService/Write", `{"resource":"stock","token":99,"value":"NQ=="}`)
		if r.status != http.StatusBadRequest || r.header.Get("Fence-Reason") != "STALE_TOKEN" || r.header.Get("Fence-Last-Token") != "100" {
			t.Fatalf("stale write: %d %v %s; want 400, Fence-Reason STALE_TOKEN, Fence-Last-Token 100", r.status, r.header, r.body)
		}
		e := object(t, r)
		if e["code"] != "failed_precondition" || e["reason"] != "STALE_TOKEN" || number(t, e, "facts", "lastToken") != 100 ||
			number(t, e, "facts", "token") != 99 || at(e, "facts", "name") != "stock" {
			t.Fatalf("stale write body: %s", r.body)
		}
		// debug, Connect's JSON copy of the detail, has numbers too.
		if d, _ := at(e, "details").([]any); len(d) != 1 || at(d[0].(map[string]any), "debug", "lastAccepted") != float64(100) {
			t.Fatalf("details: %s", r.body)
		}
		// Every 64-bit integer of every reply is a number: no quoted
		// digits anywhere.
		for _, body := range [][]byte{r.body, sendJSON(t, url, "/fence.v1.LockService/Get", `{"name":"sku"}`).body,
			sendJSON(t, url, "/fence.v1.LockService/List", `{}`).body,
			sendJSON(t, url, "/fence.v1.ResourceService/Read", `{"resource":"stock"}`).body} {
			// A field whose whole value is quoted digits (a signed
			// token "100.<cluster>..." is a string by design).
			if k := quotedInteger(body); k != "" {
				t.Fatalf("a quoted integer (%s) in %s", k, body)
			}
		}
		g := object(t, sendJSON(t, url, "/fence.v1.LockService/Get", `{"name":"sku"}`))
		if number(t, g, "lock", "lastToken") != 100 || number(t, g, "lock", "lease", "token") != 100 {
			t.Fatalf("get: %v", g)
		}
	})

	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"busy","owner":"A","ttl":"30s"}`)
		r := sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"busy","owner":"B","ttl":"30s"}`)
		if r.status != http.StatusTooManyRequests || r.header.Get("Fence-Reason") != "BUSY" {
			t.Fatalf("busy: %d %v %s", r.status, r.header, r.body)
		}
		// The holder's remaining TTL rounded up: 30 unless this test
		// took a second between the two calls (then 29).
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 {
			t.Fatalf("Retry-After %q, want whole seconds in 1..30", r.header.Get("Retry-After"))
		}
		e := object(t, r)
		if e["reason"] != "BUSY" || at(e, "facts", "holder") != "A" || number(t, e, "facts", "holderToken") < 1 {
			t.Fatalf("busy body: %s", r.body)
		}
	})

	// A wait longer than the client's deadline: BUSY with waited before
	// the deadline, not a bare deadline_exceeded (item 4), as curl sends
	// it with Connect-Timeout-Ms.
	t.Run("waitCutByDeadline", func(t *testing.T) {
		t.Parallel()
		sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"deadline","owner":"A","ttl":60}`)
		r := send(t, url, "/fence.v1.LockService/Acquire", []byte(`{"name":"deadline","owner":"B","ttl":60,"wait":60}`),
			"Content-Type", "application/json", "Connect-Timeout-Ms", "2500")
		e := object(t, r)
		if r.status != http.StatusTooManyRequests || r.header.Get("Fence-Reason") != "BUSY" || e["reason"] != "BUSY" ||
			at(e, "facts", "waited") != true || r.header.Get("Retry-After") == "" {
			t.Fatalf("wait 60 with a 2.5s deadline: %d %v %s; want BUSY, waited", r.status, r.header, r.body)
		}
	})

	// PHP's curl posts a form when the request is an array or the header
	// is missing: the 415 says what it got and what to send.
	t.Run("415", func(t *testing.T) {
		t.Parallel()
		form := []byte("name=sku&owner=php&ttl=30")
		r := send(t, url, "/fence.v1.LockService/Acquire", form, "Content-Type", "application/x-www-form-urlencoded", "Accept", "*/*")
		if r.status != http.StatusUnsupportedMediaType || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") ||
			!bytes.Contains(r.body, []byte(`got "application/x-www-form-urlencoded"`)) || !bytes.Contains(r.body, []byte("Content-Type: application/json")) ||
			r.header.Get("Fence-Reason") != "INVALID_ARGUMENT" {
			t.Fatalf("form: %d %v %q", r.status, r.header, r.body)
		}
		r = send(t, url, "/fence.v1.LockService/Acquire", form, "Content-Type", "application/x-www-form-urlencoded", "Accept", "application/json")
		e := object(t, r)
		if r.status != http.StatusUnsupportedMediaType || r.header.Get("Content-Type") != "application/json" || e["code"] != "invalid_argument" ||
			e["reason"] != "INVALID_ARGUMENT" || at(e, "facts", "field") != "Content-Type" || at(e, "facts", "got") != "application/x-www-form-urlencoded" ||
			!strings.Contains(at(e, "facts", "bound").(string), "application/json") {
			t.Fatalf("form, Accept JSON: %d %v %s", r.status, r.header, r.body)
		}
		r = send(t, url, "/fence.v1.LockService/Acquire", []byte(`{"name":"sku"}`))
		if r.status != http.StatusUnsupportedMediaType || !bytes.Contains(r.body, []byte("got no Content-Type")) {
			t.Fatalf("no Content-Type: %d %q", r.status, r.body)
		}
	})

	// A gzip-compressed JSON body is checked like a plain one: the unknown
	// field named in the facts.
	t.Run("gzipRefusalHasReason", func(t *testing.T) {
		t.Parallel()
		r := send(t, url, "/fence.v1.LockService/Acquire", gzipped([]byte(`{"name":"gz","owner":"x","ttl":"5s","wiat":"5s"}`)),
			"Content-Type", "application/json", "Content-Encoding", "gzip")
		e := object(t, r)
		if r.status != http.StatusBadRequest || r.header.Get("Fence-Reason") != "INVALID_ARGUMENT" || e["reason"] != "INVALID_ARGUMENT" ||
			!strings.Contains(e["message"].(string), "wiat") || at(e, "facts", "field") != "wiat" {
			t.Fatalf("gzip with wiat: %d %v %s", r.status, r.header, r.body)
		}
	})

	// A duration is a number of seconds, a proto3 string or a Go string;
	// replies write it in proto3 form. Anything else is refused naming the
	// field, with examples. The same through the decoder inside Connect
	// (gzip).
	t.Run("durations", func(t *testing.T) {
		t.Parallel()
		for i, tc := range []struct{ ttl, want string }{
			{`30`, "30s"}, {`0.25`, "0.250s"}, {`1.5e1`, "15s"}, {`"30s"`, "30s"}, {`"0.25s"`, "0.250s"},
			{`"250ms"`, "0.250s"}, {`"1m30s"`, "90s"}, {`"1h"`, "3600s"},
		} {
			for _, gz := range []bool{false, true} {
				body := []byte(fmt.Sprintf(`{"name":"dur-%d-%t","owner":"x","ttl":%s,"lockDelay":%s}`, i, gz, tc.ttl, tc.ttl))
				hdr := []string{"Content-Type", "application/json"}
				if gz {
					body, hdr = gzipped(body), append(hdr, "Content-Encoding", "gzip")
				}
				r := send(t, url, "/fence.v1.LockService/Acquire", body, hdr...)
				if r.status != 200 || at(object(t, r), "lease", "ttl") != tc.want {
					t.Errorf("ttl %s (gzip %t): %d %s; want ttl %q", tc.ttl, gz, r.status, r.body, tc.want)
				}
			}
		}
		// Malformed JSON stays malformed: not rewritten into a body that
		// decodes.
		for _, bad := range []string{`{"name":"dur-mal","owner":"x","ttl":30} extra`, `{"name":"dur-mal","owner":"x","ttl":30,`, `{"name":"dur-mal","ttl":30`} {
			for _, gz := range []bool{false, true} {
				body, hdr := []byte(bad), []string{"Content-Type", "application/json"}
				if gz {
					body, hdr = gzipped(body), append(hdr, "Content-Encoding", "gzip")
				}
				r := send(t, url, "/fence.v1.LockService/Acquire", body, hdr...)
				if r.status != 400 || !strings.Contains(string(r.body), "JSON") {
					t.Errorf("%s (gzip %t): %d %s; want it refused as malformed", bad, gz, r.status, r.body)
				}
			}
		}
		for _, bad := range []string{`"30"`, `"30 seconds"`, `true`, `{"seconds":30}`, `1e-10`, `"PT30S"`} { // 1e20: named as sent (TestStrictJSONInputs)
			r := sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"dur-bad","owner":"x","ttl":`+bad+`}`)
			e := object(t, r)
			if r.status != 400 || e["reason"] != "INVALID_ARGUMENT" || at(e, "facts", "field") != "ttl" ||
				!strings.Contains(e["message"].(string), `invalid ttl: must be a duration: a number of seconds (30, 0.25) or a string such as "30s", "250ms" or "1m30s"`) {
				t.Errorf("ttl %s: %d %s", bad, r.status, r.body)
			}
			r = send(t, url, "/fence.v1.LockService/Acquire", gzipped([]byte(`{"name":"dur-bad","ttl":`+bad+`}`)), "Content-Type", "application/json", "Content-Encoding", "gzip")
			if r.status != 400 || !strings.Contains(string(r.body), "invalid ttl: must be a duration") {
				t.Errorf("gzip ttl %s: %d %s", bad, r.status, r.body)
			}
		}
	})

	// value is base64; text is the value as UTF-8. "1234" sent as value
	// would be stored as three other bytes: text stores "1234".
	t.Run("text", func(t *testing.T) {
		t.Parallel()
		a := object(t, sendJSON(t, url, "/fence.v1.LockService/Acquire", `{"name":"text","owner":"php","ttl":30}`))
		tok := number(t, a, "lease", "token")
		w := object(t, sendJSON(t, url, "/fence.v1.ResourceService/Write", fmt.Sprintf(`{"resource":"text","token":%v,"text":"1234"}`, tok)))
		if at(w, "state", "text") != "1234" || at(w, "state", "value") != "MTIzNA==" {
			t.Fatalf("write text: %v", w)
		}
		if rd := object(t, sendJSON(t, url, "/fence.v1.ResourceService/Read", `{"resource":"text"}`)); at(rd, "state", "text") != "1234" {
			t.Fatalf("read: %v", rd)
		}
		r := sendJSON(t, url, "/fence.v1.ResourceService/Write", fmt.Sprintf(`{"resource":"text","token":%v,"text":"1","value":"MQ=="}`, tok))
		if e := object(t, r); r.status != 400 || e["reason"] != "INVALID_ARGUMENT" || at(e, "facts", "field") != "text" {
			t.Fatalf("value and text: %d %s", r.status, r.body)
		}
		// Bytes that are not UTF-8: no text, value only.
		w = object(t, sendJSON(t, url, "/fence.v1.ResourceService/Write", fmt.Sprintf(`{"resource":"text-bin","token":%v,"value":"/w=="}`, tok)))
		if _, ok := at(w, "state").(map[string]any)["text"]; ok || at(w, "state", "value") != "/w==" {
			t.Fatalf("write binary: %v", w)
		}
		// An Add beyond 2^53: the number is exact in the JSON text, and
		// text has the digits for a JavaScript client.
		ad := sendJSON(t, url, "/fence.v1.ResourceService/Add", fmt.Sprintf(`{"resource":"text-n","token":%v,"delta":9007199254740993}`, tok))
		if !bytes.Contains(ad.body, []byte(`"value":9007199254740993`)) || !bytes.Contains(ad.body, []byte(`"text":"9007199254740993"`)) {
			t.Fatalf("add: %s", ad.body)
		}
		// A binary protobuf reply has the bytes and no text.
		rd, err := fencev1connect.NewResourceServiceClient(http.DefaultClient, url).Read(context.Background(), connect.NewRequest(&fencev1.ReadRequest{Resource: "text"}))
		if err != nil || string(rd.Msg.State.Value) != "1234" || rd.Msg.State.Text != nil {
			t.Fatalf("binary read: %v, %v", rd, err)
		}
	})

	// gRPC-Web with JSON messages (Connect-ES's grpc-web transport
	// without binary format): numbers too.
	t.Run("grpcWebJSON", func(t *testing.T) {
		t.Parallel()
		msg := []byte(`{"name":"gw","owner":"x","ttl":30}`) // a duration as a number: the codec reads it too
		frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
		r := send(t, url, "/fence.v1.LockService/Acquire", append(frame, msg...), "Content-Type", "application/grpc-web+json")
		if r.status != 200 || len(r.body) < 5 {
			t.Fatalf("grpc-web+json: %d %q", r.status, r.body)
		}
		n := binary.BigEndian.Uint32(r.body[1:5])
		var m map[string]any
		if err := json.Unmarshal(r.body[5:5+n], &m); err != nil {
			t.Fatalf("first frame %q: %v", r.body[5:5+n], err)
		}
		number(t, m, "lease", "token")
		if at(m, "lease", "ttl") != "30s" {
			t.Fatalf("grpc-web+json lease %v, want ttl 30s", m)
		}
	})

	// SessionService.Stream in Connect's streaming protocol with JSON
	// messages: replies have numbers, a request takes a duration as a
	// number.
	t.Run("streamJSON", func(t *testing.T) {
		t.Parallel()
		open := object(t, sendJSON(t, url, "/fence.v1.SessionService/Open", `{"ttl":10}`))
		id := number(t, open, "session", "id")
		if at(open, "session", "ttl") != "10s" {
			t.Fatalf("open: %v", open)
		}
		msg := []byte(fmt.Sprintf(`{"session":%v,"call":7,"keepAlive":{"ttl":"1m"}}`, id))
		frame := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
		req, _ := http.NewRequest(http.MethodPost, url+"/fence.v1.SessionService/Stream", bytes.NewReader(frame))
		req.Header.Set("Content-Type", "application/connect+json")
		resp, err := h2cClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) < 5 || body[0] != 0 {
			t.Fatalf("stream: %d %q", resp.StatusCode, body)
		}
		n := binary.BigEndian.Uint32(body[1:5])
		var reply map[string]any
		if err := json.Unmarshal(body[5:5+n], &reply); err != nil {
			t.Fatalf("first message %q: %v", body[5:5+n], err)
		}
		if number(t, reply, "call") != 7 || number(t, reply, "keepAlive", "session", "id") != id || at(reply, "keepAlive", "session", "ttl") != "60s" {
			t.Fatalf("stream reply %s", body[5:5+n])
		}
	})

	// A message the decoder inside Connect refuses (a gRPC client sending
	// JSON with a typo) has its Fence-Reason too: a trailer in gRPC, a
	// header of the trailers-only reply in gRPC-Web.
	t.Run("grpcDecoderRefusal", func(t *testing.T) {
		t.Parallel()
		msg := []byte(`{"name":"gd","owner":"x","ttl":30,"wiat":5}`)
		frame := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
		for _, tc := range []struct {
			ct string
			hc *http.Client
		}{{"application/grpc+json", h2cClient()}, {"application/grpc-web+json", http.DefaultClient}} {
			req, _ := http.NewRequest(http.MethodPost, url+"/fence.v1.LockService/Acquire", bytes.NewReader(frame))
			req.Header.Set("Content-Type", tc.ct)
			resp, err := tc.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body) // trailers come after the body
			resp.Body.Close()
			get := func(k string) string { return resp.Header.Get(k) + resp.Trailer.Get(k) }
			if get("Grpc-Status") != "3" || !strings.Contains(get("Grpc-Message"), "wiat") || get("Fence-Reason") != "INVALID_ARGUMENT" {
				t.Errorf("%s: header %v trailer %v; want grpc-status 3 naming wiat, Fence-Reason INVALID_ARGUMENT", tc.ct, resp.Header, resp.Trailer)
			}
		}
	})

	// The headers reach every protocol: Connect (HTTP headers, also with
	// binary protobuf), gRPC and gRPC-Web (trailers).
	t.Run("headersInEveryProtocol", func(t *testing.T) {
		t.Parallel()
		h2 := h2cClient()
		for _, p := range []struct {
			name string
			opts []connect.ClientOption
		}{{"connect-proto", nil}, {"connect-json", []connect.ClientOption{connect.WithProtoJSON()}},
			{"grpc", []connect.ClientOption{connect.WithGRPC()}}, {"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}}} {
			res := fencev1connect.NewResourceServiceClient(h2, url, p.opts...)
			locks := fencev1connect.NewLockServiceClient(h2, url, p.opts...)
			name := "hdr-" + p.name
			ctx := context.Background()
			a, err := locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "A", Ttl: durationpb.New(time.Minute)}))
			if err != nil {
				t.Fatal(err)
			}
			tok := a.Msg.Lease.Token
			if _, err := res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: name, Token: tok + 1e9})); err == nil {
				// Not issued: UNKNOWN_TOKEN.
				t.Fatalf("%s: write with an unissued token accepted", p.name)
			} else if ce := new(connect.Error); !errors.As(err, &ce) || ce.Meta().Get("Fence-Reason") != "UNKNOWN_TOKEN" {
				t.Fatalf("%s: %v, meta %v; want Fence-Reason UNKNOWN_TOKEN", p.name, err, ce.Meta())
			}
			if _, err := res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: name, Token: tok})); err != nil {
				t.Fatal(err)
			}
			_, err = res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: name, Token: tok - 1}))
			ce := new(connect.Error)
			if !errors.As(err, &ce) || ce.Meta().Get("Fence-Reason") != "STALE_TOKEN" || ce.Meta().Get("Fence-Last-Token") != strconv.FormatUint(tok, 10) {
				t.Fatalf("%s: %v, meta %v; want Fence-Reason STALE_TOKEN, Fence-Last-Token %d", p.name, err, ce.Meta(), tok)
			}
		}
	})
}

func gzipped(b []byte) []byte {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(b)
	zw.Close()
	return gz.Bytes()
}
