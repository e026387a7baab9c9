// Package schema declares the layout of state.db, the appliance's own bbolt
// database, in one place: the schema version, every bucket with the package
// that owns it, what its keys are and the format of its values, and the
// value codec (Encode, EncodeBytes, EncodeTime, EncodeEmpty and their
// decoders). internal/state/FORMAT.md describes the same byte by byte.
//
// Every value starts with one format byte naming its encoding, so a later
// version can change one bucket's encoding explicitly, value by value; the
// one exception is the schema version itself (meta/schema), which says how
// to read everything else.
//
// It also knows every older version: FileVersion tells a file's, Upgrade
// migrates it (in the caller's transaction, so a migration commits whole or
// not at all) and ValueRule says what a verifier may expect of a value.
//
// It is a leaf so that every owner of a bucket can import it: internal/state
// (which opens the file, verifies it and calls Upgrade), internal/auth,
// internal/task, and the daemon's settings and notify stores. It imports
// only bbolt and internal/failpoint; it must never import any other package
// of vmvault (policy in particular: auth and task must not depend on it).
package schema
