package node

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestStepScoped(t *testing.T) {
	step := []string{
		"SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS",
		"SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_LAUNCHER_PORT", "SLURM_STEP_GPUS",
		"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_GTIDS", "SLURM_TASK_PID",
		"SLURM_CPUS_PER_TASK", "SRUN_CPUS_PER_TASK", "SLURM_CPU_BIND", "SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_LIST",
		"SLURM_CPU_BIND_VERBOSE", "SLURM_MEM_BIND", "SLURM_MEM_BIND_TYPE",
		"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_DISTRIBUTION",
		"SLURM_SRUN_COMM_HOST", "SLURM_SRUN_COMM_PORT", "SLURM_LAUNCH_NODE_IPADDR", "SLURM_UMASK",
		"SLURM_PRIO_PROCESS", "SLURM_OVERLAP", "SLURM_EXCLUSIVE", "SLURM_MEM_PER_NODE", "SLURM_GPUS_PER_NODE",
		"SLURM_UNBUFFEREDIO", "SLURM_KILL_BAD_EXIT", "SLURM_EXPORT_ENV",
	}
	job := []string{
		"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES",
		"SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_GPUS", "SLURM_JOB_PARTITION", "SLURM_JOB_ACCOUNT", "SLURM_JOB_QOS",
		"SLURM_JOB_UID", "SLURM_JOB_USER", "SLURM_NODELIST", "SLURM_NNODES", "SLURM_CLUSTER_NAME",
		"SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST", "SLURM_GPUS_ON_NODE", "SLURM_CPUS_ON_NODE",
		"SLURM_CONF", "SLURM_CONF_SERVER", "SLURMD_NODENAME", "SLURM_WORKING_CLUSTER",
		"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_JOB_ID", "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN",
		"SLURM_NODE_ALIASES", "SLURM_RESTART_COUNT", "PATH", "HOME", "CUDA_VISIBLE_DEVICES",
	}
	for _, n := range step {
		if !stepScoped(n) {
			t.Errorf("%s is step-scoped", n)
		}
	}
	for _, n := range job {
		if stepScoped(n) {
			t.Errorf("%s is job-scoped", n)
		}
	}
}

// TestSlurmRankBase: on a node of an allocation (its home holds the
// batch script's job environment), a rank's base environment loses the
// step-scoped variables and gets the allocation's values back; elsewhere
// nothing changes.
func TestSlurmRankBase(t *testing.T) {
	home := t.TempDir()
	step := []string{"PATH=/bin", "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=n2", "SLURM_NNODES=1", "SLURM_PROCID=0",
		"SLURM_STEP_ID=3", "SLURM_CONF=/etc/slurm.conf", "CUDA_VISIBLE_DEVICES=2,3"}
	if got, on := slurmRankBase(home, step); on || !reflect.DeepEqual(got, step) {
		t.Fatalf("off Slurm the environment changed: %v %v", on, got)
	}
	if err := os.MkdirAll(filepath.Join(home, ".sky"), 0o700); err != nil {
		t.Fatal(err)
	}
	job := "SLURM_JOB_ID=7\nSLURM_JOB_NODELIST=n[1-2]\nSLURM_NNODES=2\nSLURM_PROCID=0\nSLURM_CPUS_PER_TASK=4\n"
	if err := os.WriteFile(filepath.Join(home, ".sky", "slurm_job.env"), []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	got, on := slurmRankBase(home, step)
	sort.Strings(got)
	want := []string{"CUDA_VISIBLE_DEVICES=2,3", "PATH=/bin", "SLURM_CONF=/etc/slurm.conf", "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_NNODES=2"}
	if !on || !reflect.DeepEqual(got, want) {
		t.Fatalf("rank base on Slurm:\n got %v\nwant %v", got, want)
	}
	for _, c := range []struct{ node, chosen, want string }{
		{"2,3", "0", "2"}, {"2,3", "0,1", "2,3"}, {"", "0,1", "0,1"}, {"2,3", "5", "5"}, {"0,1,2,3", "1,3", "1,3"},
	} {
		if got := slurmDevices(c.node, c.chosen); got != c.want {
			t.Errorf("slurmDevices(%q, %q) = %q, want %q", c.node, c.chosen, got, c.want)
		}
	}
	if got := withoutStepVars(step); strings.Contains(strings.Join(got, " "), "SLURM_STEP_ID") || strings.Contains(strings.Join(got, " "), "SLURM_PROCID") {
		t.Fatalf("withoutStepVars kept step variables: %v", got)
	}
}
