package policy

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// ContainerKind names a vSphere inventory container type a job can select.
type ContainerKind string

// Container kinds a selection can name.
const (
	KindDatacenter   ContainerKind = "datacenter"
	KindFolder       ContainerKind = "folder"
	KindCluster      ContainerKind = "cluster"
	KindHost         ContainerKind = "host"
	KindResourcePool ContainerKind = "resourcepool"
)

func (k ContainerKind) valid() bool {
	switch k {
	case KindDatacenter, KindFolder, KindCluster, KindHost, KindResourcePool:
		return true
	}
	return false
}

// ContainerRef names a container by its managed object id (stable across
// renames within one vCenter). Name is for display only and never matched.
type ContainerRef struct {
	Kind ContainerKind `json:"kind"`
	ID   string        `json:"id"`
	Name string        `json:"name,omitempty"`
}

// VM is what policy knows about a virtual machine: its identity, display
// name, every container above it and its tags. The inventory fills it.
type VM struct {
	InstanceUUID string         `json:"instanceUuid"` // the identity: survives renames and moves
	Name         string         `json:"name"`
	MoRef        string         `json:"moref,omitempty"`
	Containers   []ContainerRef `json:"containers,omitempty"` // all ancestors: datacenter, folders, cluster, host, resource pools
	Tags         []string       `json:"tags,omitempty"`       // tag ids as the inventory reports them
}

// Inventory lists the VMs the appliance can see. The inventory package
// implements it over vsphere (one ContainerView + PropertyCollector pass);
// tests use an in-memory list. It must be safe for concurrent use and honour
// ctx cancellation.
type Inventory interface {
	VMs(ctx context.Context) ([]VM, error)
}

// Selection says which VMs a job protects. Containers and tags are evaluated
// at run time, so a VM moved into a protected folder or given a protected tag
// is picked up by the next window. A VM is selected if it is listed
// explicitly, lies under any listed container or carries any listed tag, and
// is not excluded by instance UUID, name pattern or tag.
type Selection struct {
	VMs        []string       `json:"vms,omitempty"` // instance UUIDs
	Containers []ContainerRef `json:"containers,omitempty"`
	Tags       []string       `json:"tags,omitempty"`
	Exclude    Exclusions     `json:"exclude,omitempty"`
}

// Exclusions remove VMs from a selection; they win over every inclusion.
type Exclusions struct {
	VMs   []string `json:"vms,omitempty"`   // instance UUIDs
	Names []string `json:"names,omitempty"` // path.Match globs, case-insensitive ("*-test", "tmp?")
	Tags  []string `json:"tags,omitempty"`
}

// IsEmpty reports whether the selection includes nothing at all.
func (s Selection) IsEmpty() bool {
	return len(s.VMs) == 0 && len(s.Containers) == 0 && len(s.Tags) == 0
}

// Validate checks the selection's form (not whether anything matches).
func (s Selection) Validate() error {
	if s.IsEmpty() {
		return &ValidationError{Field: "selection", Msg: "selects nothing: name VMs, containers or tags"}
	}
	for i, v := range s.VMs {
		if strings.TrimSpace(v) == "" {
			return &ValidationError{Field: fmt.Sprintf("selection.vms[%d]", i), Msg: "empty instance UUID"}
		}
	}
	for i, c := range s.Containers {
		if !c.Kind.valid() {
			return &ValidationError{Field: fmt.Sprintf("selection.containers[%d].kind", i), Msg: fmt.Sprintf("unknown container kind %q", c.Kind)}
		}
		if c.ID == "" {
			return &ValidationError{Field: fmt.Sprintf("selection.containers[%d].id", i), Msg: "empty container id"}
		}
	}
	for i, tag := range s.Tags {
		if tag == "" {
			return &ValidationError{Field: fmt.Sprintf("selection.tags[%d]", i), Msg: "empty tag"}
		}
	}
	for i, p := range s.Exclude.Names {
		if _, err := path.Match(strings.ToLower(p), ""); err != nil || p == "" {
			return &ValidationError{Field: fmt.Sprintf("selection.exclude.names[%d]", i), Msg: fmt.Sprintf("bad name pattern %q", p)}
		}
	}
	return nil
}

// Matches reports whether vm is selected. To test many VMs, use Matcher.
func (s Selection) Matches(vm VM) bool {
	if slices.Contains(s.Exclude.VMs, vm.InstanceUUID) || anyShared(s.Exclude.Tags, vm.Tags) {
		return false
	}
	name := strings.ToLower(vm.Name)
	for _, p := range s.Exclude.Names {
		if ok, _ := path.Match(strings.ToLower(p), name); ok {
			return false
		}
	}
	if slices.Contains(s.VMs, vm.InstanceUUID) || anyShared(s.Tags, vm.Tags) {
		return true
	}
	for _, want := range s.Containers {
		for _, have := range vm.Containers {
			if want.Kind == have.Kind && want.ID == have.ID {
				return true
			}
		}
	}
	return false
}

func anyShared(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// Matcher returns Matches with the selection's lists made sets once: for
// testing many VMs (Matches costs O(listed VMs) per call, so n VMs against a
// selection that lists them all cost O(n²)).
func (s Selection) Matcher() func(VM) bool { return s.compile().matches }

// matcher is a selection with its lists made sets, so that evaluating it
// over n VMs costs O(n), not O(n × listed VMs).
type matcher struct {
	vms, exVMs, tags, exTags map[string]bool
	containers               map[ContainerRef]bool // Name cleared: never matched
	exNames                  []string              // lower-cased globs
}

func set(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func (s Selection) compile() *matcher {
	m := &matcher{vms: set(s.VMs), exVMs: set(s.Exclude.VMs), tags: set(s.Tags), exTags: set(s.Exclude.Tags),
		containers: make(map[ContainerRef]bool, len(s.Containers))}
	for _, c := range s.Containers {
		m.containers[ContainerRef{Kind: c.Kind, ID: c.ID}] = true
	}
	for _, p := range s.Exclude.Names {
		m.exNames = append(m.exNames, strings.ToLower(p))
	}
	return m
}

func (m *matcher) matches(vm VM) bool {
	if m.exVMs[vm.InstanceUUID] || anyIn(m.exTags, vm.Tags) {
		return false
	}
	if len(m.exNames) > 0 {
		name := strings.ToLower(vm.Name)
		for _, p := range m.exNames {
			if ok, _ := path.Match(p, name); ok {
				return false
			}
		}
	}
	if m.vms[vm.InstanceUUID] || anyIn(m.tags, vm.Tags) {
		return true
	}
	if len(m.containers) > 0 {
		for _, have := range vm.Containers {
			if m.containers[ContainerRef{Kind: have.Kind, ID: have.ID}] {
				return true
			}
		}
	}
	return false
}

func anyIn(set map[string]bool, xs []string) bool {
	for _, x := range xs {
		if set[x] {
			return true
		}
	}
	return false
}

// Resolution is a selection evaluated against the inventory at one moment.
type Resolution struct {
	VMs      []VM     // selected, sorted by instance UUID
	New      []VM     // selected now but not in the previous resolution
	Vanished []string // instance UUIDs selected before and not now (deleted, moved out, excluded)
	Missing  []string // explicitly listed instance UUIDs the inventory does not have
}

// Resolve evaluates the selection against inv. previous is the set of
// instance UUIDs selected last time (nil on the first run: nothing is "new").
func (s Selection) Resolve(ctx context.Context, inv Inventory, previous []string) (Resolution, error) {
	all, err := inv.VMs(ctx)
	if err != nil {
		return Resolution{}, fmt.Errorf("list inventory: %w", err)
	}
	return s.resolveList(all, previous), nil
}

func (s Selection) resolveList(all []VM, previous []string) Resolution {
	var res Resolution
	seen := make(map[string]bool, len(all))
	m := s.compile()
	for _, vm := range all {
		seen[vm.InstanceUUID] = true
		if m.matches(vm) {
			res.VMs = append(res.VMs, vm)
		}
	}
	sort.Slice(res.VMs, func(i, j int) bool { return res.VMs[i].InstanceUUID < res.VMs[j].InstanceUUID })
	for _, id := range s.VMs {
		if !seen[id] {
			res.Missing = append(res.Missing, id)
		}
	}
	if previous != nil {
		prev := map[string]bool{}
		for _, id := range previous {
			prev[id] = true
		}
		now := map[string]bool{}
		for _, vm := range res.VMs {
			now[vm.InstanceUUID] = true
			if !prev[vm.InstanceUUID] {
				res.New = append(res.New, vm)
			}
		}
		for _, id := range previous {
			if !now[id] {
				res.Vanished = append(res.Vanished, id)
			}
		}
		sort.Strings(res.Vanished)
	}
	return res
}
