package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// The JSON the API writes (docs/api.md, "The JSON contract"): proto3 JSON
// except that 64-bit integers are JSON numbers, not strings. A token, a
// version, a session id or a raft index stays below 2^53 by design, so a
// number is exact in every JSON parser (a JavaScript number, a PHP int, a
// Python int), and the naive comparison is right: with tokens 99 and 100,
// "100" > "99" is false in JavaScript, max("99", "100") is "99" in Python.
// The int64 fields that are not bounded so (AddRequest.delta,
// AddResponse.value) are numbers too: exact in the JSON text; a JavaScript
// JSON.parse rounds beyond 2^53 (the resource's text carries the value as
// decimal digits).

// marshalJSON is the API's JSON encoding of msg.
func marshalJSON(msg proto.Message) ([]byte, error) {
	addText(msg.ProtoReflect())
	b, err := protojson.MarshalOptions{}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return numbers(b, msg.ProtoReflect().Descriptor()), nil
}

// numbers rewrites raw, a JSON object protojson wrote for a message of type
// md, with every 64-bit integer field as a JSON number (protojson quotes
// them). Other fields are copied as they are; raw is returned unchanged when
// it has no 64-bit integer.
func numbers(raw []byte, md protoreflect.MessageDescriptor) []byte {
	if md.FullName().Parent() == "google.protobuf" {
		return raw // well-known types keep their JSON form (a Duration is "5s")
	}
	members := objectMembers(raw)
	if members == nil {
		return raw
	}
	changed := false
	for i, m := range members {
		fd := jsonField(md, m.name)
		if fd == nil || fd.IsMap() {
			continue
		}
		var v []byte
		switch {
		case is64(fd) && fd.IsList():
			v = eachElement(m.value, unquoteInt)
		case is64(fd):
			v = unquoteInt(m.value)
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			v = eachElement(m.value, func(e []byte) []byte { return numbers(e, fd.Message()) })
		case fd.Kind() == protoreflect.MessageKind:
			v = numbers(m.value, fd.Message())
		default:
			continue
		}
		if !bytes.Equal(v, m.value) {
			members[i].value, changed = v, true
		}
	}
	if !changed {
		return raw
	}
	return writeObject(members)
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

// is64 reports whether fd is a 64-bit integer (proto3 JSON quotes them).
func is64(fd protoreflect.FieldDescriptor) bool {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// unquoteInt turns "123" (a quoted decimal integer) into 123; anything else
// is returned as it is.
func unquoteInt(v []byte) []byte {
	if len(v) < 3 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	digits := v[1 : len(v)-1]
	if digits[0] == '-' {
		if len(digits) == 1 {
			return v
		}
		digits = digits[1:]
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return v
		}
	}
	return v[1 : len(v)-1]
}

// eachElement applies f to every element of the JSON array raw.
func eachElement(raw []byte, f func([]byte) []byte) []byte {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return raw
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, e := range elems {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(f(e))
	}
	b.WriteByte(']')
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
