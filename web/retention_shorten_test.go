package web

import (
	"reflect"
	"testing"

	"github.com/vmvault/vmvault/policy"
)

func TestRetentionShortened(t *testing.T) {
	more := policy.Retention{Preset: "more", Last: 7, Weekly: 4, Monthly: 6, Quarterly: 4, Yearly: 1}
	for _, tc := range []struct {
		name       string
		prev, next policy.Retention
		want       []string
	}{
		{"same", more, more, nil},
		{"preset name only", more, policy.Retention{Last: 7, Weekly: 4, Monthly: 6, Quarterly: 4, Yearly: 1}, nil},
		{"keeps more", more, policy.Retention{Last: 15, Weekly: 8, Monthly: 12, Quarterly: 8, Yearly: 3}, nil},
		{"fewer last", more, policy.Retention{Last: 3, Weekly: 4, Monthly: 6, Quarterly: 4, Yearly: 1}, []string{"last 7 -> 3"}},
		{"rule dropped", more, policy.Retention{Last: 7, Weekly: 4, Monthly: 6, Quarterly: 4}, []string{"yearly 1 -> 0"}},
		// More daily points do not make up for fewer monthly ones: they are other points.
		{"traded", more, policy.Retention{Last: 7, Daily: 30, Weekly: 4, Monthly: 1, Quarterly: 4, Yearly: 1}, []string{"monthly 6 -> 1"}},
		{"several", policy.Retention{Last: 10, Daily: 5}, policy.Retention{Last: 1, Daily: 1}, []string{"last 10 -> 1", "daily 5 -> 1"}},
		{"from nothing", policy.Retention{}, more, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shortened(tc.prev, tc.next); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("shortened = %q, want %q", got, tc.want)
			}
		})
	}
}
