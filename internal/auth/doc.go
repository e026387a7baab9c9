// Package auth owns the appliance's authentication and authorisation state:
// local users (Argon2id password hashes, one of the three roles each; the
// single administrator of earlier versions is migrated to user "admin";
// users recreated from a saved configuration have no password, and no
// login accepts them, until an administrator sets one),
// API tokens (stored as SHA-256 of a random 32-byte secret, shown once),
// browser sessions (in memory, with a CSRF token each), the three roles,
// the optional scope of a user or token (Scope: VM folders, tags, name
// patterns and repositories it is limited to; judged by web on points it
// describes with ScopeVM),
// the mapping of vCenter users and groups to roles (none by default), and
// login throttling on an injected clock: token buckets per address and per
// (user, address) that refuse, a per-user delay that only slows, and the
// lockout episodes it reports (OnLockout).
//
// It knows nothing of HTTP: web maps its errors to status codes. auth
// imports only internal/clock, internal/state/schema (its buckets and value
// format in state.db), x/crypto and bbolt; it must never import web,
// policy, internal/state, vsphere, repository, backup or restore — the
// vCenter credential check is an injected function.
package auth
