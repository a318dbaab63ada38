package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/internal/apierr"
)

// jsonRequests names the message each unary JSON POST must decode into.
var jsonRequests = map[string]func() proto.Message{
	fencev1connect.LockServiceAcquireProcedure:    func() proto.Message { return new(fencev1.AcquireRequest) },
	fencev1connect.LockServiceRenewProcedure:      func() proto.Message { return new(fencev1.RenewRequest) },
	fencev1connect.LockServiceReleaseProcedure:    func() proto.Message { return new(fencev1.ReleaseRequest) },
	fencev1connect.LockServiceGetProcedure:        func() proto.Message { return new(fencev1.GetRequest) },
	fencev1connect.LockServiceListProcedure:       func() proto.Message { return new(fencev1.ListRequest) },
	fencev1connect.ResourceServiceWriteProcedure:  func() proto.Message { return new(fencev1.WriteRequest) },
	fencev1connect.ResourceServiceAddProcedure:    func() proto.Message { return new(fencev1.AddRequest) },
	fencev1connect.ResourceServiceReadProcedure:   func() proto.Message { return new(fencev1.ReadRequest) },
	fencev1connect.ResourceServiceDeleteProcedure: func() proto.Message { return new(fencev1.DeleteRequest) },
}

// checkJSONBodies gives a JSON request that the protobuf decoder would refuse
// the same refusal every other bad input gets: invalid_argument with an
// ErrorDetail (reason INVALID_ARGUMENT) naming the field and the rule.
// Connect decodes the body before any handler or interceptor runs and its
// own error carries no detail, so the check runs in front of it. Only
// uncompressed unary JSON POSTs (curl's path) are looked at; gRPC and binary
// protobuf pass through untouched, and a body that decodes is handed on
// byte for byte.
func checkJSONBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		newMsg, ok := jsonRequests[r.URL.Path]
		if !ok || r.Method != http.MethodPost || !isPlainJSON(r) {
			next.ServeHTTP(w, r)
			return
		}
		// limitBodies, in front, makes a body over maxRequestBytes fail
		// with its refusal.
		orig := r.Body
		body, err := io.ReadAll(orig)
		if ce := new(connect.Error); errors.As(err, &ce) {
			refuse(w, r, ce)
			return
		}
		if err != nil {
			// Unreadable (the client went away, or the read timed out):
			// Connect reads the same error and answers in its own words.
			// The body is not closed: a read on a closed body is another
			// error.
			r.Body = prefixedBody{Reader: io.MultiReader(bytes.NewReader(body), orig), c: orig}
			next.ServeHTTP(w, r)
			return
		}
		if bad := jsonFieldError(body, newMsg); bad != nil {
			_ = connect.NewErrorWriter().Write(w, r, apierr.ToConnect(bad))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func isPlainJSON(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	// Binary protobuf and gRPC, the hot path, skip the media-type parse
	// (it allocates).
	if !strings.Contains(strings.ToLower(ct), "json") {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	enc := r.Header.Get("Content-Encoding")
	return enc == "" || enc == "identity"
}

// jsonFieldError returns nil if body decodes into the message, else an
// *fence.InvalidError naming the offending field (or "body" when the body
// is not a JSON object at all). Unknown fields are refused, not discarded:
// a misspelled op_id would otherwise turn an idempotent write into one
// that is applied every time it is sent.
func jsonFieldError(body []byte, newMsg func() proto.Message) error {
	err := strictJSON.Unmarshal(body, newMsg())
	if err == nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return fence.Invalid("body", "a JSON object ("+protoMessage(err)+")", "")
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names) // report the same field every time
	md := newMsg().ProtoReflect().Descriptor()
	for _, name := range names {
		if jsonField(md, name) == nil {
			return fence.Invalid(name, fieldsOf(md), "")
		}
	}
	for _, name := range names {
		one, _ := json.Marshal(map[string]json.RawMessage{name: fields[name]})
		if ferr := strictJSON.Unmarshal(one, newMsg()); ferr != nil {
			return fence.Invalid(snake(name), fieldBound(ferr), "")
		}
	}
	// Every field decodes alone but not together (e.g. a field given twice).
	return fence.Invalid("body", protoMessage(err), "")
}

// strictJSON is the JSON decoder of request bodies: proto3 JSON, unknown
// fields refused.
var strictJSON = protojson.UnmarshalOptions{DiscardUnknown: false}

// jsonField is the field protojson decodes name into (its JSON name,
// lockDelay, or its proto name, lock_delay), or nil.
func jsonField(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByJSONName(name); fd != nil {
		return fd
	}
	return md.Fields().ByTextName(name)
}

// fieldsOf is the bound an unknown field broke: `a field of
// fence.v1.AddRequest (resource, token, delta, op_id)`.
func fieldsOf(md protoreflect.MessageDescriptor) string {
	fs := md.Fields()
	names := make([]string, fs.Len())
	for i := range names {
		names[i] = string(fs.Get(i).Name())
	}
	return "a field of " + string(md.FullName()) + " (" + strings.Join(names, ", ") + ")"
}

// fieldBound turns a protojson error into the rule the field broke.
func fieldBound(err error) string {
	msg := protoMessage(err)
	switch {
	case strings.Contains(msg, "google.protobuf.Duration"):
		return `a duration in seconds such as "5s" or "0.25s"`
	case strings.Contains(msg, "UTF-8"):
		return "valid UTF-8"
	case strings.Contains(msg, "uint64") || strings.Contains(msg, "uint32"):
		return "an unsigned integer (a JSON number or a string of digits)"
	case strings.Contains(msg, "int64"):
		return "an integer (a JSON number or a string of digits)"
	case strings.Contains(msg, "bytes"):
		return "base64"
	}
	return msg
}

// protoMessage strips protojson's "proto: (line 1:7): " prefix.
func protoMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "): "); i >= 0 && strings.HasPrefix(msg, "proto:") {
		msg = msg[i+3:]
	}
	return strings.TrimPrefix(msg, "proto: ")
}

// snake turns a JSON name (lockDelay or lock_delay) into the proto field name.
func snake(name string) string {
	var b strings.Builder
	for _, c := range name {
		if c >= 'A' && c <= 'Z' {
			b.WriteByte('_')
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}
