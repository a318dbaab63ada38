package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/backup"
)

// restoreInProcess builds dir from the backup at path with package backup
// (what `fence restore` runs): the first token is above the backup's
// counter, the guard table's largest token (floorDSN, ?table= the guard
// table) and the wall floor. noRaise is the PLANTED BUG of
// RestoreConfig.NoRaise: --floor 1 and a wall clock of 1970, so the first
// token is the backup's counter + 1, below tokens issued after the backup.
func restoreInProcess(ctx context.Context, path, dir string, node *Node, floorDSN string, noRaise bool) (string, uint64, error) {
	opts := backup.RestoreOptions{DataDir: dir, Now: time.Now()}
	if node.RaftAddr() != "" {
		opts.NodeID, opts.RaftAddr = node.ID(), node.RaftAddr()
	}
	if floorDSN != "" {
		tok, err := guardMaxToken(ctx, floorDSN)
		if err != nil {
			return "", 0, err
		}
		opts.Floors = append(opts.Floors, backup.Floor{Source: "postgres guard table", Token: fence.Token(tok)})
	}
	if noRaise {
		opts.Now = time.Unix(0, 0) // the wall floor: 0
		opts.Floors = []backup.Floor{{Source: backup.SourceFlag, Token: 1}}
	}
	rep, err := backup.Restore(ctx, path, opts)
	if err != nil {
		return "", 0, err
	}
	var fl []string
	for _, f := range rep.Floors {
		fl = append(fl, fmt.Sprintf("%s=%d", f.Source, f.Token))
	}
	return fmt.Sprintf("restored in process: old counter %d, floors %s, first token %d", rep.Old, strings.Join(fl, " "), rep.First),
		uint64(rep.First), nil
}

// guardMaxToken is the largest token the guard table (dsn's ?table=)
// accepted; none is an error (as fence restore's --floor-from says).
func guardMaxToken(ctx context.Context, dsn string) (uint64, error) {
	i := strings.Index(dsn, "table=")
	if i < 0 {
		return 0, fmt.Errorf("chaos: --floor-from %s: no ?table=", dsn)
	}
	table := dsn[i+len("table="):]
	if j := strings.IndexByte(table, '&'); j >= 0 {
		table = table[:j]
	}
	prefix, ok := strings.CutSuffix(table, "_guard")
	if !ok {
		return 0, fmt.Errorf("chaos: guard table %q: want <prefix>_guard", table)
	}
	g, err := pgGuard(prefix, nil)
	if err != nil {
		return 0, err
	}
	conn, err := pgx.Connect(ctx, dsn[:strings.LastIndexAny(dsn[:i], "?&")])
	if err != nil {
		return 0, fmt.Errorf("chaos: connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tok, err := g.MaxToken(ctx, conn)
	if err != nil {
		return 0, err
	}
	if tok == 0 {
		return 0, fmt.Errorf("chaos: no tokens found in %s", table)
	}
	return uint64(tok), nil
}
