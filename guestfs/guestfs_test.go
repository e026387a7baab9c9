package guestfs

import (
	"errors"
	"testing"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{"", ".", nil},
		{"/", ".", nil},
		{".", ".", nil},
		{"/etc/hostname", "etc/hostname", nil},
		{"etc//hostname/", "etc/hostname", nil},
		{"/etc/../etc/./hostname", "etc/hostname", nil},
		{"a/b/../../c", "c", nil},
		{"a\\b", "a\\b", nil},
		{"..", "", ErrBadPath},
		{"/../etc", "", ErrBadPath},
		{"a/../../etc", "", ErrBadPath},
		{"a\x00b", "", ErrBadPath},
	}
	for _, tt := range tests {
		got, err := CleanPath(tt.in)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}
