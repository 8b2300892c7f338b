// Package agent is the node runtime: the job table, the gang scheduler,
// rank processes, logs and autostop, driven through the hidden
// `sky agent <verb> --json` command on each node.
//
// # How the backend drives it
//
// Every verb prints one JSON value on stdout ({"error": ..., "code": ...}
// with exit code 1 on failure), so it works through any CommandRunner.
// Those values are the records of package agentapi, which the backend
// imports instead of this package:
//
//	sky agent start --json  < config.json    # on every node; idempotent
//	sky agent submit --json < job.json       # on the head: {"job_id": 3}
//	sky agent queue --json [--skip-finished]
//	sky agent status --json [JOB_ID...]      # statuses + daemon health
//	sky agent cancel --json (JOB_ID... | --all) [--user-hash H]
//	sky agent logs [--job N] [--rank R] [--follow] [--tail N]  # the job stream as SkyPilot shows it (a rank: raw); exit code per runtime.md
//	sky agent set-autostop --json --idle-minutes N [--down] [--wait-for M] [--hook CMD] [--hook-timeout S]
//	sky agent stop-daemon --json
//	sky agent ssh-serve --listen HOST:PORT [--detach]  # the node's SSH server, for transport agent-ssh
//
// Config (see Config) lists the cluster's nodes head first, how the head
// reaches each node (Transport) and this node's index. On the head,
// `start` spawns a daemon (one per node HOME, guarded by a lock file and a
// unix socket in ~/.sky/agent/); on workers it only records the config:
// ranks on workers are started by the head through the worker's runner
// with `sky agent exec-rank` (spec on stdin) and killed with
// `sky agent kill-rank`, so a transport plugs in by implementing
// NodeRunner (Transports; an infrastructure's own from its node package).
//
// # Jobs
//
// The job table is SQLite in ~/.sky/agent/jobs.db; the daemon is its only
// writer and read-only verbs (queue, status, logs) open it directly, so they
// answer even when the daemon is down. submit talks to the daemon over the
// socket; the daemon inserts the row and dispatches within milliseconds.
// Setup is a phase of the job (detached setup, SETTING_UP, FAILED_SETUP
// on failure) when the spec carries one: a launch submits its setup with
// its run, as SkyPilot does for user clusters. Every rank of either phase
// runs as SkyPilot's job script does (script.go): an interactive bash that
// sources ~/.bashrc, enters ~/sky_workdir and exports the job's
// variables; when one rank fails, the other ranks of the phase are
// killed, so a failed setup ends the job at once.
//
// Scheduling is strict FIFO with gang placement (Schedule): a job needing
// N nodes starts only when N nodes have its CPU demand (default 0.5) and
// GPUs free; later jobs never overtake it. If the daemon dies, a restarted
// daemon kills what is left of the jobs it was running and marks them
// FAILED_DRIVER; pending jobs are kept.
package agent

import (
	"fmt"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

// transitions is the status machine; terminal statuses have no entry.
var transitions = map[agentapi.Status][]agentapi.Status{
	agentapi.StatusInit:      {agentapi.StatusPending, agentapi.StatusCancelled, agentapi.StatusFailedDriver},
	agentapi.StatusPending:   {agentapi.StatusSettingUp, agentapi.StatusRunning, agentapi.StatusCancelled, agentapi.StatusFailedDriver},
	agentapi.StatusSettingUp: {agentapi.StatusRunning, agentapi.StatusFailedSetup, agentapi.StatusCancelled, agentapi.StatusFailedDriver},
	agentapi.StatusRunning:   {agentapi.StatusSucceeded, agentapi.StatusFailed, agentapi.StatusCancelled, agentapi.StatusFailedDriver},
}

// CanTransition reports whether a job may move from one status to another.
func CanTransition(from, to agentapi.Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// unixSeconds is the time format of the job table and of -o json.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// runTimestamp formats t like SkyPilot's log dir names.
func runTimestamp(t time.Time) string {
	return "sky-" + t.Format("2006-01-02-15-04-05") + fmt.Sprintf("-%06d", t.Nanosecond()/1000)
}
