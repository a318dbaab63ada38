package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/api/leanwire"
)

// BenchmarkLeanSessionAcquireRelease is BenchmarkStreamAcquireRelease on
// the lean session port (fence-lean's path): each client goroutine has a
// session of its own and its own lean connection, driven frame by frame
// (no client package: the client's side costs little), and runs
// session-bound acquire → release cycles, each waiting for its reply.
// cpu-µs/cycle is the process's CPU per cycle, mostly the server's.
func BenchmarkLeanSessionAcquireRelease(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, url := startServerOnNode(b, Config{})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- s.ServeSessions(ln) }()
			b.Cleanup(func() {
				s.Close()
				<-served
			})
			sc := fencev1connect.NewSessionServiceClient(h2cClient(), url)
			runCycles(b, s, clients, func() (cycle, error) {
				open, err := sc.Open(context.Background(), connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Hour)}))
				if err != nil {
					return nil, err
				}
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					return nil, err
				}
				b.Cleanup(func() { c.Close() })
				r, w := bufio.NewReader(c), bufio.NewWriter(c)
				_ = leanwire.WriteFrame(w, leanwire.KindHello, leanwire.Hello{Version: leanwire.Version}.Append(nil))
				var (
					call uint64
					out  []byte
					in   []byte
					rep  fencev1.SessionReply
				)
				send := func(m *fencev1.SessionRequest) (*fencev1.SessionReply, error) {
					call++
					m.Call = call
					out, err = proto.MarshalOptions{}.MarshalAppend(out[:0], m)
					if err != nil {
						return nil, err
					}
					if err := leanwire.WriteFrame(w, leanwire.KindRequest, out); err != nil {
						return nil, err
					}
					if err := w.Flush(); err != nil {
						return nil, err
					}
					kind, payload, err := leanwire.ReadFrame(r, 1<<23, &in)
					if err != nil {
						return nil, err
					}
					if kind != leanwire.KindReply {
						return nil, fmt.Errorf("frame kind %d", kind)
					}
					rep.Reset()
					if err := proto.Unmarshal(payload, &rep); err != nil {
						return nil, err
					}
					if rep.GetCall() != call || rep.GetError() != nil {
						return nil, fmt.Errorf("call %d: reply to %d: %s", call, rep.GetCall(), rep.GetMessage())
					}
					return &rep, nil
				}
				// The first message names the session.
				session := open.Msg.GetSession().GetId()
				acq := &fencev1.SessionRequest{Session: session, Op: &fencev1.SessionRequest_Acquire{Acquire: &fencev1.AcquireRequest{Owner: "bench"}}}
				rel := &fencev1.ReleaseRequest{}
				relm := &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Release{Release: rel}}
				return func(name string) error {
					acq.GetAcquire().Name = name
					a, err := send(acq)
					if err != nil {
						return err
					}
					acq.Session = 0
					rel.Name, rel.Token = name, a.GetAcquire().GetLease().GetToken()
					_, err = send(relm)
					return err
				}, nil
			})
		})
	}
}
