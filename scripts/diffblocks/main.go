// Command diffblocks prints, as the JSON that `appliance image backup
// --changed` takes, the 4 KiB blocks in which two equally sized images
// differ: what CBT would report for the guest writes between them.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

type extent struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: diffblocks OLD NEW")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "diffblocks:", err)
		os.Exit(1)
	}
}

func run(oldPath, newPath string, w io.Writer) error {
	a, err := os.Open(oldPath)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := os.Open(newPath)
	if err != nil {
		return err
	}
	defer b.Close()
	const blk = 4096
	bufA, bufB := make([]byte, 8<<20), make([]byte, 8<<20)
	exts := []extent{}
	var off int64
	for {
		na, errA := io.ReadFull(a, bufA)
		nb, _ := io.ReadFull(b, bufB)
		if na != nb {
			return fmt.Errorf("images differ in size near offset %d", off)
		}
		for i := 0; i < na; i += blk {
			end := min(i+blk, na)
			if bytes.Equal(bufA[i:end], bufB[i:end]) {
				continue
			}
			o := off + int64(i)
			if n := len(exts); n > 0 && exts[n-1].Offset+exts[n-1].Length == o {
				exts[n-1].Length += int64(end - i)
			} else {
				exts = append(exts, extent{o, int64(end - i)})
			}
		}
		off += int64(na)
		if errA == io.EOF || errA == io.ErrUnexpectedEOF {
			break
		}
		if errA != nil {
			return errA
		}
	}
	return json.NewEncoder(w).Encode(exts)
}
