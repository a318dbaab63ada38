package main

import (
	"fmt"

	"github.com/fenceworks/fence/client"
)

// resourceJSON is the --json output of write, add and read.
type resourceJSON struct {
	Resource    string `json:"resource"`
	Value       string `json:"value"`
	ValueBase64 bool   `json:"valueBase64,omitempty"` // Value is base64: the bytes are not UTF-8
	LastToken   uint64 `json:"lastToken"`
	Version     uint64 `json:"version"`
	Replayed    *bool  `json:"replayed,omitempty"` // write and add only
	Deleted     bool   `json:"deleted,omitempty"`  // as the API: deleted and not written since
}

func toResourceJSON(r client.Resource, withReplayed bool) resourceJSON {
	v, b64 := valueJSON(r.Value)
	out := resourceJSON{Resource: r.Resource, Value: v, ValueBase64: b64, LastToken: uint64(r.LastToken), Version: r.Version, Deleted: r.Deleted}
	if withReplayed {
		out.Replayed = &r.Replayed
	}
	return out
}

// resourceLine is the human line of a resource state.
func resourceLine(verb string, r client.Resource) string {
	s := fmt.Sprintf("%s%s value=%s last_token=%d version=%d", verb, nameHuman(r.Resource), valueHuman(r.Value), r.LastToken, r.Version)
	if r.Deleted {
		s += " (deleted)"
	}
	if r.Replayed {
		s += " (replayed: op_id already applied)"
	}
	return s
}
