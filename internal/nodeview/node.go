// Package nodeview shows a node, and the cluster membership around it, as
// package server asks for them (server.Node, server.Membership, the
// node's metrics): the daemon's adapters, declared apart from the daemon
// so that the server's own tests can put a real node behind it.
package nodeview

import (
	"context"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/backup"
	"github.com/fenceworks/fence/internal/buildinfo"
	"github.com/fenceworks/fence/node"
)

// Node is a node as the server sees it (it implements server.Node).
// Caught reports whether it has caught up with its cluster since it
// started (cluster.Membership.CaughtUp); nil: always.
type Node struct {
	N      *node.Node
	Caught func() bool
}

// Readiness is the node's Status().Ready(), and caught up since its start,
// with the indexes /readyz shows.
func (v Node) Readiness() (bool, string) {
	st := v.N.Status()
	if !st.Ready() {
		return false, fmt.Sprintf("leader=%t in_office=%t applied=%d commit=%d signing_key=%t", st.Leader, st.InOffice, st.AppliedIndex, st.CommitIndex, st.SigningKey)
	}
	if v.Caught != nil && !v.Caught() {
		return false, fmt.Sprintf("not caught up with the cluster since start: applied=%d", st.AppliedIndex)
	}
	return true, fmt.Sprintf("applied=%d last_token=%d", st.AppliedIndex, st.LastToken)
}

// IsLeader reports whether the node leads and is in office.
func (v Node) IsLeader() bool { return v.N.IsLeader() }

// MaxTTL is the largest TTL the rules recorded in the log allow (0 before
// any are known).
func (v Node) Limits() fence.Limits { return v.N.Limits() }

// Backup copies the node's state (node.BackupView) and returns the
// header's facts and the function that writes the file (backup.Write).
func (v Node) Backup(ctx context.Context) (*fencev1.BackupHeader, func(io.Writer) error, error) {
	// A node that knows no leader (an election under way, or cut off from
	// the others) may be behind what the cluster committed and would not
	// know it: its backup is refused, so that a client asks another node.
	if id, _ := v.N.Leader(); id == "" {
		return nil, nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("node %s knows no leader (an election is under way, or it is cut off from the others): its state may be behind what the cluster committed; back up through another node, or retry", v.N.ID()))
	}
	p, err := v.N.BackupView(ctx)
	if err != nil {
		return nil, nil, err
	}
	h := backup.Header{
		ClusterID: p.ClusterID, NodeID: p.NodeID, Role: p.Role,
		AppliedIndex: p.Applied, Term: p.Term, LastToken: p.LastToken,
		ServerTimeNS: p.ServerTime, WallUnixMS: p.WallUnixMS, Version: buildinfo.Version(),
	}
	hdr := &fencev1.BackupHeader{
		Format: backup.FormatVersion, ClusterId: h.ClusterID, NodeId: h.NodeID, Role: h.Role,
		AppliedIndex: h.AppliedIndex, Term: h.Term, LastToken: uint64(h.LastToken),
		ServerTime: durationpb.New(time.Duration(h.ServerTimeNS)), WallUnixMs: h.WallUnixMS, Version: h.Version,
	}
	return hdr, func(w io.Writer) error { return backup.Write(w, h, p.View) }, nil
}
