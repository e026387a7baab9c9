package instant

import (
	"net"
	"testing"
)

func TestAllowList(t *testing.T) {
	p, err := ParseAllow([]string{"10.0.0.0/8", "192.168.7.9", "2001:db8::/32", "10.1.2.3/8"})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerOptions{Allow: p})
	for addr, want := range map[string]bool{
		"10.9.8.7:700":           true,
		"192.168.7.9:1":          true,
		"192.168.7.10:1":         false,
		"[::ffff:10.1.1.1]:2049": true, // IPv4-mapped
		"[2001:db8::1]:2049":     true,
		"[2001:db9::1]:2049":     false,
		"127.0.0.1:5":            false,
	} {
		a, _ := net.ResolveTCPAddr("tcp", addr)
		if got := s.Allowed(a); got != want {
			t.Errorf("%s: allowed %v, want %v", addr, got, want)
		}
	}
	if _, err := ParseAllow([]string{"10.0.0.0/33"}); err == nil {
		t.Error("accepted /33")
	}
	if _, err := ParseAllow([]string{"host.example"}); err == nil {
		t.Error("accepted a name")
	}
	def := NewServer(ServerOptions{})
	if a, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:1"); !def.Allowed(a) {
		t.Error("default refuses loopback")
	}
	if a, _ := net.ResolveTCPAddr("tcp", "10.0.0.1:1"); def.Allowed(a) {
		t.Error("default allows a non-loopback client")
	}
}
