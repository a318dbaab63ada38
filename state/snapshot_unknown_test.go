package state

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fenceworks/fence/state/internal/statepb"
)

// A snapshot field this binary does not know — in the header, in a nested
// message of the header, or nested in a record — is refused naming the
// message that holds it (written by a later format: R2 refuses rather
// than misreads).
func TestSnapshotUnknownFieldNamedAtAnyDepth(t *testing.T) {
	good := snapshotBytes(t, busyMachine(t))
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)
	for _, tc := range []struct {
		name string
		edit func(h *statepb.SnapshotHeader, recs []*statepb.SnapshotRecord)
		want string
	}{
		{"header", func(h *statepb.SnapshotHeader, _ []*statepb.SnapshotRecord) {
			h.ProtoReflect().SetUnknown(unknown)
		}, "unknown field in SnapshotHeader"},
		{"header's config", func(h *statepb.SnapshotHeader, _ []*statepb.SnapshotRecord) {
			h.Config.ProtoReflect().SetUnknown(unknown)
		}, "unknown field in Config"},
		{"a lock's holder", func(_ *statepb.SnapshotHeader, recs []*statepb.SnapshotRecord) {
			for _, r := range recs {
				if l := r.GetLock(); l != nil && l.Holder != nil {
					l.Holder.ProtoReflect().SetUnknown(unknown)
					return
				}
			}
			t.Fatal("no held lock in the snapshot")
		}, "unknown field in Grant"},
	} {
		h, recs := snapMessages(t, good)
		tc.edit(h, recs)
		err := New().Restore(strings.NewReader(string(encodeSnap(h, recs...))))
		if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadSnapshot naming %q", tc.name, err, tc.want)
		}
	}
}

// A cluster id is 1 to MaxClusterIDBytes of ASCII letters, digits, '-' and
// '_': each end of each class is in, its neighbours out.
func TestValidateClusterIDBoundaries(t *testing.T) {
	for _, ok := range []string{"a", "z", "A", "Z", "0", "9", "-", "_", strings.Repeat("x", MaxClusterIDBytes)} {
		if err := ValidateClusterID(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "`", "{", "@", "[", "/", ":", ".", " ", "é", strings.Repeat("x", MaxClusterIDBytes+1)} {
		if err := ValidateClusterID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
