package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Snapshot streaming. A snapshot is the JSON encoding of snapDoc, exactly
// the bytes json.Marshal gives, but written a piece at a time: the
// document's fields in declaration order, and each element of a list field
// (locks, idle names, requests, ops, resources, sessions) on its own, with
// at most snapChunk bytes buffered before they go to the writer. So writing
// a snapshot needs memory for one element, not for the whole encoding:
// json.Marshal of a 500,000-lease state built a ~150 MB buffer by doubling
// and then copied it, about three times the snapshot's size at its peak,
// on top of the view.

// snapChunk is how much encoded output is buffered before it is written.
const snapChunk = 64 << 10

// snapField is one field of snapDoc as encoding/json sees it.
type snapField struct {
	index     int
	key       []byte // `"name":`
	omitEmpty bool
	list      bool // a slice: streamed element by element
}

// snapFields are snapDoc's fields in declaration order (the order
// encoding/json writes them in).
var snapFields = func() []snapField {
	t := reflect.TypeFor[snapDoc]()
	var out []snapField
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if !ok || name == "" || name == "-" || !f.IsExported() || f.Anonymous {
			// Every field is tagged with its name; a field that is not
			// would be encoded by rules this writer does not follow.
			panic(fmt.Sprintf("state: snapDoc field %s has no json name", f.Name))
		}
		key, _ := json.Marshal(name)
		out = append(out, snapField{index: i, key: append(key, ':'), omitEmpty: opts == "omitempty",
			list: f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() != reflect.Uint8})
	}
	return out
}()

// snapStream writes JSON values to w through a snapChunk buffer, counting
// what it wrote.
type snapStream struct {
	w   io.Writer
	buf bytes.Buffer
	enc *json.Encoder // encodes into buf, as json.Marshal does (HTML escaped)
	n   int64
	err error
}

func newSnapStream(w io.Writer) *snapStream {
	s := &snapStream{w: w}
	s.buf.Grow(snapChunk + 4<<10)
	s.enc = json.NewEncoder(&s.buf)
	return s
}

func (s *snapStream) raw(b ...byte) { s.buf.Write(b) }

// value appends v's encoding (json.Encoder ends it with a newline, which
// json.Marshal does not write: dropped).
func (s *snapStream) value(v any) {
	if s.err != nil {
		return
	}
	if err := s.enc.Encode(v); err != nil {
		s.err = err
		return
	}
	s.buf.Truncate(s.buf.Len() - 1)
	if s.buf.Len() >= snapChunk {
		s.flush()
	}
}

func (s *snapStream) flush() {
	if s.err != nil || s.buf.Len() == 0 {
		return
	}
	n, err := s.w.Write(s.buf.Bytes())
	s.n += int64(n)
	s.err = err
	s.buf.Reset()
}

// writeSnapDoc writes json.Marshal(doc)'s bytes to w, streamed.
func writeSnapDoc(w io.Writer, doc *snapDoc) (int64, error) {
	s := newSnapStream(w)
	v := reflect.ValueOf(doc).Elem()
	s.raw('{')
	first := true
	for _, f := range snapFields {
		fv := v.Field(f.index)
		if f.omitEmpty && emptyJSON(fv) {
			continue
		}
		if !first {
			s.raw(',')
		}
		first = false
		s.raw(f.key...)
		if !f.list || fv.IsNil() {
			s.value(fv.Interface())
			continue
		}
		s.raw('[')
		for i := range fv.Len() {
			if i > 0 {
				s.raw(',')
			}
			s.value(fv.Index(i).Addr().Interface())
		}
		s.raw(']')
	}
	s.raw('}')
	s.flush()
	return s.n, s.err
}

// emptyJSON is encoding/json's "empty" for omitempty.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
