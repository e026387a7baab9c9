package main

import (
	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/extent"
)

func sortExtents(exts []dedup.Extent) { extent.Sort(exts) }
