package main

import (
	"fmt"

	"github.com/fenceworks/fence/client"
)

// resourceJSON is the --json output of write, add and read: the API's
// ResourceState as its JSON replies write it (value base64, text when the
// value is UTF-8).
type resourceJSON struct {
	Resource  string  `json:"resource"`
	Value     string  `json:"value"`          // base64, as the API's JSON
	Text      *string `json:"text,omitempty"` // the value as text, when it is valid UTF-8
	LastToken uint64  `json:"lastToken"`
	Version   uint64  `json:"version"`
	Replayed  *bool   `json:"replayed,omitempty"` // write and add only
	Deleted   bool    `json:"deleted,omitempty"`  // as the API: deleted and not written since
}

func toResourceJSON(r client.Resource, withReplayed bool) resourceJSON {
	v, text := valueJSON(r.Value)
	out := resourceJSON{Resource: r.Resource, Value: v, Text: text, LastToken: uint64(r.LastToken), Version: r.Version, Deleted: r.Deleted}
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
