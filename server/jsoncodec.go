package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// The API's JSON (docs/api.md, "The JSON contract"), read and written in
// one pass over the message's descriptor: decodeJSON reads a request
// strictly, encodeJSON writes a reply. Both are proto3 JSON with the
// contract's differences:
//
//   - 64-bit integers are written as JSON numbers (a token, a version, a
//     session id stays below 2^53 by design, so a number is exact in every
//     JSON parser and compares as a number), and read as a number or a
//     string of decimal digits (what Connect-ES sends);
//   - a duration is read as a number of seconds (30, 0.25), a proto3
//     string ("30s") or a Go duration string ("250ms", "1m30s"), exactly:
//     finer than a nanosecond or beyond a time.Duration is refused, never
//     truncated or saturated; it is written in proto3 form ("30s");
//   - a member the message does not have, a member given twice (also as
//     lock_delay and lockDelay) and a string that is not valid UTF-8 are
//     refused, not discarded or replaced: a misspelled op_id would
//     otherwise turn an idempotent write into one applied every time.
//
// Every refusal is an *fence.InvalidError naming the field (session.id
// inside a message) and the rule it broke, in words of its own.

// decodeJSON reads body, one JSON object, into msg.
func decodeJSON(body []byte, msg proto.Message) error {
	err := decodeObject(body, msg.ProtoReflect(), "")
	if err == nil {
		return nil
	}
	// Malformed JSON is named as such, before any member's fault: the
	// members read before the fault are not the body.
	if got := notAnObject(body); got != "" {
		return fence.Invalid("body", "a JSON object, got "+got, "")
	}
	return err
}

// decodeObject reads raw, a JSON object, into m; field names are prefixed
// with prefix.
func decodeObject(raw []byte, m protoreflect.Message, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errNotObject
	}
	md := m.Descriptor()
	var seen map[protoreflect.Name]string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		fd := jsonField(md, name)
		if fd == nil {
			if name == "" {
				name = `""`
			}
			return fence.Invalid(prefix+name, fieldsOf(md), "")
		}
		if prev, dup := seen[fd.Name()]; dup {
			return fence.Invalid(prefix+string(fd.Name()), fmt.Sprintf("given once (got %q and %q)", prev, name), "")
		}
		if seen == nil {
			seen = make(map[protoreflect.Name]string, 4)
		}
		seen[fd.Name()] = name
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if set := m.WhichOneof(od); set != nil {
				return fence.Invalid(prefix+string(fd.Name()), "absent when "+string(set.Name())+" is given (one of "+string(od.Name())+")", "")
			}
		}
		if err := decodeField(v, m, fd, prefix+string(fd.Name())); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errNotObject // something after the object
	}
	return nil
}

var errNotObject = errors.New("not one JSON object")

// decodeField sets fd of m from raw, its JSON value; name is the field as
// a refusal names it.
func decodeField(raw []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor, name string) error {
	kind := jsonKind(raw)
	if kind == "null" {
		if fd.Name() == "token" && !fd.IsList() {
			return fence.Invalid(name, "a token (a positive integer), not null", "null")
		}
		return nil // absent, as proto3 JSON reads null
	}
	switch {
	case fd.IsMap():
		return fence.Invalid(name, "absent (not read from JSON)", "")
	case fd.IsList():
		var elems []json.RawMessage
		if kind != "an array" || json.Unmarshal(raw, &elems) != nil {
			return fence.Invalid(name, "a JSON array", "")
		}
		l := m.Mutable(fd).List()
		for i, e := range elems {
			v, err := decodeValue(e, m, fd, fmt.Sprintf("%s[%d]", name, i))
			if err != nil {
				return err
			}
			l.Append(v)
		}
		return nil
	}
	v, err := decodeValue(raw, m, fd, name)
	if err != nil {
		return err
	}
	m.Set(fd, v)
	return nil
}

// decodeValue is raw, one JSON value (not null), as a value of fd.
func decodeValue(raw []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor, name string) (protoreflect.Value, error) {
	bad := func() (protoreflect.Value, error) {
		return protoreflect.Value{}, fence.Invalid(name, fieldBound(fd, raw), "")
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if fd.Message().FullName() == "google.protobuf.Duration" {
			d, err := decodeDuration(raw)
			if errors.Is(err, errDurationRange) {
				// Named as sent, not as the largest duration it saturates to.
				return protoreflect.Value{}, fence.Invalid(name, "at most "+maxDurationText+" (the largest duration; each field's own bound is lower)", sentText(raw))
			}
			if err != nil {
				return bad()
			}
			return protoreflect.ValueOfMessage(durationpb.New(d).ProtoReflect()), nil
		}
		if jsonKind(raw) != "" {
			return bad()
		}
		var inner protoreflect.Message
		if fd.IsList() {
			inner = m.Get(fd).List().NewElement().Message()
		} else {
			inner = m.NewField(fd).Message()
		}
		if err := decodeObject(raw, inner, name+"."); err != nil {
			if errors.Is(err, errNotObject) {
				return bad()
			}
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfMessage(inner), nil
	case protoreflect.StringKind:
		if jsonKind(raw) != "a string" || !utf8.Valid(raw) || loneSurrogate(raw) != "" {
			return bad()
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return bad()
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		var s string
		if jsonKind(raw) != "a string" || json.Unmarshal(raw, &s) != nil {
			return bad()
		}
		b, err := decodeBase64(s)
		if err != nil {
			return bad()
		}
		return protoreflect.ValueOfBytes(b), nil
	case protoreflect.BoolKind:
		switch string(raw) {
		case "true":
			return protoreflect.ValueOfBool(true), nil
		case "false":
			return protoreflect.ValueOfBool(false), nil
		}
		return bad()
	case protoreflect.EnumKind:
		var s string
		if jsonKind(raw) == "a string" && json.Unmarshal(raw, &s) == nil {
			if ev := fd.Enum().Values().ByName(protoreflect.Name(s)); ev != nil {
				return protoreflect.ValueOfEnum(ev.Number()), nil
			}
			return bad()
		}
		n, ok := decodeInt(raw, true, 32)
		if !ok {
			return bad()
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n.Int64())), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if n, ok := decodeInt(raw, false, 64); ok {
			return protoreflect.ValueOfUint64(n.Uint64()), nil
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if n, ok := decodeInt(raw, false, 32); ok {
			return protoreflect.ValueOfUint32(uint32(n.Uint64())), nil
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if n, ok := decodeInt(raw, true, 64); ok {
			return protoreflect.ValueOfInt64(n.Int64()), nil
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if n, ok := decodeInt(raw, true, 32); ok {
			return protoreflect.ValueOfInt32(int32(n.Int64())), nil
		}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		var f float64
		if jsonKind(raw) == "a number" && json.Unmarshal(raw, &f) == nil {
			if fd.Kind() == protoreflect.FloatKind {
				return protoreflect.ValueOfFloat32(float32(f)), nil
			}
			return protoreflect.ValueOfFloat64(f), nil
		}
	}
	return bad()
}

// Integers given as strings (docs/api.md, "The JSON contract" 1: a number
// or a decimal string): the strict rule openapi.yaml gives, decimal digits
// with no leading zero ("0" itself aside), a minus sign for signed fields.
// A JSON number may be written in any form that is a whole number (100,
// 1e2, 100.0), as proto3 JSON reads it.
var (
	unsignedDigits = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
	signedDigits   = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
)

// decodeInt reads raw, a JSON number or a string of digits, as an integer
// that fits bits bits (signed or not); ok is false when it is not one.
func decodeInt(raw []byte, signed bool, bits int) (*big.Int, bool) {
	var n *big.Int
	switch jsonKind(raw) {
	case "a string":
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		re := unsignedDigits
		if signed {
			re = signedDigits
		}
		if !re.MatchString(s) {
			return nil, false
		}
		n, _ = new(big.Int).SetString(s, 10)
	case "a number":
		r, ok := new(big.Rat).SetString(string(raw))
		if !ok || !r.IsInt() {
			return nil, false
		}
		n = r.Num()
	default:
		return nil, false
	}
	if signed {
		lim := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
		return n, n.Cmp(lim) < 0 && n.Cmp(new(big.Int).Neg(lim)) >= 0
	}
	return n, n.Sign() >= 0 && n.BitLen() <= bits
}

// decodeBase64 reads standard or URL-safe base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.DecodeString(s)
}

// durationBound is the rule a duration in a JSON request must follow.
const durationBound = `a duration: a number of seconds (30, 0.25) or a string such as "30s", "250ms" or "1m30s"`

var (
	errFinerThanNanosecond = errors.New("finer than a nanosecond")
	errDurationRange       = errors.New("out of range")
)

// maxDurationText is the largest duration a field can hold.
var maxDurationText = time.Duration(math.MaxInt64).String()

// decodeDuration reads raw, a JSON number of seconds or a duration string
// (proto3's "30s" is a Go duration string too), exactly.
func decodeDuration(raw []byte) (time.Duration, error) {
	var ns *big.Int
	var err error
	switch jsonKind(raw) {
	case "a number":
		r, ok := new(big.Rat).SetString(string(raw))
		if !ok {
			return 0, errors.New("not a number")
		}
		ns, err = exactNanoseconds(r.Mul(r, big.NewRat(int64(time.Second), 1)))
	case "a string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		ns, err = parseDurationExact(s)
	default:
		return 0, errors.New("not a number or a string")
	}
	if err != nil {
		return 0, err
	}
	return time.Duration(ns.Int64()), nil
}

// goDurationUnits are time.ParseDuration's units, in nanoseconds.
var goDurationUnits = map[string]int64{
	"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9,
}

// goDurationPart is one number and unit of a Go duration string.
var goDurationPart = regexp.MustCompile(`^([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)`)

// parseDurationExact reads s, a Go duration string, as a whole number of
// nanoseconds: an error for bad syntax, errFinerThanNanosecond, or
// errDurationRange beyond what a time.Duration holds. (time.ParseDuration
// truncates what is finer than a nanosecond: "0.5ns" is 0.)
func parseDurationExact(s string) (*big.Int, error) {
	orig := s
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "0" {
		return new(big.Int), nil
	}
	if s == "" {
		return nil, errors.New("invalid duration " + orig)
	}
	total := new(big.Rat)
	for s != "" {
		p := goDurationPart.FindStringSubmatch(s)
		if p == nil || p[1] == "" || p[1] == "." {
			return nil, errors.New("invalid duration " + orig)
		}
		var r big.Rat
		if _, ok := r.SetString(p[1]); !ok {
			return nil, errors.New("invalid duration " + orig)
		}
		total.Add(total, r.Mul(&r, new(big.Rat).SetInt64(goDurationUnits[p[2]])))
		s = s[len(p[0]):]
	}
	if neg {
		total.Neg(total)
	}
	return exactNanoseconds(total)
}

// exactNanoseconds is ns, a number of nanoseconds, as an integer within a
// time.Duration's range.
func exactNanoseconds(ns *big.Rat) (*big.Int, error) {
	if !ns.IsInt() {
		return nil, errFinerThanNanosecond
	}
	n := ns.Num()
	if n.CmpAbs(big.NewInt(math.MaxInt64)) > 0 {
		return nil, errDurationRange
	}
	return n, nil
}

// sentText is raw, a JSON value, as the client wrote it: a string's
// contents, else the JSON text.
func sentText(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// encodeJSON is msg in the API's JSON: proto3 JSON (fields by their JSON
// names, defaults left out, durations as "30s", bytes as base64) with
// 64-bit integers as JSON numbers.
func encodeJSON(msg proto.Message) []byte {
	return appendMessage(make([]byte, 0, 256), msg.ProtoReflect())
}

func appendMessage(b []byte, m protoreflect.Message) []byte {
	if m.Descriptor().FullName() == "google.protobuf.Duration" {
		return appendDuration(b, m.Interface().(*durationpb.Duration))
	}
	b = append(b, '{')
	first := true
	fs := m.Descriptor().Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if !m.Has(fd) || fd.IsMap() { // the API has no map fields
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, fd.JSONName())
		b = append(b, ':')
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			b = append(b, '[')
			for j := 0; j < l.Len(); j++ {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendValue(b, fd, l.Get(j))
			}
			b = append(b, ']')
		default:
			b = appendValue(b, fd, v)
		}
	}
	return append(b, '}')
}

func appendValue(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return appendMessage(b, v.Message())
	case protoreflect.StringKind:
		return appendString(b, v.String())
	case protoreflect.BytesKind:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v.Bytes())
		return append(b, '"')
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return appendString(b, string(ev.Name()))
		}
		return strconv.AppendInt(b, int64(v.Enum()), 10)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(b, v.Uint(), 10)
	case protoreflect.FloatKind:
		return strconv.AppendFloat(b, v.Float(), 'g', -1, 32)
	case protoreflect.DoubleKind:
		return strconv.AppendFloat(b, v.Float(), 'g', -1, 64)
	}
	return strconv.AppendInt(b, v.Int(), 10)
}

// appendDuration writes d as proto3 JSON does: seconds with 0, 3, 6 or 9
// decimals and an "s".
func appendDuration(b []byte, d *durationpb.Duration) []byte {
	sec, nanos := d.GetSeconds(), d.GetNanos()
	b = append(b, '"')
	if sec < 0 || nanos < 0 {
		b = append(b, '-')
		sec, nanos = -sec, -nanos
	}
	b = strconv.AppendInt(b, sec, 10)
	if nanos != 0 {
		f := fmt.Sprintf("%09d", nanos)
		switch {
		case strings.HasSuffix(f, "000000"):
			f = f[:3]
		case strings.HasSuffix(f, "000"):
			f = f[:6]
		}
		b = append(append(b, '.'), f...)
	}
	return append(b, 's', '"')
}

// appendString writes s as a JSON string (invalid UTF-8 as U+FFFD).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			switch r {
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = fmt.Appendf(b, `\u%04x`, r)
			}
		case r == '\u2028' || r == '\u2029':
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// messageName is md's name as a client knows it: grpchealth's own package
// prefix (connectext.) left out.
func messageName(md protoreflect.MessageDescriptor) string {
	return strings.TrimPrefix(string(md.FullName()), "connectext.")
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

// writeObject writes members as one JSON object, in order.
func writeObject(members []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// writeValue is the value a WriteRequest sets: value's bytes, or text's
// (for JSON clients that would otherwise send "1234" as base64 and store
// three other bytes). Both given is refused.
func writeValue(m *fencev1.WriteRequest) ([]byte, error) {
	// One rule for both: an empty one counts as absent (value, proto3
	// bytes, cannot tell "" from absent; text follows it), two non-empty
	// ones are refused.
	if m.GetText() == "" {
		return m.GetValue(), nil
	}
	if len(m.GetValue()) > 0 {
		return nil, fence.Invalid("text", "empty or absent when value is given (give value or text, not both; an empty one counts as absent)", "")
	}
	return []byte(m.GetText()), nil
}

// addText sets the text of every ResourceState in m whose value is valid
// UTF-8 (JSON replies only: a binary client has the bytes).
func addText(m protoreflect.Message) {
	if rs, ok := m.Interface().(*fencev1.ResourceState); ok {
		if utf8.Valid(rs.Value) {
			rs.Text = proto.String(string(rs.Value))
		}
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind || fd.IsMap() || fd.Message().FullName().Parent() == "google.protobuf" {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				addText(l.Get(i).Message())
			}
			return true
		}
		addText(v.Message())
		return true
	})
}
