package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/postgres"
)

// stock is the protected store: one row per SKU, every write fenced by the
// guard in the same transaction.
type stock struct {
	pool  *pgxpool.Pool
	guard *postgres.Guard
	table string
}

func (s *stock) ident() string {
	return pgx.Identifier(strings.Split(s.table, ".")).Sanitize()
}

// migrate creates the stock table and the guard's tables if they are absent.
func (s *stock) migrate(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.ident()+
		" (sku text PRIMARY KEY, qty bigint NOT NULL)"); err != nil {
		return fmt.Errorf("creating %s: %w", s.table, err)
	}
	return s.guard.Migrate(ctx, s.pool)
}

// apply makes the configured write with the lease's token and prints its
// outcome. With a key set the guard verifies the signed token's proof
// first; without one it compares the number alone.
func (s *stock) apply(ctx context.Context, cfg config, signed fence.SignedToken) int {
	token := signed.Token
	resource := "stock/" + cfg.sku
	if cfg.opID == "" {
		qty, err := s.write(ctx, resource, cfg, signed)
		if err != nil {
			return fail(err)
		}
		fmt.Printf("written sku=%s qty=%d token=%d\n", cfg.sku, qty, token)
		return exitOK
	}
	op := postgres.Op{Resource: resource, ID: cfg.opID, Payload: []byte(payload(cfg)), SignedToken: signed}
	result, replayed, err := s.guard.Do(ctx, s.pool, op, func(tx pgx.Tx) ([]byte, error) {
		qty, err := s.update(ctx, tx, cfg)
		return []byte(strconv.FormatInt(qty, 10)), err
	})
	if err != nil {
		return fail(err)
	}
	verb := "applied"
	if replayed {
		verb = "replayed"
	}
	fmt.Printf("%s op_id=%s sku=%s qty=%s token=%d\n", verb, cfg.opID, cfg.sku, result, token)
	return exitOK
}

// write is the fenced write without an op_id: Check, then the update, in
// one transaction. A stale token rolls everything back.
func (s *stock) write(ctx context.Context, resource string, cfg config, token fence.SignedToken) (int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit
	if err := s.guard.CheckSigned(ctx, tx, resource, token); err != nil {
		return 0, err
	}
	qty, err := s.update(ctx, tx, cfg)
	if err != nil {
		return 0, err
	}
	return qty, tx.Commit(ctx)
}

// update sets or adds to the SKU's quantity inside tx and returns the new
// quantity. A missing row counts as 0.
func (s *stock) update(ctx context.Context, tx pgx.Tx, cfg config) (int64, error) {
	var sql string
	var arg int64
	if cfg.setQty {
		sql = "INSERT INTO " + s.ident() + " AS s (sku, qty) VALUES ($1, $2) ON CONFLICT (sku) DO UPDATE SET qty = EXCLUDED.qty RETURNING qty"
		arg = cfg.qty
	} else {
		sql = "INSERT INTO " + s.ident() + " AS s (sku, qty) VALUES ($1, $2) ON CONFLICT (sku) DO UPDATE SET qty = s.qty + EXCLUDED.qty RETURNING qty"
		arg = cfg.add
	}
	var qty int64
	if err := tx.QueryRow(ctx, sql, cfg.sku, arg).Scan(&qty); err != nil {
		return 0, fmt.Errorf("updating %s: %w", s.table, err)
	}
	return qty, nil
}

// payload identifies the operation, so that an op_id reused for a different
// operation is refused.
func payload(cfg config) string {
	if cfg.setQty {
		return fmt.Sprintf("set %s %d", cfg.sku, cfg.qty)
	}
	return fmt.Sprintf("add %s %d", cfg.sku, cfg.add)
}
