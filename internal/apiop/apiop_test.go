package apiop

import (
	"testing"

	"github.com/skygo/skygo/internal/op"
)

func TestAdminOnly(t *testing.T) {
	for _, c := range []struct {
		name, adminOnly string
	}{
		{LocalUp.Name, LocalUp.AdminOnly},
		{LocalDown.Name, LocalDown.AdminOnly},
		{SSHUp.Name, SSHUp.AdminOnly},
		{SSHDown.Name, SSHDown.AdminOnly},
		{KubernetesLabelGPUs.Name, KubernetesLabelGPUs.AdminOnly},
	} {
		if c.adminOnly == "" {
			t.Errorf("%s: not admin-only; it changes infrastructure every user shares", c.name)
		}
	}
	// Per cluster (owner or admin, judged by the backend) or per user:
	// anyone may send them.
	for _, c := range []struct {
		name, adminOnly string
	}{
		{Down.Name, Down.AdminOnly},
		{Launch.Name, Launch.AdminOnly},
		{VolumesDelete.Name, VolumesDelete.AdminOnly},
		{KubernetesNodeInfo.Name, KubernetesNodeInfo.AdminOnly},
	} {
		if c.adminOnly != "" {
			t.Errorf("%s: admin-only (%s), want open to every user", c.name, c.adminOnly)
		}
	}
}

func TestLogTailsEndWithTheirFollower(t *testing.T) {
	for _, c := range []struct {
		name     string
		schedule op.Schedule
		cancel   bool
	}{
		{Logs.Name, Logs.Schedule, Logs.CancelWhenUnfollowed},
		{JobsLogs.Name, JobsLogs.Schedule, JobsLogs.CancelWhenUnfollowed},
		{PoolLogs.Name, PoolLogs.Schedule, PoolLogs.CancelWhenUnfollowed},
		{ServeLogs.Name, ServeLogs.Schedule, ServeLogs.CancelWhenUnfollowed},
	} {
		if c.schedule != op.Follow || !c.cancel {
			t.Errorf("%s: schedule %v, cancel when unfollowed %v; want the follow pool, cancelled", c.name, c.schedule, c.cancel)
		}
	}
}
