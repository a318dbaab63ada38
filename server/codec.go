package server

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
)

// strictJSONCodec is Connect's proto3 JSON codec with the differences of
// the API's JSON contract (docs/api.md): 64-bit integers are written as
// JSON numbers (jsonout.go), and a field the message does not have is
// refused, not discarded (Connect's own codec discards them). It decodes the JSON bodies checkJSONBodies does not
// look at (gzip-compressed JSON, gRPC and Connect streaming with +json);
// their refusal is invalid_argument whose message names the field (Connect
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
	return marshalJSON(msg)
}

func (c strictJSONCodec) Unmarshal(data []byte, m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto.Message", m)
	}
	if len(data) == 0 {
		return errors.New("invalid body: must be a JSON object, got an empty body")
	}
	data, err := normalizeDurations(data, msg.ProtoReflect().Descriptor())
	if err != nil {
		return err
	}
	if err := strictJSON.Unmarshal(data, msg); err != nil {
		// The same words checkJSONBodies sends in its detail.
		if bad := jsonFieldError(data, func() proto.Message { return msg.ProtoReflect().Type().New().Interface() }); bad != nil {
			return bad
		}
		return err
	}
	return nil
}
