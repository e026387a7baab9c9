// Command genv2 wrote testdata/state-v2.db, the golden state database of
// schema version 2: the golden v1 file (testdata/state-v1.db, a value in
// every bucket of schema 1) migrated by the code of schema 2, which is how
// every appliance of schema 2 got its file.
//
// It only makes sense at a v2 commit (0796bae or earlier): later code
// migrates further. It lives under testdata so that ./... ignores it.
//
//	go run ./internal/state/testdata/genv2 internal/state/testdata/state-v1.db /path/to/state-v2.db
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/vmvault/vmvault/internal/state"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genv2 STATE-V1.db OUT.db")
		os.Exit(2)
	}
	if err := gen(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func gen(v1, out string) error {
	dir, err := os.MkdirTemp("", "genv2")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "state.db")
	if err := copyFile(v1, tmp); err != nil {
		return err
	}
	db, err := state.Open(tmp) // migrates to the schema of this code
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	return copyFile(tmp, out)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
