package server

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// strictJSONCodec is the API's JSON (decodeJSON, encodeJSON) as a Connect
// codec, for the protocols Connect serves with JSON messages: gRPC and
// gRPC-Web with +json, and Connect streaming (application/connect+json).
// Its refusal is invalid_argument whose message names the field (Connect
// wraps a codec's error, so it carries no ErrorDetail). Binary protobuf
// keeps accepting unknown fields.
type strictJSONCodec struct{ name string }

// jsonCodecs replace Connect's two JSON codec names.
// The binary codec is Connect's own but for a watch's events
// (sharedProtoCodec).
func jsonCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(strictJSONCodec{"json"}),
		connect.WithCodec(strictJSONCodec{"json; charset=utf-8"}),
		connect.WithCodec(sharedProtoCodec{}),
	}
}

// sharedWatchEvent is the i-th event of a watch's last batch as a watch
// stream sends it (lockService.Watch): the codec writes the encoding
// every watch of its change shares (watchSession.encoded) instead of
// encoding it again. Shared bytes only ever go out through MarshalAppend,
// which copies them into Connect's buffer: Connect puts what Marshal
// returns into its buffer pool and writes over it later.
type sharedWatchEvent struct {
	w   *watchSession
	i   int
	msg *fencev1.WatchEvent
}

func (c strictJSONCodec) Name() string { return c.name }

func (c strictJSONCodec) Marshal(m any) ([]byte, error) {
	return c.MarshalAppend(nil, m)
}

// MarshalAppend appends m's JSON to dst (a watch's event: the shared
// bytes, copied).
func (c strictJSONCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	if se, ok := m.(*sharedWatchEvent); ok {
		return append(dst, se.w.encoded(se.i, formConnectJSON, se.msg, func(msg proto.Message) []byte {
			addText(msg.ProtoReflect())
			return encodeJSON(msg)
		})...), nil
	}
	msg, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", m)
	}
	addText(msg.ProtoReflect())
	return appendMessage(dst, msg.ProtoReflect()), nil
}

func (c strictJSONCodec) Unmarshal(data []byte, m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto.Message", m)
	}
	if len(data) == 0 {
		return errors.New("invalid body: must be a JSON object, got an empty body")
	}
	return decodeJSON(data, msg)
}

// sharedProtoCodec is Connect's binary protobuf codec (gRPC, gRPC-Web,
// Connect with proto) that writes a watch's events from the encoding the
// watches of their change share.
type sharedProtoCodec struct{}

func (sharedProtoCodec) Name() string { return "proto" }

func (c sharedProtoCodec) Marshal(m any) ([]byte, error) { return c.MarshalAppend(nil, m) }

func (sharedProtoCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	if se, ok := m.(*sharedWatchEvent); ok {
		return append(dst, se.w.encoded(se.i, formProto, se.msg, func(msg proto.Message) []byte {
			b, _ := proto.Marshal(msg)
			return b
		})...), nil
	}
	msg, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, msg)
}

func (sharedProtoCodec) Unmarshal(data []byte, m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto.Message", m)
	}
	if err := proto.Unmarshal(data, msg); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

func (sharedProtoCodec) MarshalStable(m any) ([]byte, error) {
	msg, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", m)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(msg)
}

func (sharedProtoCodec) IsBinary() bool { return true }
