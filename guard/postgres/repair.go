package postgres

import (
	"context"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// Stored is one guard row: a resource and the last token it accepted.
type Stored = sqlguard.Stored

// Above returns the guard rows of resource (if not empty), or of every
// resource starting with prefix, whose last token is above ceiling — in a
// store a made-up token has poisoned, the tokens Fence never issued: a
// cluster's tokens never exceed its last token (`fence status`
// lastToken). `fence guard repair` reads them with Above and lowers them
// with Lower. A ceiling of 0 or above fence.MaxTokenJSONInt is refused with
// *fence.InvalidError.
func (g *Guard) Above(ctx context.Context, db Querier, resource, prefix string, ceiling fence.Token) ([]Stored, error) {
	return g.e.Above(ctx, querier{r: db}, resource, prefix, ceiling)
}

// Lower sets the last token of s.Resource to ceiling, if it still holds
// s.Token (read by Above) and s.Token is above ceiling: one conditional
// UPDATE, so a row that changed since is left alone (lowered = false).
// After it, the next token the cluster issues (above ceiling) is accepted
// again; a token at or below ceiling stays refused. A ceiling at or above
// s.Token is refused with *fence.InvalidError.
func (g *Guard) Lower(ctx context.Context, db Execer, s Stored, ceiling fence.Token) (lowered bool, err error) {
	return g.e.Lower(ctx, querier{x: db}, s, ceiling)
}
