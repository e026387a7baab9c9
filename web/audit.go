package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// Audit outcomes (policy.Event.Outcome): api's, named here as before.
const (
	OutcomeOK     = api.OutcomeOK
	OutcomeFailed = api.OutcomeFailed
)

// auditKinds names the event kind of every route that is a user's action.
// adapt records one event per request to them, after the handler ran (or
// after authentication or the role refused it); the actions that start a
// task record theirs when the task ends instead, with the task's outcome.
var auditKinds = map[string]string{
	"POST /api/v1/auth/login":                             "auth.login",
	"POST /api/v1/instant-recoveries":                     "instant.start",
	"POST /api/v1/transport-probes":                       "vm.probe-transports",
	"POST /api/v1/instant-recoveries/:id/migrate":         "instant.migrate",
	"POST /api/v1/instant-recoveries/:id/stop":            "instant.stop",
	"POST /api/v1/auth/logout":                            "auth.logout",
	"POST /api/v1/auth/tokens":                            "token.create",
	"PUT /api/v1/auth/tokens/:id":                         "token.scope",
	"DELETE /api/v1/auth/tokens/:id":                      "token.delete",
	"POST /api/v1/users":                                  "user.create",
	"PUT /api/v1/users/:name":                             "user.update",
	"DELETE /api/v1/users/:name":                          "user.delete",
	"POST /api/v1/jobs":                                   "job.create",
	"PUT /api/v1/jobs/:id":                                "job.update",
	"DELETE /api/v1/jobs/:id":                             "job.delete",
	"POST /api/v1/jobs/:id/run":                           "job.run",
	"POST /api/v1/copy-jobs":                              "copyjob.create",
	"PUT /api/v1/copy-jobs/:id":                           "copyjob.update",
	"DELETE /api/v1/copy-jobs/:id":                        "copyjob.delete",
	"POST /api/v1/copy-jobs/:id/run":                      "copyjob.run",
	"POST /api/v1/verification-jobs":                      "verificationjob.create",
	"PUT /api/v1/verification-jobs/:id":                   "verificationjob.update",
	"DELETE /api/v1/verification-jobs/:id":                "verificationjob.delete",
	"POST /api/v1/verification-jobs/:id/run":              "verificationjob.run",
	"POST /api/v1/restore-points/:id/lock":                "point.lock",
	"POST /api/v1/restore-points/:id/unlock":              "point.unlock",
	"DELETE /api/v1/restore-points/:id":                   "point.delete",
	"POST /api/v1/restore-points/:id/verify":              "point.verify",
	"POST /api/v1/repositories/:id/check":                 "repository.check",
	"POST /api/v1/repositories/:id/reclaim":               "repository.reclaim",
	"POST /api/v1/tasks/:id/cancel":                       "task.cancel",
	"POST /api/v1/approvals/:id/approve":                  "approval.approve",
	"POST /api/v1/approvals/:id/cancel":                   "approval.cancel",
	"PUT /api/v1/settings":                                "settings.update",
	"POST /api/v1/settings/vcenter/test":                  "settings.test-vcenter",
	"POST /api/v1/settings/smtp/test":                     "settings.test-smtp",
	"PUT /api/v1/settings/vcenter":                        "settings.vcenter",
	"PUT /api/v1/settings/smtp":                           "settings.smtp",
	"PUT /api/v1/settings/maintenance":                    "settings.maintenance",
	"DELETE /api/v1/settings/:section":                    "settings.reset",
	"POST /api/v1/repositories":                           "repository.add",
	"DELETE /api/v1/repositories/:id":                     "repository.remove",
	"POST /api/v1/backups":                                "backup.adhoc",
	"POST /api/v1/restores":                               "restore.vm",
	"POST /api/v1/restores/disk":                          "restore.disk",
	"GET /api/v1/restore-points/:id/volumes/:vol/content": "", // file.download, recorded by auditDownload
}

// auditVerbs says what each kind did, for the event's message.
var auditVerbs = map[string]string{
	"auth.login": "signed in", "auth.logout": "signed out",
	"vm.probe-transports": "tested the transports of VM", "instant.start": "started an instant recovery of restore point", "instant.migrate": "moved to production the VM of instant recovery", "instant.stop": "stopped instant recovery",
	"token.create": "created API token", "token.delete": "deleted API token", "token.scope": "changed the scope of API token",
	"user.create": "created user", "user.update": "changed user", "user.delete": "deleted user",
	"job.create": "created job", "job.update": "changed job", "job.delete": "deleted job", "job.run": "started a run of job",
	"copyjob.create": "created copy job", "copyjob.update": "changed copy job", "copyjob.delete": "deleted copy job", "copyjob.run": "started a run of copy job",
	"verificationjob.create": "created verification job", "verificationjob.update": "changed verification job", "verificationjob.delete": "deleted verification job", "verificationjob.run": "started a run of verification job",
	"point.lock": "locked restore point", "point.unlock": "unlocked restore point", "point.delete": "deleted restore point", "point.verify": "verified restore point",
	"repository.check": "checked repository", "repository.reclaim": "reclaimed the space of repository",
	"task.cancel": "cancelled task", "settings.update": "changed settings",
	"settings.test-vcenter": "tested the vCenter connection", "settings.test-smtp": "tested the SMTP settings",
	"approval.request": "asked for a delayed action", "approval.approve": "approved", "approval.cancel": "cancelled",
	"backup.adhoc": "backed up", "restore.vm": "restored a VM", "restore.disk": "restored a disk",
	"settings.vcenter": "changed settings", "settings.smtp": "changed settings",
	"settings.maintenance": "changed settings", "settings.reset": "reset to the configuration file: settings",
	"repository.add": "added repository", "repository.remove": "removed repository", "repository.test": "tested repository",
	"file.download": "downloaded files",
}

// auditObjectKinds is the object kind (policy.Event.ObjectKind) of each
// audit kind's prefix whose route names the object by its id.
var auditObjectKinds = map[string]string{
	"job": "job", "copyjob": "copyjob", "verificationjob": "verificationjob", "repository": "repository", "user": "user", "token": "token",
	"point": "point", "task": "task", "approval": "approval", "instant": "instant",
}

const auditKey = "vmvault.audit"

// audit is what one request's audit event says, filled in by adapt and
// the handler (noteAudit).
type audit struct {
	kind       string
	user       string // the acting user; the login name for auth.login
	address    string
	subject    string
	vm, repo   string
	detail     string
	taskHandle bool // a task records the event when it ends
	// What the action acted on and what it changed (noteObject, noteChanges).
	objKind, objID, objName string
	changes                 []policy.Change
}

func auditOf(c *gin.Context) *audit {
	v, _ := c.Get(auditKey)
	a, _ := v.(*audit)
	return a
}

// noteAudit tells the request's audit event what the action was about.
// Empty arguments leave what is there.
func noteAudit(c *gin.Context, subject, vm, repo, detail string) {
	a := auditOf(c)
	if a == nil {
		return
	}
	if subject != "" {
		a.subject = subject
	}
	if vm != "" {
		a.vm = vm
	}
	if repo != "" {
		a.repo = repo
	}
	if detail != "" {
		a.detail = detail
	}
}

// startAudit opens the audit record of a request to an audited route.
func (s *Server) startAudit(c *gin.Context, rt route) *audit {
	kind, ok := auditKinds[rt.method+" "+rt.path]
	if !ok || kind == "" {
		return nil
	}
	a := &audit{kind: kind, address: s.clientIP(c)}
	for _, p := range []string{"id", "name"} {
		if v := c.Param(p); v != "" {
			a.subject = v
		}
	}
	// The object from the route alone, so that a request refused before
	// its handler ran still names it; the handler adds the name.
	prefix, rest, _ := strings.Cut(kind, ".")
	switch {
	case prefix == "settings" && !strings.HasPrefix(rest, "test-"):
		sec := rest
		switch rest {
		case "update":
			sec = "general"
		case "reset":
			sec = c.Param("section")
		}
		a.objKind, a.objID, a.objName = "settings", sec, sectionNames[sec]
	case a.subject == "":
	case auditObjectKinds[prefix] != "":
		a.objKind, a.objID = auditObjectKinds[prefix], a.subject
	}
	c.Set(auditKey, a)
	return a
}

// finishAudit records the request's event unless a task took it over.
// An unauthenticated request to anything but the login records nothing:
// it has no user, and anyone could fill the log with them.
func (s *Server) finishAudit(c *gin.Context, a *audit, err error) {
	if a == nil || (a.taskHandle && err == nil) {
		return
	}
	p := principal(c)
	if p.User != "" {
		a.user = p.User
	}
	if a.user == "" && a.kind != "auth.login" {
		return
	}
	s.recordAudit(a, "", err)
}

// recordAudit writes one audit event: to the event log (Config.Events when
// it can record), the metrics and /stream.
func (s *Server) recordAudit(a *audit, taskID string, err error) {
	e := policy.Event{Time: s.now(), Severity: policy.SeverityInfo, Kind: a.kind, Subject: a.subject,
		VM: a.vm, Repository: a.repo, User: a.user, Address: a.address, Outcome: OutcomeOK,
		ObjectKind: a.objKind, ObjectID: a.objID, ObjectName: a.objName, Changes: a.changes}
	if a.objKind == "job" && e.Job == "" {
		e.Job = a.objID // the Job filter finds a job's changes too
	}
	verb := auditVerbs[a.kind]
	if verb == "" {
		verb = a.kind
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", orDash(a.user), verb)
	switch {
	case a.objID != "":
		fmt.Fprintf(&b, " %s", a.objID)
		if a.objName != "" && a.objName != a.objID {
			fmt.Fprintf(&b, " (%s)", a.objName)
		}
	case a.subject != "" && a.kind != "auth.login" && a.kind != "auth.logout":
		fmt.Fprintf(&b, " %s", a.subject)
	}
	if a.detail != "" {
		fmt.Fprintf(&b, " (%s)", a.detail)
	}
	if taskID != "" {
		fmt.Fprintf(&b, ", task %s", taskID)
	}
	fmt.Fprintf(&b, " from %s", orDash(a.address))
	if err != nil {
		e.Outcome = OutcomeFailed
		e.Severity = policy.SeverityWarning
		e.Error = auditError(err)
		fmt.Fprintf(&b, ": failed: %s", e.Error)
	}
	if len(a.changes) > 0 && err == nil {
		parts := make([]string, len(a.changes))
		for i, ch := range a.changes {
			parts[i] = changeText(ch)
		}
		fmt.Fprintf(&b, "; %s", strings.Join(parts, "; "))
	} else if err != nil {
		e.Changes = nil // nothing changed
	}
	e.Message = b.String()
	if rec, ok := s.cfg.Events.(EventRecorder); ok {
		// Detached from the request: a client hanging up cannot keep the
		// event out; a short local write.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if rerr := rec.AddEvent(ctx, e); rerr != nil {
			s.cfg.Logger.Error("record the audit event", "kind", e.Kind, "err", rerr)
		}
	} else {
		s.cfg.Logger.Info("audit", "kind", e.Kind, "user", e.User, "address", e.Address, "outcome", e.Outcome)
	}
	s.ObserveEvent(e)
}

// auditError is the message an audit event keeps of a failure: the API's
// error message, else the error as the task list shows it.
func auditError(err error) string {
	var ae *apiError
	if errors.As(err, &ae) && ae.msg != "" {
		return ae.msg
	}
	return err.Error()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// startTask starts a task for the request and moves its audit event to the
// task's end, so that the event says how the restore, backup or check
// ended, not only that it was accepted.
func (s *Server) startTask(c *gin.Context, kind, subject string, fn task.Func) (task.Info, error) {
	a := auditOf(c)
	if a == nil {
		return s.cfg.Tasks.Start(kind, subject, fn)
	}
	if p := principal(c); p.User != "" {
		a.user = p.User
	}
	snapshot := *a
	idc := make(chan string, 1)
	info, err := s.cfg.Tasks.Start(kind, subject, func(ctx context.Context, rep *task.Reporter) (any, error) {
		res, ferr := fn(ctx, rep)
		var id string
		select {
		case id = <-idc:
		case <-time.After(5 * time.Second):
		}
		s.recordAudit(&snapshot, id, ferr)
		return res, ferr
	})
	if err == nil {
		idc <- info.ID
		a.taskHandle = true
	}
	return info, err
}

// auditPoint names the VM and repository of the restore point id in the
// request's audit event, when the point exists.
func (s *Server) auditPoint(c *gin.Context, id string) {
	a := auditOf(c)
	if a == nil || id == "" || s.cfg.Points == nil {
		return
	}
	rp, err := s.cfg.Points.Point(c.Request.Context(), id)
	if err != nil {
		return
	}
	a.vm, a.repo = rp.VM.InstanceUUID, rp.Repository
	a.subject = fmt.Sprintf("%s (VM %s, %s)", rp.ID, rp.VM.Name, rp.Time.UTC().Format("2006-01-02 15:04:05 UTC"))
	a.objKind, a.objID, a.objName = "point", rp.ID, fmt.Sprintf("VM %s, %s", rp.VM.Name, rp.Time.UTC().Format("2006-01-02 15:04:05 UTC"))
}
