package server

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
)

// strictJSONCodec is the API's JSON (decodeJSON, encodeJSON) as a Connect
// codec, for the protocols Connect serves with JSON messages: gRPC and
// gRPC-Web with +json, and Connect streaming (application/connect+json).
// Its refusal is invalid_argument whose message names the field (Connect
// wraps a codec's error, so it carries no ErrorDetail). Binary protobuf
// keeps accepting unknown fields.
type strictJSONCodec struct{ name string }

// jsonCodecs replace Connect's two JSON codec names.
func jsonCodecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(strictJSONCodec{"json"}),
		connect.WithCodec(strictJSONCodec{"json; charset=utf-8"}),
	}
}

func (c strictJSONCodec) Name() string { return c.name }

func (c strictJSONCodec) Marshal(m any) ([]byte, error) {
	msg, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", m)
	}
	addText(msg.ProtoReflect())
	return encodeJSON(msg), nil
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
