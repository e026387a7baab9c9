package approval

import (
	"fmt"

	"github.com/vmvault/vmvault/policy"
)

// Shortened lists the rules of a retention that keep fewer points under
// next than under prev ("last 7 -> 3"): a non-empty answer makes a job
// change destructive (points retention would have kept get removed). Each
// count is compared on its own: a rule that keeps more cannot make up for
// one that keeps fewer, because the rules select different points (the
// newest seven are not the monthly ones). The preset name is informational
// and is ignored.
func Shortened(prev, next policy.Retention) []string {
	var out []string
	for _, c := range []struct {
		name      string
		old, next int
	}{
		{"last", prev.Last, next.Last},
		{"daily", prev.Daily, next.Daily},
		{"weekly", prev.Weekly, next.Weekly},
		{"monthly", prev.Monthly, next.Monthly},
		{"quarterly", prev.Quarterly, next.Quarterly},
		{"yearly", prev.Yearly, next.Yearly},
	} {
		if c.next < c.old {
			out = append(out, formatRule(c.name, c.old, c.next))
		}
	}
	return out
}

func formatRule(name string, old, next int) string {
	return fmt.Sprintf("%s %d -> %d", name, old, next)
}
