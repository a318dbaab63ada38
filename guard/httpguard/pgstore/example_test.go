package pgstore_test

import (
	"net/http"

	"github.com/fenceworks/fence/guard/httpguard"
	"github.com/fenceworks/fence/guard/httpguard/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A handler that writes its data in the guard's transaction: the token check
// and the UPDATE commit together, or not at all.
func Example() {
	var pool *pgxpool.Pool // pgxpool.New(ctx, dsn); postgres.Migrate(ctx, pool) once
	store := &pgstore.Store{DB: pool}
	write := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpguard.FromContext(r.Context())
		tx, _ := pgstore.Tx(r.Context())
		if _, err := tx.Exec(r.Context(), `UPDATE stock SET qty = qty - 1 WHERE sku = $1`, f.Resource); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // rolls back the token too
			return
		}
		w.WriteHeader(http.StatusNoContent) // 2xx: the middleware commits
	})
	http.Handle("/stock", httpguard.Middleware(store, httpguard.Options{})(write))
}
