package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// BenchmarkAcquireReleaseOperatorView is BenchmarkAcquireRelease (16
// clients) with the operator view's recording on (the story book and the
// activity ring fed, as served) and off (no changes hook, no ring), in the
// same run: what the story and the activity cost the grant path.
func BenchmarkAcquireReleaseOperatorView(b *testing.B) {
	const clients = 16
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("view=%t", on), func(b *testing.B) {
			s, url := serveOn(b, Config{}, state.Config{}, func(tb testing.TB, cfg Config, rules state.Config) (*Server, error) {
				s, err := newOverNode(tb, cfg, rules)
				if err == nil && !on {
					nodeOf(s).OnChanges(nil)
					s.activity = nil
				}
				return s, err
			})
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
			defer hc.CloseIdleConnections()
			lc := fencev1connect.NewLockServiceClient(hc, url)
			runCycles(b, s, clients, func() (cycle, error) {
				ctx := context.Background()
				return func(name string) error {
					a, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "bench", Ttl: durationpb.New(time.Minute)}))
					if err != nil {
						return err
					}
					_, err = lc.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: name, Token: a.Msg.Lease.Token}))
					return err
				}, nil
			})
		})
	}
}

// BenchmarkNoteChanges is the recording alone, on raft's FSM goroutine:
// one applied command's grant change into the story book and the activity
// ring; names=100: names the book keeps, names=8192: more than it keeps,
// so every touch evicts the least recently touched (the worst case).
func BenchmarkNoteChanges(b *testing.B) {
	for _, n := range []int{100, 2 * storyNames} {
		b.Run(fmt.Sprintf("names=%d", n), func(b *testing.B) {
			s := &Server{story: newStoryBook(time.Now), activity: newActivityRing(time.Now)}
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprint("bench/", i)
			}
			cs := []state.Change{{Kind: state.ChangeGranted, Owner: "bench", Principal: "token:0123456789abcdef"}}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				cs[0].Name, cs[0].Token = names[i%len(names)], fence.Token(i+1)
				s.noteChanges(uint64(i+1), cs)
			}
		})
	}
}

// BenchmarkActivityAcquired is one acquire's latency recorded.
func BenchmarkActivityAcquired(b *testing.B) {
	r := newActivityRing(time.Now)
	b.ReportAllocs()
	for b.Loop() {
		r.acquired(time.Millisecond)
	}
}
