package server

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/grpchealth"
	"google.golang.org/protobuf/reflect/protoreflect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// declaredProcedures is every method fence.proto declares, and
// grpc.health.v1.Health's, by path — read from the descriptors, not from
// the table under test.
func declaredProcedures(t *testing.T) map[string]protoreflect.MethodDescriptor {
	t.Helper()
	out := make(map[string]protoreflect.MethodDescriptor)
	add := func(sd protoreflect.ServiceDescriptor, name string) {
		for i := 0; i < sd.Methods().Len(); i++ {
			m := sd.Methods().Get(i)
			out["/"+name+"/"+string(m.Name())] = m
		}
	}
	svcs := fencev1.File_fence_v1_fence_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		add(svcs.Get(i), string(svcs.Get(i).FullName()))
	}
	add(mustService("connectext."+grpchealth.HealthV1ServiceName), grpchealth.HealthV1ServiceName)
	return out
}

// Every method of the service descriptors is in the procedure table, with
// its own request message when unary and marked streaming when it streams;
// and every fence.v1 service is mounted.
func TestEveryDeclaredProcedureIsInTheTable(t *testing.T) {
	for path, m := range declaredProcedures(t) {
		p, ok := procedures[path]
		if !ok {
			t.Errorf("%s is declared but not in the procedure table", path)
			continue
		}
		stream := m.IsStreamingClient() || m.IsStreamingServer()
		if p.stream != stream {
			t.Errorf("%s: stream = %v, the descriptor says %v", path, p.stream, stream)
		}
		if stream {
			continue
		}
		if got := p.newRequest().ProtoReflect().Descriptor().FullName(); got != m.Input().FullName() {
			t.Errorf("%s decodes JSON into %s, its request is %s", path, got, m.Input().FullName())
		}
	}
	svcs := fencev1.File_fence_v1_fence_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		if !isFenceService(string(svcs.Get(i).FullName())) {
			t.Errorf("service %s is declared but not mounted (fenceServices)", svcs.Get(i).FullName())
		}
	}
}

// Every unary procedure of the service descriptors answers a JSON body
// with the JSON contract: a field the request does not have is refused as
// invalid_argument naming it, with reason and facts. A procedure the
// table does not carry is not served at all (404).
func TestEveryUnaryProcedureRefusesUnknownJSONFields(t *testing.T) {
	_, url := startServer(t)
	for path, m := range declaredProcedures(t) {
		if m.IsStreamingClient() || m.IsStreamingServer() {
			continue
		}
		r := sendJSON(t, url, path, `{"no_such_field":1}`)
		if r.status != http.StatusBadRequest || r.header.Get("Fence-Reason") != "INVALID_ARGUMENT" {
			t.Errorf("%s: status %d, Fence-Reason %q, body %s; want 400 INVALID_ARGUMENT", path, r.status, r.header.Get("Fence-Reason"), r.body)
			continue
		}
		body := object(t, r)
		facts, _ := body["facts"].(map[string]any)
		if body["reason"] != "INVALID_ARGUMENT" || facts["field"] != "no_such_field" {
			t.Errorf("%s: body %s, want reason INVALID_ARGUMENT and facts.field no_such_field", path, r.body)
		}
	}
}

// Every unary procedure of the service descriptors has a plain JSON
// handler (jsonCalls) that decodes its own request message, no streaming
// one has; and a set of handlers that misses a unary procedure is refused
// (checkJSONCalls: New returns its error), so none is served another way.
func TestEveryUnaryProcedureHasAJSONHandler(t *testing.T) {
	calls := (&Server{}).jsonCalls()
	for path, m := range declaredProcedures(t) {
		c, ok := calls[path]
		if m.IsStreamingClient() || m.IsStreamingServer() {
			if ok {
				t.Errorf("%s streams, but has a plain JSON handler", path)
			}
			continue
		}
		if !ok {
			t.Errorf("%s is unary, but has no plain JSON handler (jsonCalls)", path)
			continue
		}
		if got := c.newRequest().ProtoReflect().Descriptor().FullName(); got != m.Input().FullName() {
			t.Errorf("%s: its JSON handler decodes %s, its request is %s", path, got, m.Input().FullName())
		}
	}
	if err := checkJSONCalls(calls); err != nil {
		t.Fatalf("checkJSONCalls refuses the server's own handlers: %v", err)
	}
	for path := range calls {
		missing := maps.Clone(calls)
		delete(missing, path)
		if err := checkJSONCalls(missing); err == nil || !strings.Contains(err.Error(), path+" has no plain JSON handler") {
			t.Errorf("checkJSONCalls without %s: %v; want it named as missing", path, err)
		}
	}
}
