package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// TestDeleteFencedLikeWrite: Delete refuses an older token, keeps the last
// accepted token (a stale writer stays refused), and replays by op_id.
func TestDeleteFencedLikeWrite(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t)
	a, err := c.Acquire(ctx, name+"/a", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	b, err := c.Acquire(ctx, name+"/b", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	res := name + "/res"
	if _, err := c.Write(ctx, res, b.Token(), []byte("8")); err != nil {
		t.Fatal(err)
	}
	_, err = c.Delete(ctx, res, a.Token())
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.LastAccepted != b.Token() {
		t.Fatalf("delete with the older token: %v, want *StaleTokenError naming %d", err, b.Token())
	}
	st, err := c.Delete(ctx, res, b.Token(), client.OpID("del-"+name))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Value) != 0 || st.LastToken != b.Token() || st.Replayed || st.Resource != res || !st.Deleted {
		t.Fatalf("after delete: %+v, want empty value, last token %d", st, b.Token())
	}
	again, err := c.Delete(ctx, res, b.Token(), client.OpID("del-"+name))
	if err != nil || !again.Replayed {
		t.Fatalf("delete replay: %+v %v, want Replayed", again, err)
	}
	if rd, err := c.Read(ctx, res); err != nil || !rd.Deleted || rd.LastToken != b.Token() {
		t.Fatalf("read after delete: %+v %v, want Deleted with last token %d", rd, err, b.Token())
	}
	if _, err := c.Write(ctx, res, a.Token(), []byte("5")); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale write after delete: %v, want ErrStaleToken", err)
	}
}

// TestListPages: ListPage returns pages of the asked size that together
// list every lock once, in name order; List returns them all.
func TestListPages(t *testing.T) {
	ctx, prefix := ctxFor(t), uniq(t)+"/"
	c := newClient(t)
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("%s%d", prefix, i)
		l, err := c.Acquire(ctx, name, client.TTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		want = append(want, name)
	}
	var got []string
	pages := 0
	for token := ""; ; {
		page, next, err := c.ListPage(ctx, prefix, token, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 2 {
			t.Fatalf("page of %d locks, asked for 2", len(page))
		}
		pages++
		for _, l := range page {
			got = append(got, l.Name)
		}
		if next == "" {
			break
		}
		token = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || pages != 3 {
		t.Fatalf("pages listed %q in %d pages, want %q in 3", got, pages, want)
	}
	all, err := c.List(ctx, prefix)
	if err != nil || len(all) != 5 {
		t.Fatalf("List: %d locks, %v", len(all), err)
	}
	if _, _, err := c.ListPage(ctx, prefix, "", -1); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("page size -1: %v, want ErrInvalid", err)
	}
}
