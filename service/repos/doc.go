// Package repos is the service over the appliance's open repositories
// that the API and the scheduler share: Set finds, lists, locks and
// deletes restore points across repositories, describes each repository
// with its space statistics (cached: a walk of every point, redone when the
// points change or after StatsTTL, once for concurrent readers) and runs
// checks and reclaims with progress; Maintainer is the scheduler's
// policy.Maintainer (retention, reclaim, resumable full checks) over the
// same set.
//
// Repositories are added and removed at runtime: Use registers an
// operation (backup, restore, check, reclaim, maintenance) on one, and
// Remove refuses while any runs, naming them; otherwise it detaches the
// repository and waits for the calls still reading it before handing it
// back to be closed (remove.go).
//
// It answers in web/api's types and marks the repository's sentinel errors
// with api's kinds (api.ErrNotFound, api.ErrPointLocked, ...), keeping the
// repository's sentinel in the chain, so web maps them without importing
// repository. It does not own the repositories: the caller closes them.
package repos
