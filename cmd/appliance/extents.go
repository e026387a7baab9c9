package main

import (
	"slices"

	"github.com/vmvault/vmvault/dedup"
)

func sortExtents(exts []dedup.Extent) {
	slices.SortFunc(exts, func(a, b dedup.Extent) int {
		switch {
		case a.Offset < b.Offset:
			return -1
		case a.Offset > b.Offset:
			return 1
		}
		return 0
	})
}
