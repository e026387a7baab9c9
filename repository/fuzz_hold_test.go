package repository

import (
	"testing"
	"time"
)

// Hold objects, their names, appliance configuration objects and their
// names (v1.2) reject garbage with an error, never a panic.

func FuzzHold(f *testing.F) {
	c, ce := goldenCodec(f, false), goldenCodec(f, true)
	var pid ID
	pid[0] = 0x44
	until := time.Unix(1_800_000_000, 0)
	f.Add(c.encodeHold(pid, until), false)
	f.Add(ce.encodeHold(pid, until), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, b []byte, encrypted bool) {
		cc := c
		if encrypted {
			cc = ce
		}
		id, u, err := cc.decodeHold(b)
		if err == nil && !encrypted {
			if string(c.encodeHold(id, u)) != string(b) {
				t.Fatal("accepted hold does not re-encode identically")
			}
		}
	})
}

func FuzzHoldName(f *testing.F) {
	var pid ID
	pid[0] = 0x44
	f.Add(holdName(pid, time.Unix(1_800_000_000, 0)))
	f.Add("holds/-")
	f.Add("holds/" + pid.String() + "-99999999999999999999")
	f.Add("holds/" + pid.String() + "-+0000000000000000001")
	f.Fuzz(func(t *testing.T, name string) {
		id, u, ok := parseHoldName(name)
		if ok && holdName(id, u) != name {
			t.Fatalf("accepted %q does not round-trip (%s)", name, holdName(id, u))
		}
	})
}

func FuzzAppConfig(f *testing.F) {
	c, ce := goldenCodec(f, false), goldenCodec(f, true)
	const name = "appconfig/01800000000000000000-0011223344556677"
	f.Add(c.encodeAppConfig(name, []byte(`{"jobs":[]}`)), name, false)
	f.Add(ce.encodeAppConfig(name, []byte(`{}`)), name, true)
	f.Add([]byte{}, "appconfig/x", false)
	f.Fuzz(func(t *testing.T, b []byte, name string, encrypted bool) {
		cc := c
		if encrypted {
			cc = ce
		}
		cc.decodeAppConfig(name, b) // may fail, must not panic
		appConfigTime(name)
	})
}
