package replicaset

import (
	"errors"
	"testing"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

func TestJudge(t *testing.T) {
	running := &agentapi.Job{Status: agentapi.StatusRunning}
	setup := &agentapi.Job{Status: agentapi.StatusSettingUp}
	ended := &agentapi.Job{Status: agentapi.StatusFailed}
	noAnswer := errors.New("head did not answer")
	unsure := errors.New("cloud API throttled")
	for _, tc := range []struct {
		name string
		s    Sight
		want Verdict
	}{
		{"job running: no need to ask the cloud", Sight{Follows: true, Job: running}, Up},
		{"job in setup counts as going on", Sight{Follows: true, Job: setup}, Up},
		{"job ended: is the cluster still there?", Sight{Follows: true, Job: ended}, AskAlive},
		{"job ended on an UP cluster", Sight{Follows: true, Job: ended, AliveKnown: true, Alive: true}, JobEnded},
		{"job ended on a gone cluster: lost, not failed", Sight{Follows: true, Job: ended, AliveKnown: true}, ClusterLost},
		{"job ended, cloud cannot vouch for the cluster: lost", Sight{Follows: true, Job: ended, AliveKnown: true, Alive: true, AliveErr: unsure}, ClusterLost},
		{"head silent: ask", Sight{Follows: true, JobErr: noAnswer}, AskAlive},
		{"head silent, cluster gone", Sight{Follows: true, JobErr: noAnswer, AliveKnown: true}, ClusterLost},
		{"head silent, cluster UP: wait (a slow head is not a lost one)", Sight{Follows: true, JobErr: noAnswer, AliveKnown: true, Alive: true}, Unsure},
		{"head silent, cloud unsure: wait", Sight{Follows: true, JobErr: noAnswer, AliveKnown: true, AliveErr: unsure}, Unsure},
		{"no such job: ask", Sight{Follows: true}, AskAlive},
		{"no such job on an UP cluster: the job is gone", Sight{Follows: true, AliveKnown: true, Alive: true}, JobGone},
		{"no such job, cluster gone", Sight{Follows: true, AliveKnown: true}, ClusterLost},
		{"no such job, cloud unsure: wait", Sight{Follows: true, AliveKnown: true, AliveErr: unsure}, Unsure},
		{"no job followed: ask", Sight{}, AskAlive},
		{"no job followed, cluster UP", Sight{AliveKnown: true, Alive: true}, Up},
		{"no job followed, cluster gone", Sight{AliveKnown: true}, ClusterLost},
		{"no job followed, cloud unsure: wait", Sight{AliveKnown: true, AliveErr: unsure}, Unsure},
	} {
		if got := Judge(tc.s); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
