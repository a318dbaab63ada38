package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// codecSamples are messages of the API with every kind of field the JSON
// codec reads or writes set: strings with escapes and non-ASCII, bytes,
// bools, 32- and 64-bit integers at their bounds, durations of every
// precision and sign, nested and repeated messages, a oneof, an optional.
func codecSamples(rng *rand.Rand) []proto.Message {
	d := func() *durationpb.Duration {
		switch rng.IntN(4) {
		case 0:
			return durationpb.New(time.Duration(rng.Int64N(1000)) * time.Second)
		case 1:
			return durationpb.New(time.Duration(rng.Int64N(1e6)) * time.Millisecond)
		case 2:
			return durationpb.New(time.Duration(rng.Int64N(1e9)) * time.Microsecond)
		}
		return durationpb.New(-time.Duration(rng.Int64N(math.MaxInt64)))
	}
	u64 := func() uint64 { return []uint64{0, 1, 1<<53 + 1, math.MaxUint64, rng.Uint64()}[rng.IntN(5)] }
	str := func() string {
		return []string{"", "a", `q"uo\te`, "line\nbreak\t\x01", "naïve ☃ 🔒", "\u2028<&>", strings.Repeat("x", 300)}[rng.IntN(7)]
	}
	ref := func() *fencev1.SessionRef { return &fencev1.SessionRef{Id: u64(), Seq: u64(), Ack: u64()} }
	lease := func() *fencev1.Lease {
		return &fencev1.Lease{Name: str(), Owner: str(), Token: u64(), Ttl: d(), Remaining: d()}
	}
	text := str()
	return []proto.Message{
		&fencev1.AcquireRequest{Name: str(), Owner: str(), Ttl: d(), Wait: d(), RequestId: str(), LockDelay: d(), Session: ref()},
		&fencev1.RenewRequest{Name: str(), Token: u64(), Ttl: d(), Session: ref()},
		&fencev1.WriteRequest{Resource: str(), Token: u64(), Value: []byte(str()), OpId: str(), Session: ref()},
		&fencev1.WriteRequest{Resource: str(), Token: u64(), Text: &text},
		&fencev1.AddRequest{Resource: str(), Token: u64(), Delta: []int64{math.MinInt64, -1, math.MaxInt64, rng.Int64()}[rng.IntN(4)]},
		&fencev1.ListRequest{Prefix: str(), PageSize: []uint32{0, 1, math.MaxUint32}[rng.IntN(3)], PageToken: str()},
		&fencev1.AcquireResponse{Lease: lease(), Replayed: rng.IntN(2) == 0},
		&fencev1.ListResponse{Locks: []*fencev1.LockInfo{{Name: str(), Lease: lease(), Waiters: rng.Uint32(), LockDelayRemaining: d(), LastToken: u64()}, {Name: str()}}, NextPageToken: str()},
		&fencev1.AddResponse{State: &fencev1.ResourceState{Resource: str(), Value: []byte{0, 0xff, 0xfe}, LastToken: u64(), Version: u64(), Deleted: true, Text: &text}, Value: rng.Int64() - math.MaxInt64/2},
		&fencev1.SessionRequest{Session: u64(), Call: u64(), Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Name: str(), Ttl: d()}}},
		&fencev1.ErrorDetail{Reason: "STALE_TOKEN", Token: u64(), LastAccepted: u64(), Remaining: d(), Got: str()},
		&fencev1.NodeStatusResponse{Id: str(), Term: u64(), LastContact: d(), ServerTime: d(), Ready: true, DataDirBytes: u64()},
	}
}

// decodeAny decodes JSON text keeping numbers as text.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// unquote64 is protojson's JSON of a message (decodeAny) with the quoted
// 64-bit integers as numbers, as the API writes them.
func unquote64(v any, md protoreflect.MessageDescriptor) any {
	obj, ok := v.(map[string]any)
	if !ok || md.FullName().Parent() == "google.protobuf" {
		return v
	}
	for k, x := range obj {
		fd := jsonField(md, k)
		if fd == nil {
			continue
		}
		one := func(x any) any {
			if fd.Kind() == protoreflect.MessageKind {
				return unquote64(x, fd.Message())
			}
			if s, ok := x.(string); ok && is64(fd) {
				return json.Number(s)
			}
			return x
		}
		if l, ok := x.([]any); ok {
			for i := range l {
				l[i] = one(l[i])
			}
			continue
		}
		obj[k] = one(x)
	}
	return obj
}

func is64(fd protoreflect.FieldDescriptor) bool {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// encodeJSON writes what protojson writes, but for 64-bit integers, which
// are JSON numbers; and decodeJSON reads back every message from its own
// JSON and from protojson's (JSON names or proto names), equal to the
// original.
func TestJSONCodecAgreesWithProtoJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		for _, msg := range codecSamples(rng) {
			ours := encodeJSON(msg)
			theirs, err := protojson.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			md := msg.ProtoReflect().Descriptor()
			if got, want := decodeAny(t, ours), unquote64(decodeAny(t, theirs), md); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\nencodeJSON %s\nprotojson  %s", md.FullName(), ours, theirs)
			}
			protoNames, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range [][]byte{ours, theirs, protoNames} {
				back := msg.ProtoReflect().Type().New().Interface()
				if err := decodeJSON(in, back); err != nil {
					t.Fatalf("%s: decodeJSON(%s): %v", md.FullName(), in, err)
				}
				if !proto.Equal(back, msg) {
					t.Fatalf("%s: decodeJSON(%s) = %v, want %v", md.FullName(), in, back, msg)
				}
			}
		}
	}
}

// decodeJSON refuses, naming the field, what encoding/json would accept:
// a member in another case, a member given twice (also under its other
// name), a string that is not UTF-8 or holds a lone surrogate, an integer
// string that is not plain digits; and what protojson would accept: a
// duration finer than a nanosecond.
func TestDecodeJSONIsStrict(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"Name":"x"}`, "Name"},
		{`{"name":"x","NAME":"y"}`, "NAME"},
		{`{"ttl":"1s","ttl":"2s"}`, "ttl"},
		{`{"lock_delay":"1s","lockDelay":"2s"}`, "lock_delay"},
		{"{\"name\":\"\xff\"}", "name"},
		{`{"name":"\ud800"}`, "name"},
		{`{"session":{"id":"01"}}`, "session.id"},
		{`{"session":{"Id":1}}`, "session.Id"},
		{`{"ttl":"0.5ns"}`, "ttl"},
	} {
		var inv *fence.InvalidError
		err := decodeJSON([]byte(tc.body), new(fencev1.AcquireRequest))
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("%s: %v; want it refused naming %s", tc.body, err, tc.field)
		}
	}
}

// FuzzDecodeJSON: decodeJSON never panics, and what it accepts it reads
// back the same from encodeJSON's text of it, for every request message
// of the API.
func FuzzDecodeJSON(f *testing.F) {
	var reqs []protoreflect.MessageType
	for _, p := range procedures {
		if !p.stream {
			reqs = append(reqs, p.newRequest().ProtoReflect().Type())
		}
	}
	slices.SortFunc(reqs, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	for _, s := range []string{`{}`, `{"name":"a","ttl":30,"session":{"id":"1","seq":2}}`, `{"token":"18446744073709551615","delta":-1,"value":"AP/+"}`, `{"lockDelay":"1m30s","wait":0.25}`, `{"pageSize":4294967295}`} {
		for i := range reqs {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		mt := reqs[int(which)%len(reqs)]
		m := mt.New().Interface()
		if decodeJSON(body, m) != nil {
			return
		}
		out := encodeJSON(m)
		back := mt.New().Interface()
		if err := decodeJSON(out, back); err != nil {
			t.Fatalf("%s: %s read, its encoding %s refused: %v", mt.Descriptor().FullName(), body, out, err)
		}
		if !proto.Equal(m, back) {
			t.Fatalf("%s: %s read as %v, its encoding %s as %v", mt.Descriptor().FullName(), body, m, out, back)
		}
	})
}
