package server

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenceworks/fence/cluster"
)

// filledStatus is a cluster.NodeStatus with every field set (no zero).
func filledStatus(t *testing.T) cluster.NodeStatus {
	var s cluster.NodeStatus
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Int64: // time.Duration
			f.SetInt(int64(time.Duration(i+1) * time.Second))
		default:
			t.Fatalf("NodeStatus.%s: a %s, which this test does not fill", v.Type().Field(i).Name, f.Kind())
		}
	}
	return s
}

// TestNodeStatusCrossesTheWireWhole: every field of a cluster.NodeStatus
// is sent (each field of the NodeStatusResponse is set) and read back.
func TestNodeStatusCrossesTheWireWhole(t *testing.T) {
	s := filledStatus(t)
	p := nodeStatusToProto(s)
	fields := p.ProtoReflect().Descriptor().Fields()
	set := 0
	p.ProtoReflect().Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool { set++; return true })
	if set != fields.Len() {
		t.Errorf("a NodeStatus with every field set fills %d of NodeStatusResponse's %d fields: %v", set, fields.Len(), p)
	}
	if got := nodeStatusFromProto(p); got != s {
		t.Errorf("NodeStatus through the wire:\n\tgot  %+v\n\twant %+v", got, s)
	}
}

// TestMembersCrossTheWireWhole: a MemberList's members keep their fields
// and statuses; a member without a status has none on the wire.
func TestMembersCrossTheWireWhole(t *testing.T) {
	s := filledStatus(t)
	l := cluster.MemberList{AnsweredBy: "n1", Members: []cluster.Member{
		{ID: "n1", RaftAddr: "a:1", Suffrage: cluster.Voter, Leader: true, Status: &s},
		{ID: "n2", RaftAddr: "a:2", Suffrage: cluster.Nonvoter, Error: "unreachable: x"},
	}}
	p := membersToProto(l)
	if p.GetAnsweredBy() != "n1" || len(p.GetMembers()) != 2 {
		t.Fatalf("got %v", p)
	}
	m0, m1 := p.GetMembers()[0], p.GetMembers()[1]
	if m0.GetId() != "n1" || m0.GetRaftAddr() != "a:1" || m0.GetSuffrage() != "voter" || !m0.GetLeader() || m0.GetError() != "" || nodeStatusFromProto(m0.GetStatus()) != s {
		t.Errorf("member 0: %v", m0)
	}
	if m1.GetId() != "n2" || m1.GetSuffrage() != "nonvoter" || m1.GetLeader() || m1.GetStatus() != nil || m1.GetError() != "unreachable: x" {
		t.Errorf("member 1: %v", m1)
	}
}
