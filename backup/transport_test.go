package backup

import "testing"

func TestParseTransport(t *testing.T) {
	cases := []struct {
		in      string
		want    Transport
		wantErr bool
	}{
		{"", TransportAuto, false}, {"auto", TransportAuto, false}, {"hotadd", TransportHotAdd, false},
		{"network", TransportNetwork, false}, {"nfc", TransportNFC, false}, {"san", "", true}, {"HotAdd", "", true},
	}
	for _, c := range cases {
		got, err := ParseTransport(c.in)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("ParseTransport(%q) = %q, %v", c.in, got, err)
		}
	}
}
