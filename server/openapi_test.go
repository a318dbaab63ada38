package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	neturl "net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"google.golang.org/protobuf/reflect/protoreflect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/state"
)

const openAPIFile = "../api/openapi.yaml"

// openAPIStory is the order the operations' request examples are sent to
// a fresh server in: each example assumes what the ones before it did
// (token 1 is orders/42's, token 2 orders/43's, session 1 the one Open
// made). Every
// operation of the document is here, and nothing else.
var openAPIStory = []string{
	"LockService.Acquire", "LockService.Renew", "LockService.Get", "LockService.List", "watch",
	"ResourceService.Write", "ResourceService.Add", "ResourceService.Read", "ResourceService.Delete",
	"LockService.Release",
	"SessionService.Open", "SessionService.KeepAlive", "SessionService.Close",
	"OperatorService.WhoAmI", "OperatorService.ListSessions", "OperatorService.LockStory", "OperatorService.Activity",
	"OperatorService.ClusterOverview",
	"ClusterService.Members", "ClusterService.AddMember", "ClusterService.RemoveMember",
	"ClusterService.TransferLeadership", "ClusterService.NodeStatus",
	"AuthService.Status", "AuthService.ListRoles", "AuthService.ListTokens", "AuthService.SetEnabled",
	"AuthService.GrantRole", "AuthService.RevokeRole", "AuthService.BindRole", "AuthService.SetRoleQuota", "AuthService.CreateToken", "AuthService.RevokeToken",
	"KeyService.ListKeys", "KeyService.RotateKey", "KeyService.RetireKey", "keys",
	"AuthService.Bootstrap",
	"Health.Check", "healthz", "readyz", "metrics",
}

// The SSE operation's body is text (the validator reads it as a string,
// as text/plain).
func init() {
	openapi3filter.RegisterBodyDecoder("text/event-stream", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		return string(b), err
	})
}

// isSSE reports whether operation o answers Server-Sent Events (its 200
// is text/event-stream): a stream with no end of its own.
func isSSE(o openAPIOp) bool {
	r := o.op.Responses.Status(200)
	return r != nil && r.Value.Content.Get("text/event-stream") != nil
}

// firstSSEEvent reads body up to the end of its first event (the blank
// line after a block with an event: field; comments before it are kept).
func firstSSEEvent(t *testing.T, body io.Reader) []byte {
	t.Helper()
	var out []byte
	br := bufio.NewReader(body)
	event := false
	for {
		line, err := br.ReadBytes('\n')
		out = append(out, line...)
		if err != nil {
			t.Fatalf("the event stream ended before its first event: %v (read %q)", err, out)
		}
		switch {
		case bytes.HasPrefix(line, []byte("event:")):
			event = true
		case string(line) == "\n" && event:
			return out
		}
	}
}

// checkFirstWatchEvent: the first event of a watch is its state, with an
// id, and its data is a WatchEvent as the document's schema has it.
func checkFirstWatchEvent(t *testing.T, doc *openapi3.T, what string, ev []byte) {
	t.Helper()
	fields := map[string]string{}
	for _, line := range strings.Split(string(ev), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, ":") {
			fields[k] = v
		}
	}
	var data any
	if err := json.Unmarshal([]byte(fields["data"]), &data); err != nil {
		t.Errorf("%s: first event %q: data is not JSON: %v", what, ev, err)
		return
	}
	if fields["event"] != "state" || fields["id"] == "" {
		t.Errorf("%s: first event %q; want the state, with an id", what, ev)
	}
	if err := doc.Components.Schemas["WatchEvent"].Value.VisitJSON(data); err != nil {
		t.Errorf("%s: first event's data %s does not match the WatchEvent schema: %v", what, fields["data"], err)
	}
}

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	// Validate checks the document and that every example matches its
	// schema (requests' and responses').
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	return doc
}

type openAPIOp struct {
	path, method string
	item         *openapi3.PathItem
	op           *openapi3.Operation
}

func openAPIOps(doc *openapi3.T) map[string]openAPIOp {
	ops := map[string]openAPIOp{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[op.OperationID] = openAPIOp{path, method, item, op}
		}
	}
	return ops
}

// Every unary method of the fence.v1 services has its path, and every
// fence.v1 message schema has exactly the message's JSON fields, typed as
// the contract says (64-bit integers and durations by the shared schemas),
// so a field added to the proto without the document (or the other way
// round) fails here.
func TestOpenAPIMatchesTheProto(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	ops := openAPIOps(doc)
	paths := map[string]bool{}
	for _, o := range ops {
		paths[o.path] = true
	}
	fd := fencev1.File_fence_v1_fence_proto
	for i := 0; i < fd.Services().Len(); i++ {
		s := fd.Services().Get(i)
		for j := 0; j < s.Methods().Len(); j++ {
			m := s.Methods().Get(j)
			p := "/" + string(s.FullName()) + "/" + string(m.Name())
			streaming := m.IsStreamingClient() || m.IsStreamingServer()
			if paths[p] == streaming {
				t.Errorf("%s (streaming %t): in the document %t; want the unary methods only", p, streaming, paths[p])
			}
			if !streaming {
				o := ops[string(s.Name())+"."+string(m.Name())]
				if o.path != p || o.method != http.MethodPost {
					t.Errorf("operation %s.%s is %s %s, want POST %s", s.Name(), m.Name(), o.method, o.path, p)
					continue
				}
				checkRef(t, p+" request", o.op.RequestBody.Value.Content.Get("application/json").Schema, string(m.Input().Name()))
				checkRef(t, p+" reply", o.op.Responses.Status(200).Value.Content.Get("application/json").Schema, string(m.Output().Name()))
			}
		}
	}
	for name, ref := range doc.Components.Schemas {
		md := fd.Messages().ByName(protoreflect.Name(name))
		if md == nil {
			continue
		}
		checkMessageSchema(t, name, ref.Value, md)
	}
}

func checkRef(t *testing.T, what string, s *openapi3.SchemaRef, msg string) {
	t.Helper()
	if s == nil || s.Ref != "#/components/schemas/"+msg {
		t.Errorf("%s: schema %v, want a $ref to %s", what, s, msg)
	}
}

func checkMessageSchema(t *testing.T, name string, s *openapi3.Schema, md protoreflect.MessageDescriptor) {
	t.Helper()
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		t.Errorf("schema %s: additionalProperties must be false (an unknown field is refused; a reply field not described is a bug)", name)
	}
	var want, got []string
	for i := 0; i < md.Fields().Len(); i++ {
		want = append(want, md.Fields().Get(i).JSONName())
	}
	for p := range s.Properties {
		got = append(got, p)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("schema %s has properties %q; fence.v1.%s has the JSON fields %q", name, got, name, want)
		return
	}
	for i := 0; i < md.Fields().Len(); i++ {
		f := md.Fields().Get(i)
		p := s.Properties[f.JSONName()]
		if f.IsList() {
			if !p.Value.Type.Is("array") {
				t.Errorf("%s.%s: repeated, the schema is not an array", name, f.JSONName())
				continue
			}
			p = p.Value.Items
		}
		ref := p.Ref
		if ref == "" && len(p.Value.AllOf) == 1 {
			ref = p.Value.AllOf[0].Ref // a $ref with a description
		}
		ref = strings.TrimPrefix(ref, "#/components/schemas/")
		var ok bool
		switch {
		case f.Message() != nil && f.Message().FullName() == "google.protobuf.Duration":
			ok = ref == "Duration" || ref == "DurationIn"
		case f.Message() != nil:
			ok = ref == string(f.Message().Name())
		case f.Kind() == protoreflect.Uint64Kind:
			ok = ref == "Uint64" || ref == "Uint64In"
		case f.Kind() == protoreflect.Int64Kind:
			ok = ref == "Int64" || ref == "Int64In"
		case f.Kind() == protoreflect.StringKind:
			ok = ref == "" && p.Value.Type.Is("string") && p.Value.Format == ""
		case f.Kind() == protoreflect.BytesKind:
			ok = ref == "" && p.Value.Type.Is("string") && p.Value.Format == "byte"
		case f.Kind() == protoreflect.BoolKind:
			ok = ref == "" && p.Value.Type.Is("boolean")
		case f.Kind() == protoreflect.Uint32Kind:
			ok = ref == "" && p.Value.Type.Is("integer")
		}
		if !ok {
			t.Errorf("%s.%s (%s): the schema (ref %q, type %v) does not match", name, f.JSONName(), f.Kind(), ref, p.Value.Type)
		}
	}
}

// The document against the real handlers: each operation's request
// examples (sorted by name; "refused…" ones expect a refusal, the others
// 200) are validated against the request schema, sent to a fresh server,
// and its answer (status, headers, body) validated against the operation's
// responses. A refusal of the fenced services also carries Fence-Reason
// equal to the body's reason, BUSY carries Retry-After and STALE_TOKEN
// Fence-Last-Token; BUSY, STALE_TOKEN and UNKNOWN_TOKEN are each seen. Each POST's
// first example sent as a form gets the documented 415.
func TestOpenAPIAgainstHandlers(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	ops := openAPIOps(doc)
	var ids []string
	for id := range ops {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	story := slices.Sorted(slices.Values(openAPIStory))
	if !slices.Equal(ids, story) {
		t.Fatalf("the document's operations %q; the story sends %q", ids, story)
	}
	_, url := startServer(t)
	// An SSE operation (the watch) needs a node's applied state: it is sent
	// to a real single node; the rest of the story to the fakes.
	var nodeURL string
	ctx := context.Background()
	seen := map[string]bool{} // reasons of the refusals the examples got
	sent := refusalsSent{}    // the refusals' bodies, for the documented refusal examples
	defer func() {
		for _, r := range []string{"BUSY", "STALE_TOKEN", "UNKNOWN_TOKEN"} {
			if !seen[r] {
				t.Errorf("no example was refused with %s", r)
			}
		}
	}()
	for _, id := range openAPIStory {
		o := ops[id]
		route := &routers.Route{Spec: doc, Path: o.path, PathItem: o.item, Method: o.method, Operation: o.op}
		type example struct {
			name string
			body []byte
		}
		var examples []example
		if o.method == http.MethodGet {
			// The query from the parameters' examples (none: no query).
			q := neturl.Values{}
			for _, p := range o.op.Parameters {
				if p.Value.In == "query" && p.Value.Example != nil {
					q.Set(p.Value.Name, fmt.Sprint(p.Value.Example))
				}
			}
			examples = append(examples, example{name: "get?" + q.Encode()})
		} else {
			mt := o.op.RequestBody.Value.Content.Get("application/json")
			if len(mt.Examples) == 0 {
				t.Errorf("%s: no request examples", id)
				continue
			}
			for name, ex := range mt.Examples {
				b, err := json.Marshal(ex.Value.Value)
				if err != nil {
					t.Fatal(err)
				}
				examples = append(examples, example{name, b})
			}
			slices.SortFunc(examples, func(a, b example) int { return strings.Compare(a.name, b.name) })
		}
		for _, ex := range examples {
			what := id + " example " + ex.name + " " + string(ex.body)
			var body io.Reader
			if ex.body != nil {
				body = bytes.NewReader(ex.body)
			}
			base, query := url, ""
			if o.method == http.MethodGet {
				query = strings.TrimPrefix(ex.name, "get")
			}
			sse := isSSE(o)
			if sse {
				if nodeURL == "" {
					_, nodeURL = startServerOnNode(t, Config{})
				}
				base = nodeURL
			}
			req, err := http.NewRequest(o.method, base+o.path+strings.TrimSuffix(query, "?"), body)
			if err != nil {
				t.Fatal(err)
			}
			if ex.body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			in := &openapi3filter.RequestValidationInput{Request: req, Route: route, Options: &openapi3filter.Options{}}
			if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
				t.Errorf("%s: the request does not match the document: %v", what, err)
				continue
			}
			if ex.body != nil { // ValidateRequest read it
				req.Body = io.NopCloser(bytes.NewReader(ex.body))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			if sse && resp.StatusCode == http.StatusOK {
				// A stream has no end: its first event, then close it.
				got = firstSSEEvent(t, resp.Body)
			} else {
				got, _ = io.ReadAll(resp.Body)
			}
			resp.Body.Close()
			refused := strings.HasPrefix(ex.name, "refused")
			if (resp.StatusCode == http.StatusOK) == refused {
				t.Errorf("%s: %d %s; want a refusal %t", what, resp.StatusCode, got, refused)
				continue
			}
			if refused {
				sent.add(got)
			}
			if sse && resp.StatusCode == http.StatusOK {
				checkFirstWatchEvent(t, doc, what, got)
			}
			out := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
				Options: &openapi3filter.Options{IncludeResponseStatus: true},
			}
			out.SetBodyBytes(got)
			if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
				t.Errorf("%s: the answer (%d %s) does not match the document: %v", what, resp.StatusCode, got, err)
				continue
			}
			if refused && strings.HasPrefix(o.path, "/fence.v1.") && !strings.HasPrefix(o.path, "/fence.v1.ClusterService/") {
				var e struct{ Reason string }
				json.Unmarshal(got, &e)
				if h := resp.Header.Get("Fence-Reason"); h == "" || h != e.Reason {
					t.Errorf("%s: Fence-Reason %q, body reason %q", what, h, e.Reason)
				}
				if e.Reason == "BUSY" && resp.Header.Get("Retry-After") == "" {
					t.Errorf("%s: BUSY without Retry-After", what)
				}
				if e.Reason == "STALE_TOKEN" && resp.Header.Get("Fence-Last-Token") == "" {
					t.Errorf("%s: STALE_TOKEN without Fence-Last-Token", what)
				}
				seen[e.Reason] = true
			}
		}
		if o.method == http.MethodPost {
			// The same body as a form (PHP curl's default): 415 as the
			// document says, JSON for a JSON Accept, else text.
			for _, accept := range []string{"application/json", ""} {
				req, err := http.NewRequest(o.method, url+o.path, bytes.NewReader(examples[0].body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if accept != "" {
					req.Header.Set("Accept", accept)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				what := id + " as a form, Accept " + accept
				wantCT := "application/json"
				if accept == "" {
					wantCT = "text/plain"
				}
				if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.HasPrefix(resp.Header.Get("Content-Type"), wantCT) {
					t.Errorf("%s: %d %s %s; want 415 %s", what, resp.StatusCode, resp.Header.Get("Content-Type"), got, wantCT)
					continue
				}
				out := &openapi3filter.ResponseValidationInput{
					RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, Route: route},
					Status:                 resp.StatusCode, Header: resp.Header,
					Options: &openapi3filter.Options{IncludeResponseStatus: true},
				}
				out.SetBodyBytes(got)
				if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
					t.Errorf("%s: the answer (%d %s) does not match the document: %v", what, resp.StatusCode, got, err)
				}
				if accept != "" {
					sent.add(got)
				}
			}
		}
	}
	openAPILimits(t, doc, ops, sent)
	checkRefusalExamples(t, doc, sent)
}

// openAPILimits gets RESOURCE_EXHAUSTED from a server with caps (max_locks
// and max_resources 1): the answer matches the document, has no
// Retry-After (only BUSY has one), and its body joins sent. The document's
// 429 responses list Retry-After exactly for the operations that can
// answer BUSY.
func openAPILimits(t *testing.T, doc *openapi3.T, ops map[string]openAPIOp, sent refusalsSent) {
	t.Helper()
	for id, o := range ops {
		r := o.op.Responses.Status(http.StatusTooManyRequests)
		if r == nil {
			continue
		}
		_, retry := r.Value.Headers["Retry-After"]
		if busy := id == "LockService.Acquire"; retry != busy {
			t.Errorf("%s: its 429 response lists Retry-After %t; only BUSY (LockService.Acquire) carries it, RESOURCE_EXHAUSTED never", id, retry)
		}
	}
	rules := state.DefaultConfig()
	rules.MaxLocks, rules.MaxResources = 1, 1
	_, url := startServerRules(t, rules)
	for _, c := range []struct{ id, body string }{
		{"LockService.Acquire", `{"name":"orders/42","owner":"worker-1","ttl":30}`},
		{"LockService.Acquire", `{"name":"orders/43","owner":"worker-2","ttl":30}`}, // max_locks
		{"ResourceService.Write", `{"resource":"stock/42","token":1,"text":"17"}`},
		{"ResourceService.Write", `{"resource":"stock/43","token":1,"text":"1"}`}, // max_resources
	} {
		o := ops[c.id]
		req, err := http.NewRequest(o.method, url+o.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		what := c.id + " " + c.body + " on a server with max_locks and max_resources 1"
		if resp.StatusCode == http.StatusOK {
			continue
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Fence-Reason") != "RESOURCE_EXHAUSTED" {
			t.Errorf("%s: %d %s %s; want 429 RESOURCE_EXHAUSTED", what, resp.StatusCode, resp.Header.Get("Fence-Reason"), got)
			continue
		}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			t.Errorf("%s: RESOURCE_EXHAUSTED with Retry-After %q (the documents say it has none)", what, ra)
		}
		route := &routers.Route{Spec: doc, Path: o.path, PathItem: o.item, Method: o.method, Operation: o.op}
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, Route: route},
			Status:                 resp.StatusCode, Header: resp.Header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		out.SetBodyBytes(got)
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s: the answer (%s) does not match the document: %v", what, got, err)
		}
		sent.add(got)
	}
}

// refusalsSent holds the refusal bodies a server sent, by reason (by
// "code <code>" for one without a reason).
type refusalsSent map[string][]map[string]any

func (r refusalsSent) add(body []byte) {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return
	}
	key, _ := m["reason"].(string)
	if key == "" {
		key = fmt.Sprint("code ", m["code"])
	}
	r[key] = append(r[key], m)
}

// checkRefusalExamples holds every error body the document shows as an
// example (its shared responses' and its operations') against the
// refusals the server sent for the same reason: the same code, the same
// message and the same facts (names, JSON types, and string values) up to
// the numbers in them, and details of the same types with the same debug
// fields. So an example that shows a fact the server never sends (a
// client reading facts.lastAccepted gets undefined) or a message it never
// writes fails here; and every such example must be one the test saw.
func checkRefusalExamples(t *testing.T, doc *openapi3.T, sent refusalsSent) {
	t.Helper()
	check := func(where string, v any) {
		ex, ok := v.(map[string]any)
		if !ok || ex["code"] == nil {
			return
		}
		key, _ := ex["reason"].(string)
		if key == "" {
			key = fmt.Sprint("code ", ex["code"])
		}
		if len(sent[key]) == 0 {
			t.Errorf("%s: an example refusal (%s) no request of the test got: make one", where, key)
			return
		}
		var diffs []string
		for _, got := range sent[key] {
			d := refusalDiff(ex, got)
			if d == "" {
				return
			}
			diffs = append(diffs, d)
		}
		t.Errorf("%s: the example %s is not what the server sends: %s", where, key, strings.Join(diffs, "; or "))
	}
	media := func(where string, r *openapi3.ResponseRef) {
		if r == nil || r.Value == nil {
			return
		}
		for ct, mt := range r.Value.Content {
			check(where+" "+ct+" example", mt.Example)
			for name, ex := range mt.Examples {
				if ex.Value != nil {
					check(where+" "+ct+" example "+name, ex.Value.Value)
				}
			}
		}
	}
	for name, r := range doc.Components.Responses {
		media("components.responses."+name, r)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, r := range op.Responses.Map() {
				if r.Ref == "" { // a shared one is checked above
					media(method+" "+path+" "+code, r)
				}
			}
		}
	}
}

var numbersRE = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// refusalDiff says how the example error body ex differs from the body
// got a server sent ("" if not at all), numbers aside.
func refusalDiff(ex, got map[string]any) string {
	norm := func(v any) string { return numbersRE.ReplaceAllString(fmt.Sprint(v), "N") }
	if ex["code"] != got["code"] {
		return fmt.Sprintf("code %v, the server's %v", ex["code"], got["code"])
	}
	if norm(ex["message"]) != norm(got["message"]) {
		return fmt.Sprintf("message %q, the server's %q", ex["message"], got["message"])
	}
	if d := factsDiff("facts", ex["facts"], got["facts"]); d != "" {
		return d
	}
	exd, ok := ex["details"].([]any)
	if !ok {
		return "" // details left out of the example
	}
	gotd, _ := got["details"].([]any)
	if len(exd) != len(gotd) {
		return fmt.Sprintf("%d details, the server's %d", len(exd), len(gotd))
	}
	for i := range exd {
		e, _ := exd[i].(map[string]any)
		g, _ := gotd[i].(map[string]any)
		if e["type"] != g["type"] {
			return fmt.Sprintf("details[%d].type %v, the server's %v", i, e["type"], g["type"])
		}
		if d := factsDiff(fmt.Sprintf("details[%d].debug", i), e["debug"], g["debug"]); d != "" {
			return d
		}
	}
	return ""
}

// factsDiff compares two JSON objects of facts: the same names, each of
// the same JSON type, strings equal up to their numbers.
func factsDiff(what string, ex, got any) string {
	e, _ := ex.(map[string]any)
	g, _ := got.(map[string]any)
	ek, gk := slices.Sorted(maps.Keys(e)), slices.Sorted(maps.Keys(g))
	if !slices.Equal(ek, gk) {
		return fmt.Sprintf("%s has %q, the server sends %q", what, ek, gk)
	}
	for _, k := range ek {
		if fmt.Sprintf("%T", e[k]) != fmt.Sprintf("%T", g[k]) {
			return fmt.Sprintf("%s.%s is %T %v, the server sends %T %v", what, k, e[k], e[k], g[k], g[k])
		}
		if es, ok := e[k].(string); ok {
			gs := g[k].(string)
			if numbersRE.ReplaceAllString(es, "N") != numbersRE.ReplaceAllString(gs, "N") {
				return fmt.Sprintf("%s.%s %q, the server sends %q", what, k, es, gs)
			}
		}
	}
	return ""
}
