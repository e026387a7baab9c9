package web

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/policy"
)

// The fields an audited change changed: the stored object before the
// change against the one after, both as their API JSON, compared leaf by
// leaf. An auditor reads "retention.daily: 7 → 14"; a secret's value never
// reaches the event log.

// changeValueMax bounds one recorded value: a selection of a thousand VMs
// is cut, not copied into every event.
const changeValueMax = 240

// secretField says whether a JSON field name holds a secret: a password,
// passphrase, secret, token, credential or key (accessKey, secretKey).
func secretField(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"password", "passphrase", "secret", "token", "credential", "privatekey"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return n == "key" || strings.HasSuffix(n, "key") || strings.HasSuffix(n, "keys")
}

// diffFields lists the fields that differ between before and after (any
// values that marshal to JSON objects), sorted by field; skip names
// top-level fields that are not the object's own (read-only status).
// A field under a secret name anywhere on its path is masked.
func diffFields(before, after any, skip ...string) []policy.Change {
	b, a := flatJSON(before), flatJSON(after)
	keys := map[string]bool{}
	for k := range b {
		keys[k] = true
	}
	for k := range a {
		keys[k] = true
	}
	var out []policy.Change
	for k := range keys {
		top, _, _ := strings.Cut(k, ".")
		skipped := false
		for _, s := range skip {
			skipped = skipped || s == top
		}
		if skipped || b[k] == a[k] {
			continue
		}
		ch := policy.Change{Field: k, From: b[k], To: a[k]}
		if secretPath(k) {
			ch = policy.Change{Field: k, Secret: true}
		}
		out = append(out, ch)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

func secretPath(field string) bool {
	for _, seg := range strings.Split(field, ".") {
		if secretField(seg) {
			return true
		}
	}
	return false
}

// flatJSON turns v's JSON into dotted field paths and their values as
// text; arrays are one value each (compact JSON), absent and null
// fields are absent.
func flatJSON(v any) map[string]string {
	out := map[string]string{}
	if v == nil {
		return out
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return out
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return out
	}
	var walk func(prefix string, x any)
	walk = func(prefix string, x any) {
		switch t := x.(type) {
		case nil:
		case map[string]any:
			for k, c := range t {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, c)
			}
		case string:
			out[prefix] = cutValue(t)
		case []any:
			if len(t) == 0 {
				return // an empty list reads as no value, as absent does
			}
			if prefix != "" && secretPath(prefix) {
				out[prefix] = fmt.Sprint(len(t)) // never the values, still a change
				return
			}
			s, _ := json.Marshal(t)
			out[prefix] = cutValue(string(s))
		default:
			s, _ := json.Marshal(t)
			out[prefix] = cutValue(string(s))
		}
	}
	walk("", tree)
	return out
}

func cutValue(s string) string {
	if len(s) <= changeValueMax {
		return s
	}
	cut := changeValueMax
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// changeText is one change as the event's message writes it.
func changeText(ch policy.Change) string {
	if ch.Secret {
		return ch.Field + ": (changed)"
	}
	return fmt.Sprintf("%s: %s → %s", ch.Field, orNone(ch.From), orNone(ch.To))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// noteObject names what the request's action acted on: its kind, id and
// the name people know it by ("" when it has none or is unknown).
func noteObject(c *gin.Context, kind, id, name string) {
	a := auditOf(c)
	if a == nil {
		return
	}
	a.objKind, a.objID = kind, id
	if name != "" {
		a.objName = name
	}
	if a.subject == "" {
		a.subject = id
	}
}

// noteChanges records what the action changed: the stored object before
// against the one after (see diffFields), plus extra (a password given
// in the request, which no stored object shows).
func noteChanges(c *gin.Context, before, after any, skip []string, extra ...policy.Change) {
	a := auditOf(c)
	if a == nil {
		return
	}
	a.changes = append(diffFields(before, after, skip...), extra...)
}

// secretChange is a secret field the request set: recorded as changed,
// never with its value.
func secretChange(field string) policy.Change { return policy.Change{Field: field, Secret: true} }
