package web

import (
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// EventKind is one kind of event GET /event-kinds lists: the console's
// Kind filter offers every one, grouped.
type EventKind = api.EventKind

// eventKindGroups orders the groups of the Kind filter.
var eventKindGroups = []string{"Sign-ins", "Backups", "Jobs", "Copy jobs", "Verification jobs", "Restores", "Restore points", "Repositories", "Settings", "Users and tokens", "Approvals and tasks"}

// schedulerKinds are the kinds of events no user's action records: the
// scheduler's (policy), the services' and the daemon's, with their labels.
var schedulerKinds = []EventKind{
	{Kind: EventLoginLockout, Group: "Sign-ins", Label: "sign-ins locked out"},
	{Kind: policy.EventJobStarted, Group: "Jobs", Label: "job run started"},
	{Kind: policy.EventJobFinished, Group: "Jobs", Label: "job run finished"},
	{Kind: policy.EventSelectionNew, Group: "Jobs", Label: "VM newly selected"},
	{Kind: policy.EventSelectionVanished, Group: "Jobs", Label: "selected VM gone"},
	{Kind: policy.EventSelectionFailed, Group: "Jobs", Label: "selection failed"},
	{Kind: policy.EventWindowMissed, Group: "Jobs", Label: "backup window missed"},
	{Kind: policy.EventScriptRan, Group: "Jobs", Label: "job script ran"},
	{Kind: policy.EventScriptFailed, Group: "Jobs", Label: "job script failed"},
	{Kind: policy.EventVMBackedUp, Group: "Backups", Label: "VM backed up"},
	{Kind: policy.EventVMFailed, Group: "Backups", Label: "VM backup failed"},
	{Kind: policy.EventVMCancelled, Group: "Backups", Label: "VM backup cancelled"},
	{Kind: policy.EventVMInterrupted, Group: "Backups", Label: "VM backup interrupted"},
	{Kind: policy.EventVMNotBackedUp, Group: "Backups", Label: "VM not backed up"},
	{Kind: "snapshot.stale-removed", Group: "Backups", Label: "stale snapshot removed"},
	{Kind: "snapshot.sweep-failed", Group: "Backups", Label: "stale snapshot sweep failed"},
	{Kind: "copy.finished", Group: "Copy jobs", Label: "copy finished"},
	{Kind: "copy.failed", Group: "Copy jobs", Label: "copy failed"},
	{Kind: "verification.finished", Group: "Verification jobs", Label: "verification run finished"},
	{Kind: "verification.failed", Group: "Verification jobs", Label: "verification run failed"},
	{Kind: policy.EventRetentionRemoved, Group: "Restore points", Label: "removed by retention"},
	{Kind: policy.EventReclaimDone, Group: "Repositories", Label: "space reclaimed"},
	{Kind: policy.EventCheckClean, Group: "Repositories", Label: "check found no damage"},
	{Kind: policy.EventCheckDamage, Group: "Repositories", Label: "check found damage"},
	{Kind: policy.EventCheckPaused, Group: "Repositories", Label: "check paused"},
	{Kind: policy.EventMaintenanceFailed, Group: "Repositories", Label: "maintenance failed"},
	{Kind: "repository.space-low", Group: "Repositories", Label: "space low"},
	{Kind: "repository.space-ok", Group: "Repositories", Label: "space recovered"},
	{Kind: "instant.overlay-high", Group: "Restores", Label: "instant recovery overlay above 80%"},
	{Kind: "instant.overlay-full", Group: "Restores", Label: "instant recovery overlay full"},
	{Kind: "approval.execute", Group: "Approvals and tasks", Label: "delayed action carried out"},
}

// auditKindGroup is the Kind filter's group of each audit kind's prefix.
var auditKindGroup = map[string]string{
	"auth": "Sign-ins", "backup": "Backups", "vm": "Backups", "job": "Jobs", "copyjob": "Copy jobs", "verificationjob": "Verification jobs",
	"restore": "Restores", "instant": "Restores", "file": "Restores", "point": "Restore points",
	"repository": "Repositories", "settings": "Settings", "user": "Users and tokens", "token": "Users and tokens",
	"approval": "Approvals and tasks", "task": "Approvals and tasks",
}

// eventKinds is every kind an event can have, grouped in the filter's
// order: the audit trail's (auditVerbs, labelled by their verb) and the
// others (schedulerKinds).
func eventKinds() []EventKind {
	all := append([]EventKind(nil), schedulerKinds...)
	for k, verb := range auditVerbs {
		prefix, _, _ := strings.Cut(k, ".")
		all = append(all, EventKind{Kind: k, Group: auditKindGroup[prefix], Label: verb, Audit: true})
	}
	rank := map[string]int{}
	for i, g := range eventKindGroups {
		rank[g] = i
	}
	sort.Slice(all, func(i, j int) bool {
		if a, b := rank[all[i].Group], rank[all[j].Group]; a != b {
			return a < b
		}
		return all[i].Kind < all[j].Kind
	})
	return all
}

func (s *Server) listEventKinds(c *gin.Context) (any, error) { return eventKinds(), nil }
