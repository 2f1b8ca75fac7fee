package serve_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/storetest"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestStoreConformance: the store serve keeps its threads' states in
// passes storetest with the database opened as the package doc shows,
// sql.Open with no settings: serve.New sets the connection's. Before,
// concurrent saves on the default pool failed with SQLITE_BUSY where the
// contract is ErrRunBusy.
func TestStoreConformance(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "serve.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	model := toolruntest.New(t, toolruntest.Options{})
	h, err := serve.New(context.Background(), serve.Config{Client: model.Client(), Params: anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024}, DB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(context.Background())
	if err := storetest.Run(t.Context(), serve.StoreOf(h)); err != nil {
		t.Error(err)
	}
}
