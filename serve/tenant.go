package serve

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
)

// Tenancy. A token belongs to the tenant its [Token.Tenant] names, and so
// does every thread one of its tokens started: the scopes read and
// approve reach the threads of their own tenant only, and a request for
// another tenant's thread, run or call is answered as one for a thread
// that does not exist (404), so that nobody learns another tenant's ids.
// A server whose tokens name no tenant is one tenant: nothing is
// filtered, which keeps a single-tenant setup to its tokens alone.
//
// A thread's tenant is its owner's token's, looked up in the tokens the
// server has now: in a server with tenants, a thread whose owner no token
// names any more belongs to no tenant and is shown to nobody.

// tenanted reports whether the server's tokens name tenants.
func (h *Handler) tenanted() bool {
	for _, t := range h.cfg.Tokens {
		if t.Tenant != "" {
			return true
		}
	}
	return false
}

// tenantOf returns the tenant of the token named owner, and whether a
// token has that name.
func (h *Handler) tenantOf(owner string) (string, bool) {
	for _, t := range h.cfg.Tokens {
		if t.Name == owner {
			return t.Tenant, true
		}
	}
	return "", false
}

// sameTenant reports whether a request of tenant may see the threads of
// the token named owner.
func (h *Handler) sameTenant(tenant, owner string) bool {
	if !h.tenanted() {
		return true
	}
	t, ok := h.tenantOf(owner)
	return ok && t == tenant
}

// threadOwner returns the name of the token that started thread, or ""
// if there is no such thread.
func (h *Handler) threadOwner(ctx context.Context, thread string) (string, error) {
	var owner string
	err := h.cfg.DB.QueryRowContext(ctx, `SELECT owner FROM serve_threads WHERE id = ?`, thread).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return owner, err
}

// visible keeps the interrupts of its whose thread tenant may see. The
// owners of their threads are read in one query, however many threads
// the calls are of.
func (h *Handler) visible(ctx context.Context, tenant string, its []*interrupt) ([]*interrupt, error) {
	if !h.tenanted() || len(its) == 0 {
		return its, nil
	}
	seen := map[string]bool{}
	var threads []string
	for _, it := range its {
		if !seen[it.Thread] {
			seen[it.Thread] = false
			threads = append(threads, it.Thread)
		}
	}
	b, err := json.Marshal(threads)
	if err != nil {
		return nil, err
	}
	rows, err := h.cfg.DB.QueryContext(ctx, `SELECT id, owner FROM serve_threads WHERE id IN (SELECT value FROM json_each(?))`, string(b))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var thread, owner string
		if err := rows.Scan(&thread, &owner); err != nil {
			return nil, err
		}
		seen[thread] = owner != "" && h.sameTenant(tenant, owner)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := its[:0:0]
	for _, it := range its {
		if seen[it.Thread] {
			out = append(out, it)
		}
	}
	return out, nil
}

// sees reports whether tenant may see thread.
func (h *Handler) sees(ctx context.Context, tenant, thread string) (bool, error) {
	if !h.tenanted() {
		return true, nil
	}
	owner, err := h.threadOwner(ctx, thread)
	if err != nil {
		return false, err
	}
	return owner != "" && h.sameTenant(tenant, owner), nil
}

// foreignThread refuses a run on thread, which the token named owner
// started, to id: another tenant's thread as one that is not there (404),
// another token's of the same tenant as another token's (403).
func (h *Handler) foreignThread(id identity, thread, owner string) error {
	if !h.sameTenant(id.tenant, owner) {
		return refuse(http.StatusNotFound, "not_found", "no thread %q", thread)
	}
	return refuse(http.StatusForbidden, "foreign_thread", "thread %q belongs to another token", thread)
}
