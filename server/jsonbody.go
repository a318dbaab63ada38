package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
)

// messageName is md's name as a client knows it: grpchealth's own package
// prefix (connectext.) left out.
func messageName(md protoreflect.MessageDescriptor) string {
	return strings.TrimPrefix(string(md.FullName()), "connectext.")
}

// checkJSONBodies gives a JSON request that the protobuf decoder would refuse
// the same refusal every other bad input gets: invalid_argument with an
// ErrorDetail (reason INVALID_ARGUMENT) naming the field and the rule.
// Connect decodes the body before any handler or interceptor runs and its
// own error carries no detail, so the check runs in front of it. Only
// unary JSON POSTs (curl's path), uncompressed or gzip, are looked at; gRPC
// and binary protobuf pass through untouched. A body that decodes is
// handed on byte for byte unless a duration needed rewriting (jsondur.go);
// a gzip body that decompresses is handed on decompressed (its
// Content-Encoding removed), one that does not is left to Connect.
// Every API request's deadline header is checked first
// (timeoutError): one lookup of the path serves both checks.
func checkJSONBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Its refusals get reason and facts from refusalReasons, outside
		// (jsonerror.go).
		proc, api := procedures[r.URL.Path]
		api = api && !proc.stream
		if api {
			// The deadline header first, in every protocol (timeout.go).
			if bad := timeoutError(r.Header); bad != nil {
				refuse(w, r, apierr.ToConnect(bad))
				return
			}
		}
		isJSON, gz := jsonBody(r)
		if !api || r.Method != http.MethodPost || !isJSON {
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
		if gz {
			plain, err := gunzip(body)
			if ce := new(connect.Error); errors.As(err, &ce) {
				refuse(w, r, ce) // over the limit once decompressed
				return
			}
			if err != nil {
				// Not gzip, or broken: refused naming the body, with facts.
				refuse(w, r, apierr.ToConnect(fence.Invalid("body",
					"a whole gzip stream, as Content-Encoding: gzip says (it is not: "+err.Error()+")", "")))
				return
			}
			body = plain
			r.Header.Del("Content-Encoding")
		}
		newMsg := proc.newRequest
		// Durations as numbers of seconds or Go strings (jsondur.go).
		body, err = normalizeDurations(body, newMsg().ProtoReflect().Descriptor())
		if err != nil {
			refuse(w, r, apierr.ToConnect(err))
			return
		}
		if bad := jsonFieldError(body, newMsg); bad != nil {
			refuse(w, r, apierr.ToConnect(bad))
			return
		}
		// Integers as strings: decimal digits only; a null token refused
		// as null (jsonstrict.go).
		if bad := checkIntegers(body, newMsg().ProtoReflect().Descriptor(), "", 0); bad != nil {
			refuse(w, r, apierr.ToConnect(bad))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// jsonBody reports whether r's body is unary JSON that checkJSONBodies
// looks at, and whether it is gzip-compressed.
func jsonBody(r *http.Request) (isJSON, gz bool) {
	ct := r.Header.Get("Content-Type")
	// Binary protobuf and gRPC, the hot path, skip the media-type parse
	// (it allocates).
	if !strings.Contains(strings.ToLower(ct), "json") {
		return false, false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false, false
	}
	switch r.Header.Get("Content-Encoding") {
	case "", "identity":
		return true, false
	case "gzip":
		return true, true
	}
	return false, false
}

// gunzip decompresses body within the request limit (a *connect.Error
// naming it when the body is over it once decompressed).
func gunzip(body []byte) ([]byte, error) {
	d := new(limitedGzip)
	if err := d.Reset(bytes.NewReader(body)); err != nil {
		return nil, err
	}
	defer d.Close()
	return io.ReadAll(d)
}

// jsonFieldError returns nil if body decodes into the message, else an
// *fence.InvalidError naming the offending field (or "body" when the body
// is not a JSON object at all) and the rule it broke, in words of its own
// (never the decoder's message). Unknown fields are refused, not discarded:
// a misspelled op_id would otherwise turn an idempotent write into one
// that is applied every time it is sent.
func jsonFieldError(body []byte, newMsg func() proto.Message) error {
	err := strictJSON.Unmarshal(body, newMsg())
	if err == nil {
		return nil
	}
	if got := notAnObject(body); got != "" {
		return fence.Invalid("body", "a JSON object, got "+got, "")
	}
	md := newMsg().ProtoReflect().Descriptor()
	members := objectMembers(body)
	seen := make(map[protoreflect.Name]string, len(members))
	for _, m := range members {
		fd := jsonField(md, m.name)
		if fd == nil {
			name := m.name
			if name == "" {
				name = `""`
			}
			return fence.Invalid(name, fieldsOf(md), "")
		}
		if prev, dup := seen[fd.Name()]; dup {
			return fence.Invalid(string(fd.Name()), fmt.Sprintf("given once (got %q and %q)", prev, m.name), "")
		}
		seen[fd.Name()] = m.name
	}
	for _, m := range members {
		one, _ := json.Marshal(m.name)
		one = append(append(append(append([]byte("{"), one...), ':'), m.value...), '}')
		if strictJSON.Unmarshal(one, newMsg()) != nil {
			fd := jsonField(md, m.name)
			if bad := nestedFieldError(newMsg, fd, m.value); bad != nil {
				return bad
			}
			return fence.Invalid(string(fd.Name()), fieldBound(fd, m.value), "")
		}
	}
	// Not reached with the request messages of this API: every member
	// decodes alone and none is repeated.
	return fence.Invalid("body", "a JSON object that decodes as "+string(md.FullName()), "")
}

// nestedFieldError names the field inside a message-typed member (a
// SessionRef: "session.seq") when its value is a JSON object that does not
// decode; nil when it is not one.
func nestedFieldError(newMsg func() proto.Message, fd protoreflect.FieldDescriptor, value []byte) error {
	if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.IsMap() || fd.Message().FullName() == "google.protobuf.Duration" || jsonKind(value) != "" {
		return nil
	}
	newInner := func() proto.Message { return newMsg().ProtoReflect().NewField(fd).Message().Interface() }
	var inv *fence.InvalidError
	if err := jsonFieldError(value, newInner); errors.As(err, &inv) && inv.Field != "body" {
		return fence.Invalid(string(fd.Name())+"."+inv.Field, inv.Bound, "")
	}
	return nil
}

// strictJSON is the JSON decoder of request bodies: proto3 JSON, unknown
// fields refused.
var strictJSON = protojson.UnmarshalOptions{DiscardUnknown: false}

// notAnObject describes body ("null", "an array", "malformed JSON (at byte
// 7)", ...) when it is not one JSON object; it returns "" when it is.
func notAnObject(body []byte) string {
	trimmed := bytes.Trim(body, jsonSpace)
	if len(trimmed) == 0 {
		return "an empty body"
	}
	// Into a RawMessage: only the syntax is checked (a number like 1e400
	// is valid JSON, though no float64 holds it).
	var v json.RawMessage
	if err := json.Unmarshal(trimmed, &v); err != nil {
		var syn *json.SyntaxError
		switch {
		case err.Error() == "unexpected end of JSON input":
			return fmt.Sprintf("JSON that ends early (after %d bytes)", len(body))
		case errors.As(err, &syn) && strings.Contains(syn.Error(), "max depth"):
			return fmt.Sprintf("JSON nested too deep (over 10000 levels, at byte %d)", int64(len(body)-len(bytes.TrimLeft(body, jsonSpace)))+syn.Offset)
		case errors.As(err, &syn):
			return fmt.Sprintf("malformed JSON (at byte %d)", int64(len(body)-len(bytes.TrimLeft(body, jsonSpace)))+syn.Offset)
		}
		return "malformed JSON"
	}
	return jsonKind(trimmed)
}

// jsonSpace is the whitespace JSON allows around a value: not \f, \v or
// the Unicode spaces bytes.TrimSpace also trims ("{}\f" is not a JSON
// object, and must be refused as malformed).
const jsonSpace = " \t\r\n"

// jsonKind names the kind of the JSON value raw ("" for an object).
func jsonKind(raw []byte) string {
	raw = bytes.Trim(raw, jsonSpace)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return ""
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't':
		return "true"
	case 'f':
		return "false"
	}
	return "a number"
}

// member is one "name": value of a JSON object, in body order.
type member struct {
	name  string
	value json.RawMessage
}

// objectMembers lists the members of body, a valid JSON object, in order
// and with repeats (encoding/json's map would keep only the last).
func objectMembers(body []byte) []member {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return nil
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return out
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return out
		}
		out = append(out, member{name, v})
	}
	return out
}

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
	return "a field of " + messageName(md) + " (" + strings.Join(names, ", ") + ")"
}

// fieldBound is the rule raw, the JSON value of fd that protojson refused,
// broke.
func fieldBound(fd protoreflect.FieldDescriptor, raw json.RawMessage) string {
	const digits = " (a JSON number or a string of digits)"
	switch fd.Kind() {
	case protoreflect.MessageKind:
		if fd.Message().FullName() == "google.protobuf.Duration" {
			return durationBound
		}
		return "a JSON object"
	case protoreflect.StringKind:
		if got := jsonKind(raw); got != "a string" {
			if got == "" {
				got = "an object"
			}
			return "a JSON string, got " + got
		}
		if esc := loneSurrogate(raw); esc != "" {
			return "valid UTF-8 (a lone surrogate " + esc + ")"
		}
		return "valid UTF-8"
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return "an unsigned 64-bit integer" + digits
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return "an unsigned 32-bit integer" + digits
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return "a 64-bit integer" + digits
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "a 32-bit integer" + digits
	case protoreflect.BytesKind:
		return "base64 (standard or URL-safe alphabet)"
	case protoreflect.BoolKind:
		return "true or false"
	}
	return "a JSON " + fd.Kind().String()
}

// loneSurrogate returns the first \uXXXX escape in raw (a JSON string) that
// is half of a UTF-16 surrogate pair without its other half, or "".
func loneSurrogate(raw []byte) string {
	s := string(raw)
	// esc returns the code unit of a \uXXXX escape at s[i:], or -1.
	esc := func(i int) int {
		if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
		if err != nil {
			return -1
		}
		return int(n)
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		u := esc(i)
		switch {
		case u < 0:
			i++ // an escape like \" or \\: skip the escaped character
		case u >= 0xD800 && u <= 0xDBFF:
			if low := esc(i + 6); low >= 0xDC00 && low <= 0xDFFF {
				i += 11
				continue
			}
			return s[i : i+6]
		case u >= 0xDC00 && u <= 0xDFFF:
			return s[i : i+6]
		default:
			i += 5
		}
	}
	return ""
}
