package slurm

import (
	"reflect"
	"sort"
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
		if !StepScoped(n) {
			t.Errorf("%s is step-scoped", n)
		}
	}
	for _, n := range job {
		if StepScoped(n) {
			t.Errorf("%s is job-scoped", n)
		}
	}
}

func TestUserEnv(t *testing.T) {
	// What a one-node step started from the login node with
	// srun --overlap --jobid=J --nodelist=N --nodes=1 --ntasks=1 sees.
	in := []string{
		"PATH=/usr/bin", "HOME=/tmp/sky-x",
		"SLURM_JOB_ID=77", "SLURM_JOBID=77", "SLURM_JOB_NODELIST=tihost[1-2]", "SLURM_JOB_NUM_NODES=2",
		"SLURM_NODELIST=tihost2", "SLURM_NNODES=1", "SLURM_STEP_ID=3", "SLURM_PROCID=0", "SLURM_NTASKS=1",
		"SLURM_CPU_BIND=quiet,mask_cpu:0x1", "SLURM_GPUS_ON_NODE=2", "SLURM_CONF=/etc/slurm/slurm.conf",
		"SLURMD_NODENAME=tihost2", "CUDA_VISIBLE_DEVICES=0,1",
	}
	got := UserEnv(in)
	sort.Strings(got)
	want := []string{
		"CUDA_VISIBLE_DEVICES=0,1", "HOME=/tmp/sky-x", "PATH=/usr/bin",
		"SLURMD_NODENAME=tihost2", "SLURM_CONF=/etc/slurm/slurm.conf", "SLURM_GPUS_ON_NODE=2",
		"SLURM_JOBID=77", "SLURM_JOB_ID=77", "SLURM_JOB_NODELIST=tihost[1-2]", "SLURM_JOB_NUM_NODES=2",
		"SLURM_NNODES=2", "SLURM_NODELIST=tihost[1-2]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := UserEnv([]string{"A=1"}); !reflect.DeepEqual(got, []string{"A=1"}) {
		t.Fatalf("outside Slurm: %q", got)
	}
}
