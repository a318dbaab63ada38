package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// The lock-boundary fields of Acquire (issue 23) refused over plain JSON,
// Connect with JSON and gRPC, each naming the field Validate names first:
// a mode that is neither "exclusive" nor "shared" (only the wire can carry
// one) is judged in mode's place, a set lock's in its own place among the
// set's locks (locks[i].name, mode, permits, then the next lock).
func TestBadInputLockBoundaries(t *testing.T) {
	_, url := startServer(t)
	ttl := durationpb.New(time.Second)
	specs := func(s ...*fencev1.LockSpec) []*fencev1.LockSpec { return s }
	many := make([]*fencev1.LockSpec, fence.MaxSetLocks+1)
	for i := range many {
		many[i] = &fencev1.LockSpec{Name: fmt.Sprintf("l%d", i), Mode: "nope"}
	}
	cases := []struct {
		name, field, got string
		req              *fencev1.AcquireRequest
	}{
		{"mode read", "mode", `"read"`, &fencev1.AcquireRequest{Name: "n", Mode: "read", Ttl: ttl}},
		{"mode in capitals", "mode", `"Shared"`, &fencev1.AcquireRequest{Name: "n", Mode: "Shared", Ttl: ttl}},
		{"empty name before a bad mode", "name", "", &fencev1.AcquireRequest{Mode: "x", Ttl: ttl}},
		{"bad mode before a long owner", "mode", `"x"`, &fencev1.AcquireRequest{Name: "n", Mode: "x", Owner: strings.Repeat("o", 257), Ttl: ttl}},
		{"permits 1025", "permits", "1025", &fencev1.AcquireRequest{Name: "n", Permits: fence.MaxPermits + 1, Ttl: ttl}},
		{"shared with permits", "mode", "", &fencev1.AcquireRequest{Name: "n", Mode: "shared", Permits: 2, Ttl: ttl}},
		{"name and locks", "name", "", &fencev1.AcquireRequest{Name: "n", Locks: specs(&fencev1.LockSpec{Name: "a"}, &fencev1.LockSpec{Name: "b"}), Ttl: ttl}},
		{"a set with a mode", "mode", "", &fencev1.AcquireRequest{Mode: "shared", Locks: specs(&fencev1.LockSpec{Name: "a"}, &fencev1.LockSpec{Name: "b"}), Ttl: ttl}},
		{"a set with permits", "permits", "", &fencev1.AcquireRequest{Permits: 3, Locks: specs(&fencev1.LockSpec{Name: "a"}, &fencev1.LockSpec{Name: "b"}), Ttl: ttl}},
		{"a set lock's bad mode", "locks[1].mode", `"x"`, &fencev1.AcquireRequest{Locks: specs(&fencev1.LockSpec{Name: "a"}, &fencev1.LockSpec{Name: "b", Mode: "x"}), Ttl: ttl}},
		{"an empty name before a later bad mode", "locks[0].name", "", &fencev1.AcquireRequest{Locks: specs(&fencev1.LockSpec{}, &fencev1.LockSpec{Name: "b", Mode: "x"}), Ttl: ttl}},
		{"a lock's empty name before its bad mode", "locks[0].name", "", &fencev1.AcquireRequest{Locks: specs(&fencev1.LockSpec{Mode: "x"}, &fencev1.LockSpec{Name: "b"}), Ttl: ttl}},
		{"an empty name after a bad mode", "locks[0].mode", `"x"`, &fencev1.AcquireRequest{Locks: specs(&fencev1.LockSpec{Name: "a", Mode: "x"}, &fencev1.LockSpec{}), Ttl: ttl}},
		{"permits before a later bad mode", "locks[0].permits", "1025", &fencev1.AcquireRequest{Locks: specs(&fencev1.LockSpec{Name: "a", Permits: 1025}, &fencev1.LockSpec{Name: "b", Mode: "x"}), Ttl: ttl}},
		{"a name twice before a bad mode", "locks[1].name", `"a"`, &fencev1.AcquireRequest{Locks: specs(&fencev1.LockSpec{Name: "a"}, &fencev1.LockSpec{Name: "a"}, &fencev1.LockSpec{Name: "b", Mode: "x"}), Ttl: ttl}},
		{"a set lock's permits", "locks[1].permits", "1025", &fencev1.AcquireRequest{Locks: specs(&fencev1.LockSpec{Name: "a"}, &fencev1.LockSpec{Name: "b", Permits: 1025}), Ttl: ttl}},
		{"65 locks with bad modes: the count first", "locks", "65", &fencev1.AcquireRequest{Locks: many, Ttl: ttl}},
		{"a set's bad mode before a long owner", "locks[0].mode", `"x"`, &fencev1.AcquireRequest{Locks: specs(&fencev1.LockSpec{Name: "a", Mode: "x"}, &fencev1.LockSpec{Name: "b"}), Owner: strings.Repeat("o", 257), Ttl: ttl}},
	}
	for _, tc := range cases {
		for _, c := range protocols(url) {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				err := acq(tc.req)(c)
				checkInvalid(t, err, tc.field)
			})
		}
		t.Run("json/"+tc.name, func(t *testing.T) {
			body, err := protojson.Marshal(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			r := sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure, string(body))
			m := object(t, r)
			if r.status != http.StatusBadRequest || r.header.Get("Fence-Reason") != "INVALID_ARGUMENT" || at(m, "facts", "field") != tc.field ||
				(tc.got != "" && at(m, "facts", "got") != tc.got) {
				t.Fatalf("%s: %d %s %s, want 400 INVALID_ARGUMENT naming %s (got %s)", body, r.status, r.header.Get("Fence-Reason"), r.body, tc.field, tc.got)
			}
		})
	}
}

// A set acquire, shared and permit fields as a JSON client writes them
// (curl): read by the codec into the request the service is given, field
// by field, and a lease with the set's locks and proofs written back as
// the JSON contract says (mode absent when exclusive).
func TestJSONLockBoundaryRoundTrip(t *testing.T) {
	var got fence.AcquireRequest
	_, url := startServerDeps(t, Config{}, func(d *Deps) {
		d.Service = acquireFunc{d.Service, func(req fence.AcquireRequest) (fence.Grant, error) {
			got = req
			return fence.Grant{Lease: fence.Lease{
				Name: "catalog", Owner: "w", Token: 7, TTL: 30 * time.Second, Remaining: 30 * time.Second,
				Locks:  fence.SortLocks(req.Locks),
				Signed: fence.SignedToken{Token: 7},
				Proofs: []fence.SignedToken{{Token: 7}, {Token: 7}},
			}}, nil
		}}
	})
	r := sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure,
		`{"locks":[{"name":"sku/42"},{"name":"catalog","mode":"shared"}],"owner":"w","ttl":30}`)
	if r.status != http.StatusOK {
		t.Fatalf("set acquire: %d %s", r.status, r.body)
	}
	want := []fence.LockSpec{{Name: "sku/42"}, {Name: "catalog", Mode: fence.Shared}}
	if got.Name != "" || fmt.Sprint(got.Locks) != fmt.Sprint(want) || got.Mode != fence.Exclusive || got.Permits != 0 {
		t.Fatalf("the service was given %+v, want locks %v", got, want)
	}
	var out struct {
		Lease map[string]json.RawMessage `json:"lease"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	if string(out.Lease["locks"]) != `[{"name":"catalog","mode":"shared"},{"name":"sku/42"}]` || string(out.Lease["proofs"]) != `["7","7"]` {
		t.Fatalf("lease = %s, want locks sorted by name with their modes and one proof per lock", r.body)
	}
	if _, ok := out.Lease["mode"]; ok {
		t.Fatalf("an exclusive lease writes a mode: %s", r.body)
	}

	r = sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure, `{"name":"exchange","permits":4,"owner":"w","ttl":"30s"}`)
	if r.status != http.StatusOK || got.Name != "exchange" || got.Permits != 4 || got.Mode != fence.Exclusive || got.Locks != nil {
		t.Fatalf("permits acquire: %d %s, the service was given %+v", r.status, r.body, got)
	}
	r = sendJSON(t, url, fencev1connect.LockServiceAcquireProcedure, `{"name":"catalog","mode":"shared","owner":"w","ttl":"30s"}`)
	if r.status != http.StatusOK || got.Name != "catalog" || got.Mode != fence.Shared {
		t.Fatalf("shared acquire: %d %s, the service was given %+v", r.status, r.body, got)
	}
}

// acquireFunc is a fence.Service whose Acquire is f.
type acquireFunc struct {
	fence.Service
	f func(fence.AcquireRequest) (fence.Grant, error)
}

func (a acquireFunc) Acquire(_ context.Context, req fence.AcquireRequest) (fence.Grant, error) {
	return a.f(req)
}
