package web

import "github.com/vmvault/vmvault/internal/auth"

// table is the route table: every route, the role it needs ("" = public)
// and how it honours the principal's scope (scopeClass; TestScopeRouteTable
// checks every route says it).
func (s *Server) table() []route {
	const (
		pub = auth.Role("")
		ro  = auth.RoleRestoreOnly
		op  = auth.RoleOperator
		adm = auth.RoleAdministrator

		// How each route honours a scope (scope.go).
		na   = scopeNA
		pid  = scopePointID
		rid  = scopeRepoID
		flt  = scopeFiltered
		body = scopeBody
		tid  = scopeTaskID
		iid  = scopeInstantID
	)
	return []route{
		{"GET", "/healthz", pub, na, s.healthz},
		{"GET", "/metrics", ro, na, s.serveMetrics},
		{"GET", "/api/v1/openapi.json", pub, na, s.openapi},

		{"POST", "/api/v1/auth/login", pub, na, s.login},
		{"POST", "/api/v1/auth/logout", ro, na, s.logout},
		{"GET", "/api/v1/auth/me", ro, na, s.me},
		{"GET", "/api/v1/auth/tokens", adm, na, s.listTokens},
		{"POST", "/api/v1/auth/tokens", adm, na, s.createToken},
		{"PUT", "/api/v1/auth/tokens/:id", adm, na, s.putTokenScope},
		{"DELETE", "/api/v1/auth/tokens/:id", adm, na, s.deleteToken},

		{"GET", "/api/v1/users", adm, na, s.listUsers},
		{"POST", "/api/v1/users", adm, na, s.createUser},
		{"PUT", "/api/v1/users/:name", adm, na, s.updateUser},
		{"DELETE", "/api/v1/users/:name", adm, na, s.deleteUser},

		{"GET", "/api/v1/jobs", ro, na, s.listJobs},
		{"POST", "/api/v1/jobs", adm, na, s.createJob},
		{"GET", "/api/v1/jobs/:id", ro, na, s.getJob},
		{"PUT", "/api/v1/jobs/:id", adm, na, s.putJob},
		{"DELETE", "/api/v1/jobs/:id", adm, na, s.deleteJob},
		{"GET", "/api/v1/jobs/:id/retention-preview", ro, flt, s.retentionPreview},
		{"POST", "/api/v1/jobs/:id/run", op, na, s.runJob},
		{"GET", "/api/v1/jobs/:id/runs", ro, flt, s.jobRuns},
		{"POST", "/api/v1/retention-preview", ro, flt, s.retentionPreviewUnsaved},

		{"GET", "/api/v1/copy-jobs", ro, na, s.listCopyJobs},
		{"POST", "/api/v1/copy-jobs", adm, na, s.createCopyJob},
		{"GET", "/api/v1/copy-jobs/:id", ro, na, s.getCopyJob},
		{"PUT", "/api/v1/copy-jobs/:id", adm, na, s.putCopyJob},
		{"DELETE", "/api/v1/copy-jobs/:id", adm, na, s.deleteCopyJob},
		{"POST", "/api/v1/copy-jobs/:id/run", op, na, s.runCopyJob},
		{"GET", "/api/v1/copy-jobs/:id/runs", ro, na, s.copyJobRuns},

		{"GET", "/api/v1/verification-jobs", ro, na, s.listVerificationJobs},
		{"POST", "/api/v1/verification-jobs", adm, na, s.createVerificationJob},
		{"GET", "/api/v1/verification-jobs/:id", ro, na, s.getVerificationJob},
		{"PUT", "/api/v1/verification-jobs/:id", adm, na, s.putVerificationJob},
		{"DELETE", "/api/v1/verification-jobs/:id", adm, na, s.deleteVerificationJob},
		{"POST", "/api/v1/verification-jobs/:id/run", op, na, s.runVerificationJob},

		{"GET", "/api/v1/restore-points", ro, flt, s.listPoints},
		{"GET", "/api/v1/restore-points/:id", ro, pid, s.getPoint},
		{"POST", "/api/v1/restore-points/:id/lock", op, pid, s.lockPoint},
		{"POST", "/api/v1/restore-points/:id/unlock", op, pid, s.unlockPoint},
		{"DELETE", "/api/v1/restore-points/:id", adm, pid, s.deletePoint},
		{"POST", "/api/v1/restore-points/:id/verify", ro, pid, s.verifyPoint},
		{"GET", "/api/v1/restore-points/:id/volumes", ro, pid, s.listVolumes},
		{"GET", "/api/v1/restore-points/:id/volumes/:vol/files", ro, pid, s.listFiles},
		{"GET", "/api/v1/restore-points/:id/volumes/:vol/content", ro, pid, s.getContent},
		{"GET", "/api/v1/files/search", ro, flt, s.searchFiles},

		{"GET", "/api/v1/repositories", ro, flt, s.listRepositories},
		{"POST", "/api/v1/repositories", adm, na, s.addRepository},
		{"GET", "/api/v1/repositories/:id", ro, rid, s.getRepository},
		{"DELETE", "/api/v1/repositories/:id", adm, rid, s.removeRepository},
		{"GET", "/api/v1/repositories/:id/usage", ro, rid, s.repositoryUsage},
		{"POST", "/api/v1/repositories/:id/check", op, rid, s.checkRepository},
		{"POST", "/api/v1/repositories/:id/reclaim", op, rid, s.reclaimRepository},

		{"GET", "/api/v1/approvals", ro, flt, s.listApprovals},
		{"POST", "/api/v1/approvals/:id/approve", adm, na, s.approveAction},
		{"POST", "/api/v1/approvals/:id/cancel", adm, na, s.cancelAction},

		{"GET", "/api/v1/tasks", ro, flt, s.listTasks},
		{"GET", "/api/v1/tasks/:id", ro, tid, s.getTask},
		{"GET", "/api/v1/tasks/:id/events", ro, tid, s.taskEvents},
		{"POST", "/api/v1/tasks/:id/cancel", op, tid, s.cancelTask},

		{"GET", "/api/v1/events", ro, flt, s.listEvents},
		{"GET", "/api/v1/events/export", ro, flt, s.exportEvents},
		{"GET", "/api/v1/event-kinds", ro, na, s.listEventKinds},
		{"GET", "/api/v1/stream", ro, flt, s.stream},
		{"GET", "/api/v1/dashboard", ro, flt, s.dashboard},
		{"GET", "/api/v1/vms", ro, flt, s.listVMs},
		{"GET", "/api/v1/inventory", ro, na, s.inventoryTree},
		{"GET", "/api/v1/tags", ro, na, s.listTags},
		{"GET", "/api/v1/restore-targets", ro, na, s.restoreTargets},
		{"GET", "/api/v1/settings", ro, na, s.getSettings},
		{"PUT", "/api/v1/settings", adm, na, s.putSettings},
		{"POST", "/api/v1/settings/vcenter/test", adm, na, s.testVCenter},
		{"POST", "/api/v1/settings/smtp/test", adm, na, s.testSMTP},
		{"PUT", "/api/v1/settings/vcenter", adm, na, s.putVCenterSettings},
		{"PUT", "/api/v1/settings/smtp", adm, na, s.putSMTPSettings},
		{"PUT", "/api/v1/settings/maintenance", adm, na, s.putMaintenanceSettings},
		{"DELETE", "/api/v1/settings/:section", adm, na, s.resetSettings},

		{"POST", "/api/v1/backups", op, body, s.startBackup},
		{"POST", "/api/v1/transport-probes", op, body, s.startProbe},
		{"POST", "/api/v1/restores", ro, body, s.startRestore},
		{"POST", "/api/v1/restores/disk", ro, body, s.startDiskRestore},
		{"GET", "/api/v1/instant-recoveries", ro, flt, s.listInstant},
		{"POST", "/api/v1/instant-recoveries", ro, body, s.startInstant},
		{"GET", "/api/v1/instant-recoveries/:id", ro, iid, s.getInstant},
		{"POST", "/api/v1/instant-recoveries/:id/migrate", op, iid, s.migrateInstant},
		{"POST", "/api/v1/instant-recoveries/:id/stop", op, iid, s.stopInstant},
	}
}
