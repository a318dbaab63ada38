package client

import (
	"context"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// Resource is the state of a fenced resource in the server's built-in store.
type Resource struct {
	Resource  string
	Value     []byte
	LastToken fence.Token // the last token accepted for this resource
	Version   uint64      // number of accepted writes and adds
	// Deleted: the resource was deleted (Delete) and not written since; its
	// value is empty, and LastToken still fences stale writers.
	Deleted bool
	// Replayed (Write, Add): the op_id was applied before; this is its saved
	// result and nothing was applied again.
	Replayed bool
	// Int (Add): the integer value after the add.
	Int int64
}

// Write sets resource to value if token is at least the last token accepted
// for it (G4); an older token is refused with *fence.StaleTokenError. The
// write carries an op_id (fresh per call unless OpID is given) that makes
// its retries safe. While the Client's session is open (a lease was
// acquired on it) the write goes over the session's stream with the next
// seq (applied once even if resent after a reconnect); otherwise it is a
// unary call.
func (c *Client) Write(ctx context.Context, resource string, token fence.Token, value []byte, opts ...OpOption) (Resource, error) {
	cfg := opConfigOf(opts)
	w := fence.WriteRequest{Resource: resource, Token: token, Value: value, OpID: cfg.opID, Signed: cfg.signed}
	if err := w.Validate(fence.Limits{}); err != nil {
		return Resource{}, err
	}
	req := writeToProto(w)
	if c.sess.isOpen() {
		r, err := c.sess.resourceCall(ctx, "write", &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Write{Write: req}})
		if !useUnary(err) {
			if err != nil {
				return Resource{}, err
			}
			out := resourceFromProto(r.GetWrite().GetState())
			out.Replayed = r.GetWrite().GetReplayed()
			return out, nil
		}
	}
	var out Resource
	err := c.withRetry(ctx, "write", 0, func(ctx context.Context, ep *endpoint, _ int) error {
		resp, err := ep.resources.Write(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		out = resourceFromProto(resp.Msg.GetState())
		out.Replayed = resp.Msg.GetReplayed()
		return nil
	})
	return out, err
}

// Add adds delta to the integer value of resource (missing = 0) under the
// same fencing rule and op_id as Write. Result.Int is the value after the
// add.
func (c *Client) Add(ctx context.Context, resource string, token fence.Token, delta int64, opts ...OpOption) (Resource, error) {
	cfg := opConfigOf(opts)
	a := fence.AddRequest{Resource: resource, Token: token, Delta: delta, OpID: cfg.opID, Signed: cfg.signed}
	if err := a.Validate(fence.Limits{}); err != nil {
		return Resource{}, err
	}
	req := addToProto(a)
	if c.sess.isOpen() {
		r, err := c.sess.resourceCall(ctx, "add", &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Add{Add: req}})
		if !useUnary(err) {
			if err != nil {
				return Resource{}, err
			}
			out := resourceFromProto(r.GetAdd().GetState())
			out.Replayed = r.GetAdd().GetReplayed()
			out.Int = r.GetAdd().GetValue()
			return out, nil
		}
	}
	var out Resource
	err := c.withRetry(ctx, "add", 0, func(ctx context.Context, ep *endpoint, _ int) error {
		resp, err := ep.resources.Add(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		out = resourceFromProto(resp.Msg.GetState())
		out.Replayed = resp.Msg.GetReplayed()
		out.Int = resp.Msg.GetValue()
		return nil
	})
	return out, err
}

// Delete removes the value of resource under the same fencing rule and
// op_id as Write: a token older than the last one accepted for it is
// refused with *fence.StaleTokenError. The resource's last accepted token
// is kept (a stale writer stays refused after the delete); the returned
// state is the one after the delete.
func (c *Client) Delete(ctx context.Context, resource string, token fence.Token, opts ...OpOption) (Resource, error) {
	cfg := opConfigOf(opts)
	d := fence.DeleteRequest{Resource: resource, Token: token, OpID: cfg.opID, Signed: cfg.signed}
	if err := d.Validate(fence.Limits{}); err != nil {
		return Resource{}, err
	}
	req := deleteToProto(d)
	if c.sess.isOpen() {
		r, err := c.sess.resourceCall(ctx, "delete", &fencev1.SessionRequest{Op: &fencev1.SessionRequest_Delete{Delete: req}})
		if !useUnary(err) {
			if err != nil {
				return Resource{}, err
			}
			out := resourceFromProto(r.GetDelete().GetState())
			if out.Resource == "" {
				out.Resource = resource
			}
			out.Replayed = r.GetDelete().GetReplayed()
			return out, nil
		}
	}
	var out Resource
	err := c.withRetry(ctx, "delete", 0, func(ctx context.Context, ep *endpoint, _ int) error {
		resp, err := ep.resources.Delete(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		out = resourceFromProto(resp.Msg.GetState())
		if out.Resource == "" {
			out.Resource = resource
		}
		out.Replayed = resp.Msg.GetReplayed()
		return nil
	})
	return out, err
}

// Read returns the state of resource (empty, with LastToken 0, if it was
// never written).
func (c *Client) Read(ctx context.Context, resource string) (Resource, error) {
	if err := fence.ValidateName("resource", resource); err != nil {
		return Resource{}, err
	}
	var out Resource
	err := c.withRetry(ctx, "read", 0, func(ctx context.Context, ep *endpoint, _ int) error {
		resp, err := ep.resources.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: resource}))
		if err != nil {
			return err
		}
		out = resourceFromProto(resp.Msg.GetState())
		if out.Resource == "" {
			out.Resource = resource
		}
		return nil
	})
	return out, err
}

func opConfigOf(opts []OpOption) opConfig {
	var cfg opConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.opID == "" {
		cfg.opID = newID()
	}
	return cfg
}
