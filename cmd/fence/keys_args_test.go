package main

import (
	"slices"
	"testing"
)

// A key id may begin with '-' (base64url): after "retire" it is the ID, not
// an unknown flag.
func TestKeyIDStartingWithDashIsTheID(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"retire", "-k8XxAZD63wi"}, []string{"retire", "--", "-k8XxAZD63wi"}},
		{[]string{"retire", "-k8XxAZD63wi", "--now"}, []string{"retire", "--now", "--", "-k8XxAZD63wi"}},
		{[]string{"retire", "Ak8XxAZD63wi", "--now"}, []string{"retire", "Ak8XxAZD63wi", "--now"}},
		{[]string{"retire", "--now", "Ak8XxAZD63wi"}, []string{"retire", "--now", "Ak8XxAZD63wi"}},
		{[]string{"rotate"}, []string{"rotate"}},
	} {
		if got := keyIDsLast(c.in); !slices.Equal(got, c.want) {
			t.Errorf("keyIDsLast(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
