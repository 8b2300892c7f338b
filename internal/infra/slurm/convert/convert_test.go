package convert

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// convertText converts script and checks the result loads as a task.
func convertText(t *testing.T, script string, opts Options) (map[string]any, *Result) {
	t.Helper()
	r, err := Convert(Script{Path: "job.sbatch", Text: script}, opts)
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, script)
	}
	dag := loadsAsTask(t, "job.yaml", r.YAML)
	bashSyntaxOK(t, "setup", dag.Tasks[0].Setup)
	bashSyntaxOK(t, "run", dag.Tasks[0].Run)
	var m map[string]any
	if err := yaml.Unmarshal([]byte(r.YAML), &m); err != nil {
		t.Fatal(err)
	}
	return m, r
}

func field(m map[string]any, path string) any {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

func hasNote(r *Result, unmapped bool, sub string) bool {
	for _, n := range r.Notes {
		if n.Unmapped == unmapped && strings.Contains(n.Text, sub) {
			return true
		}
	}
	return false
}

// The guide's worked example (§2.1), field by field against the YAML it
// shows. The guide's setup (`pip install -r requirements.txt`) is not in
// the script — it is the guide's advice for replacing modules (§6) — so
// what is compared is what the script says: setup loads the module and
// the venv, and run ends with the srun's command without srun.
func TestSeedWorkedExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "seed-2.1-train.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	m, r := convertText(t, string(data), Options{Cluster: "mycluster", GPUType: "H100"})
	want := map[string]any{
		"name":                                "train",
		"num_nodes":                           2,
		"resources.infra":                     "slurm/mycluster/gpu",
		"resources.accelerators":              "H100:8",
		"resources.cpus":                      "32+",
		"resources.memory":                    "256+",
		"config.slurm.sbatch_options.time":    "24:00:00",
		"config.slurm.sbatch_options.account": "ai-research",
	}
	for k, v := range want {
		if got := field(m, k); got != v {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	if opts := field(m, "config.slurm.sbatch_options").(map[string]any); len(opts) != 2 {
		t.Errorf("sbatch_options = %v, want time and account only", opts)
	}
	setup := field(m, "setup").(string)
	for _, l := range []string{"module load cuda/12.1", "source ~/venv/bin/activate"} {
		if !strings.Contains(setup, l+"\n") {
			t.Errorf("setup lacks %q:\n%s", l, setup)
		}
	}
	run := field(m, "run").(string)
	if !strings.HasSuffix(run, "\npython train.py --epochs 100\n") || strings.Contains(run, "srun") {
		t.Errorf("run:\n%s", run)
	}
	if r.Submit != "sky jobs launch -n train train.yaml" {
		t.Errorf("submit = %q, want the guide's", r.Submit)
	}
	// The field order of the guide's YAML.
	order := []string{"name:", "num_nodes:", "resources:", "config:", "setup:", "run:"}
	last := -1
	for _, k := range order {
		i := strings.Index(r.YAML, "\n"+k)
		if k == "name:" {
			i = strings.Index(r.YAML, k)
		}
		if i <= last {
			t.Errorf("%s out of order in\n%s", k, r.YAML)
		}
		last = i
	}
	if !strings.Contains(r.YAML, "time: \"24:00:00\"\n") || !strings.Contains(r.YAML, "account: ai-research\n") || !strings.Contains(r.YAML, "cpus: 32+\n") {
		t.Errorf("scalars not written as the guide writes them:\n%s", r.YAML)
	}
}

// §5.2, §5.3, §6, §7.1: the run (and setup) the guide shows, exactly,
// blank lines aside.
func TestSeedSections(t *testing.T) {
	cases := []struct {
		file, key, want string
		opts            Options
	}{
		{"seed-5.1-preprocess.sbatch", "run", "python preprocess.py\n", Options{}},
		{"seed-5.2-torchrun.sbatch", "run", `MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)
torchrun \
  --nnodes=$SKYPILOT_NUM_NODES \
  --nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE \
  --node_rank=$SKYPILOT_NODE_RANK \
  --master_addr=$MASTER_ADDR \
  --master_port=8008 \
  train.py
`, Options{}},
		{"seed-5.3-mpi.sbatch", "run", `if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
  srun --overlap --mpi=pmix \
    --ntasks-per-node=$SKYPILOT_NUM_GPUS_PER_NODE \
    ./my_mpi_program
fi
`, Options{}},
		{"seed-6-conda.sbatch", "setup", `conda create -n myenv python=3.10 -y
conda activate myenv
conda install pytorch pytorch-cuda=12.1 -c pytorch -c nvidia -y
`, Options{}},
		{"seed-6-conda.sbatch", "run", "conda activate myenv\npython train.py\n", Options{}},
		{"seed-7.1-array.sbatch", "run", "python train.py --shard $SKYPILOT_JOB_RANK --num-shards $SKYPILOT_NUM_JOBS\n", Options{}},
	}
	for _, tc := range cases {
		data, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := convertText(t, string(data), tc.opts)
		got, _ := field(m, tc.key).(string)
		if dropBlank(got) != tc.want {
			t.Errorf("%s %s:\n%s\nwant:\n%s", tc.file, tc.key, got, tc.want)
		}
	}
	// §5.2 and §5.3 resources and num_nodes.
	for _, f := range []string{"seed-5.2-torchrun.sbatch", "seed-5.3-mpi.sbatch"} {
		data, _ := os.ReadFile(filepath.Join("testdata", f))
		m, r := convertText(t, string(data), Options{})
		if field(m, "num_nodes") != 2 || field(m, "resources.accelerators") != "H100:8" || field(m, "resources.infra") != "slurm" {
			t.Errorf("%s: %s", f, r.YAML)
		}
		if (f == "seed-5.3-mpi.sbatch") != r.SlurmOnly {
			t.Errorf("%s: SlurmOnly = %v", f, r.SlurmOnly)
		}
	}
}

func dropBlank(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// §7.2: two scripts chained with afterok become the guide's pipeline.
func TestSeedPipeline(t *testing.T) {
	var scripts []Script
	for _, f := range []string{"seed-7.2-train.sbatch", "seed-7.2-eval.sbatch"} {
		data, _ := os.ReadFile(filepath.Join("testdata", f))
		scripts = append(scripts, Script{Path: f, Text: string(data)})
	}
	r, err := ConvertPipeline(scripts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dag := loadsAsTask(t, "p.yaml", r.YAML)
	if dag.Name != "train-then-eval" || len(dag.Tasks) != 2 || dag.Tasks[0].Name != "train" || dag.Tasks[1].Name != "eval" {
		t.Fatalf("pipeline %q with %d tasks:\n%s", dag.Name, len(dag.Tasks), r.YAML)
	}
	for i, want := range []string{"python train.py\n", "python eval.py\n"} {
		if dag.Tasks[i].Run != want {
			t.Errorf("task %d run = %q", i, dag.Tasks[i].Run)
		}
	}
	if !strings.Contains(r.YAML, "accelerators: H100:8") || !strings.Contains(r.YAML, "accelerators: L4:1") {
		t.Errorf("%s", r.YAML)
	}
	if r.Submit != "sky jobs launch -n train-then-eval train-then-eval.yaml" {
		t.Errorf("submit %q", r.Submit)
	}
}

func TestDirectiveForms(t *testing.T) {
	cases := []struct {
		name, directives string
		want             map[string]any
	}{
		{"long with =", "--nodes=3 --cpus-per-task=4 --mem=8G --partition=p1 --job-name=a1",
			map[string]any{"num_nodes": 3, "resources.cpus": "4+", "resources.memory": "8+", "resources.infra": "slurm/c/p1", "name": "a1"}},
		{"long with space", "--nodes 3\n#SBATCH --cpus-per-task 4\n#SBATCH --mem 8192\n#SBATCH --partition p1",
			map[string]any{"num_nodes": 3, "resources.cpus": "4+", "resources.memory": "8+", "resources.infra": "slurm/c/p1"}},
		{"short forms", "-N 2\n#SBATCH -c 8\n#SBATCH -p debug\n#SBATCH -t 30\n#SBATCH -J short\n#SBATCH -A acct\n#SBATCH -q low",
			map[string]any{"num_nodes": 2, "resources.cpus": "8+", "resources.infra": "slurm/c/debug", "name": "short",
				"config.slurm.sbatch_options.time": "30", "config.slurm.sbatch_options.account": "acct", "config.slurm.sbatch_options.qos": "low"}},
		{"short glued", "-N2 -c8 -pdebug", map[string]any{"num_nodes": 2, "resources.cpus": "8+", "resources.infra": "slurm/c/debug"}},
		{"gres typed", "--gres=gpu:a100:4", map[string]any{"resources.accelerators": "A100:4"}},
		{"gres raw type", "--gres=gpu:nvidia_h100_80gb_hbm3:2", map[string]any{"resources.accelerators": "nvidia_h100_80gb_hbm3:2"}},
		{"gpus over nodes", "-N 2 -G h100:16", map[string]any{"resources.accelerators": "H100:8", "num_nodes": 2}},
		{"gpus-per-node typed", "--gpus-per-node=l4:2", map[string]any{"resources.accelerators": "L4:2"}},
		{"gpus per task", "--ntasks-per-node=4 --gpus-per-task=1 --gres=gpu:h100:0", map[string]any{"resources.accelerators": "H100:4"}},
		{"memory K", "--mem=2097152K", map[string]any{"resources.memory": "2+"}},
		{"memory T", "--mem=1T", map[string]any{"resources.memory": "1024+"}},
		{"memory M fraction", "--mem=512M", map[string]any{"resources.memory": "0.5+"}},
		{"mem per cpu", "-c 8 --mem-per-cpu=2G", map[string]any{"resources.memory": "16+", "resources.cpus": "8+"}},
		{"mem per gpu", "--gpus-per-node=h100:2 --mem-per-gpu=40G", map[string]any{"resources.memory": "80+"}},
		{"cpus per gpu", "--gpus-per-node=h100:2 --cpus-per-gpu=6", map[string]any{"resources.cpus": "12+"}},
		{"tasks times cpus", "--ntasks-per-node=4 -c 2", map[string]any{"resources.cpus": "8+"}},
		{"unmodelled", "--exclusive --constraint=ib --reservation=r1 --mail-type=ALL --mail-user=a@b.c --comment=\"two words\" --begin=now+1hour --nice=10",
			map[string]any{"config.slurm.sbatch_options.exclusive": true, "config.slurm.sbatch_options.constraint": "ib",
				"config.slurm.sbatch_options.reservation": "r1", "config.slurm.sbatch_options.mail-type": "ALL",
				"config.slurm.sbatch_options.mail-user": "a@b.c", "config.slurm.sbatch_options.comment": "two words",
				"config.slurm.sbatch_options.begin": "now+1hour", "config.slurm.sbatch_options.nice": "10"}},
		{"exclusive value", "--exclusive=user", map[string]any{"config.slurm.sbatch_options.exclusive": "user"}},
		{"later wins", "--qos=a\n#SBATCH --qos=b", map[string]any{"config.slurm.sbatch_options.qos": "b"}},
		{"comment after", "--time=10:00 # ten minutes", map[string]any{"config.slurm.sbatch_options.time": "10:00"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := "#!/bin/bash\n#SBATCH " + tc.directives + "\necho hi\n"
			m, r := convertText(t, script, Options{Cluster: "c"})
			for k, v := range tc.want {
				if got := field(m, k); got != v {
					t.Errorf("%s = %#v, want %#v\n%s", k, got, v, r.YAML)
				}
			}
		})
	}
}

func TestTimeForms(t *testing.T) {
	for _, ok := range []string{"30", "30:00", "1:30:00", "2-0", "2-12:00", "2-12:00:00"} {
		m, _ := convertText(t, "#SBATCH --time="+ok+"\necho\n", Options{})
		if field(m, "config.slurm.sbatch_options.time") != ok {
			t.Errorf("--time=%s not kept: %v", ok, m)
		}
	}
	for _, bad := range []string{"1h", "1:2:3:4", "x", "1-", "-1"} {
		_, err := Convert(Script{Path: "j", Text: "#SBATCH --time=" + bad + "\necho\n"}, Options{})
		if err == nil || !strings.Contains(err.Error(), "is not a Slurm time limit") {
			t.Errorf("--time=%s: err = %v", bad, err)
		}
	}
	m, r := convertText(t, "#SBATCH --time=UNLIMITED\necho\n", Options{})
	if field(m, "config") != nil || !hasNote(r, false, "MaxTime") {
		t.Errorf("UNLIMITED: %s %v", r.YAML, r.Notes)
	}
}

// Protected options never reach sbatch_options; --output/--error are
// dropped with a note.
func TestProtectedAndDropped(t *testing.T) {
	script := "#SBATCH --output=o.txt\n#SBATCH --error=e.txt\n#SBATCH --requeue\n#SBATCH --no-requeue\n#SBATCH --wait-all-nodes=1\n#SBATCH --gres=gpu:2,nvme:1\n#SBATCH --export=NONE\n#SBATCH --hold\necho hi\n"
	m, r := convertText(t, script, Options{})
	if c := field(m, "config"); c != nil {
		t.Errorf("config = %v, want none", c)
	}
	for _, sub := range []string{"--output=o.txt dropped", "--error=e.txt dropped", "--requeue dropped", "--no-requeue dropped", "--wait-all-nodes=1 dropped", "nvme:1", "--export=NONE not converted", "--hold not converted"} {
		found := false
		for _, n := range r.Notes {
			found = found || strings.Contains(n.Text, sub)
		}
		if !found {
			t.Errorf("no note about %q: %v", sub, r.Notes)
		}
	}
	if field(m, "resources.accelerators") != "GPU:2" || !hasNote(r, true, "--gpu-type") {
		t.Errorf("untyped gres: %s", r.YAML)
	}
}

func TestInfra(t *testing.T) {
	script := "#SBATCH -p gpu\necho hi\n"
	for _, tc := range []struct {
		opts     Options
		want     string
		unmapped bool
	}{
		{Options{Cluster: "x"}, "slurm/x/gpu", false},
		{Options{Hosts: []string{"only"}}, "slurm/only/gpu", false},
		{Options{Hosts: []string{"a", "b"}, Cluster: "b"}, "slurm/b/gpu", false},
		{Options{Hosts: []string{"a", "b"}}, "slurm", true},
		{Options{}, "slurm", true},
	} {
		m, r := convertText(t, script, tc.opts)
		if field(m, "resources.infra") != tc.want || hasNote(r, true, "--partition=gpu") != tc.unmapped {
			t.Errorf("%+v: infra %v, notes %v", tc.opts, field(m, "resources.infra"), r.Notes)
		}
	}
	m, _ := convertText(t, "echo hi\n", Options{Cluster: "x"})
	if field(m, "resources.infra") != "slurm/x" {
		t.Errorf("no partition: %v", m)
	}
}

func TestArrays(t *testing.T) {
	cases := []struct {
		spec    string
		n       int
		idLine  string
		throttl bool
	}{
		{"0-99", 100, "", false},
		{"0-15%4", 16, "", true},
		{"1-10:2", 5, "ARRAY_TASK_ID=$((1 + 2 * SKYPILOT_JOB_RANK))", false},
		{"5-9", 5, "ARRAY_TASK_ID=$((5 + SKYPILOT_JOB_RANK))", false},
		{"0,3,7", 3, "ARRAY_IDS=(0 3 7)\nARRAY_TASK_ID=${ARRAY_IDS[$SKYPILOT_JOB_RANK]}", false},
		{"0-2,8", 4, "ARRAY_IDS=(0 1 2 8)", false},
	}
	for _, tc := range cases {
		m, r := convertText(t, "#SBATCH --array="+tc.spec+"\npython x.py --i $SLURM_ARRAY_TASK_ID --n ${SLURM_ARRAY_TASK_COUNT}\n", Options{Output: "t.yaml"})
		run := field(m, "run").(string)
		if want := "sky jobs launch -n job --num-jobs " + itoa(tc.n) + " -y -d t.yaml"; r.Submit != want {
			t.Errorf("%s: submit %q, want %q", tc.spec, r.Submit, want)
		}
		if tc.idLine == "" {
			if run != "python x.py --i $SKYPILOT_JOB_RANK --n ${SKYPILOT_NUM_JOBS}\n" {
				t.Errorf("%s: run %q", tc.spec, run)
			}
		} else if !strings.HasPrefix(run, tc.idLine) || !strings.Contains(run, "--i $ARRAY_TASK_ID") {
			t.Errorf("%s: run %q", tc.spec, run)
		}
		if hasNote(r, true, "pool") != tc.throttl {
			t.Errorf("%s: throttle note: %v", tc.spec, r.Notes)
		}
		if !hasNote(r, false, "--num-jobs "+itoa(tc.n)) {
			t.Errorf("%s: no --num-jobs note: %v", tc.spec, r.Notes)
		}
	}
	for _, bad := range []string{"x", "5-1", "1-4:0", "0-3%0"} {
		if _, err := Convert(Script{Path: "j", Text: "#SBATCH --array=" + bad + "\necho\n"}, Options{}); err == nil {
			t.Errorf("--array=%s accepted", bad)
		}
	}
}

func itoa(n int) string {
	b, _ := yaml.Marshal(n)
	return strings.TrimSpace(string(b))
}

func TestDependencyAlone(t *testing.T) {
	_, r := convertText(t, "#SBATCH --dependency=afterok:123\necho\n", Options{})
	if !hasNote(r, true, "one managed pipeline") {
		t.Errorf("%v", r.Notes)
	}
	_, err := ConvertPipeline([]Script{{Path: "a", Text: "#SBATCH --array=0-3\necho\n"}, {Path: "b", Text: "echo\n"}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "--array cannot be one stage") {
		t.Errorf("array in pipeline: %v", err)
	}
	r, err = ConvertPipeline([]Script{{Path: "a.sbatch", Text: "echo\n"}, {Path: "b.sbatch", Text: "#SBATCH --dependency=afterany:1\necho\n"}, {Path: "a.sbatch", Text: "echo\n"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dag := loadsAsTask(t, "p", r.YAML)
	if dag.Tasks[2].Name != "a-2" || !hasNote(r, true, "afterany has no equivalent") {
		t.Errorf("%s %v", r.YAML, r.Notes)
	}
}

func TestSrunCases(t *testing.T) {
	cases := []struct {
		name, script, want string
		slurmOnly          bool
	}{
		{"plain single node", "srun -l python x.py > out.txt\n", "python x.py > out.txt\n", false},
		{"plain background", "#SBATCH -N 2\nsrun python a.py &\nsrun python b.py &\nwait\n", "python a.py &\npython b.py &\nwait\n", false},
		{"one node of two", "#SBATCH -N 2\nsrun -N1 -n1 python prep.py\n", "if [ \"$SKYPILOT_NODE_RANK\" == \"0\" ]; then\n  python prep.py\nfi\n", false},
		{"two of four", "#SBATCH -N 4\nsrun --nodes=2 python half.py\n", "if [ \"$SKYPILOT_NODE_RANK\" -lt 2 ]; then\n  python half.py\nfi\n", false},
		{"mpi binary", "#SBATCH -N 2\nsrun ./osu_latency\n", "if [ \"$SKYPILOT_NODE_RANK\" == \"0\" ]; then\n  srun --overlap \\\n    ./osu_latency\nfi\n", true},
		{"nccl tests", "#SBATCH -N 2\n#SBATCH --gres=gpu:h100:8\nsrun --ntasks-per-node=8 all_reduce_perf -b 8 -e 8G\n", "if [ \"$SKYPILOT_NODE_RANK\" == \"0\" ]; then\n  srun --overlap --ntasks-per-node=8 \\\n    all_reduce_perf -b 8 -e 8G\nfi\n", true},
		{"tasks from sbatch", "#SBATCH -N 2\n#SBATCH --ntasks-per-node=4\n#SBATCH -c 2\nsrun python worker.py\n", "if [ \"$SKYPILOT_NODE_RANK\" == \"0\" ]; then\n  srun --overlap \\\n    --ntasks-per-node=4 \\\n    --cpus-per-task=2 \\\n    python worker.py\nfi\n", true},
		{"step-scoped var kept in single quotes", "#SBATCH -N 2\nsrun --mpi=pmix bash -c 'echo $SLURM_PROCID' $SLURM_JOB_ID\n", "if [ \"$SKYPILOT_NODE_RANK\" == \"0\" ]; then\n  srun --overlap --mpi=pmix \\\n    bash -c 'echo $SLURM_PROCID' $SKYPILOT_TASK_ID\nfi\n", true},
		{"python -m torch.distributed.run", "#SBATCH -N 2\n#SBATCH --gpus-per-node=h100:8\nsrun python -m torch.distributed.run --nproc_per_node=8 train.py --lr 1e-4\n",
			"MASTER_ADDR=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\npython -m torch.distributed.run \\\n  --nnodes=$SKYPILOT_NUM_NODES \\\n  --nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE \\\n  --node_rank=$SKYPILOT_NODE_RANK \\\n  --master_addr=$MASTER_ADDR \\\n  --master_port=8008 \\\n  train.py --lr 1e-4\n", false},
		{"torchrun cpu keeps nproc", "#SBATCH -N 2\nsrun torchrun --nproc-per-node=4 --master-port=29500 t.py\n",
			"MASTER_ADDR=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\ntorchrun \\\n  --nnodes=$SKYPILOT_NUM_NODES \\\n  --nproc_per_node=4 \\\n  --node_rank=$SKYPILOT_NODE_RANK \\\n  --master_addr=$MASTER_ADDR \\\n  --master_port=29500 \\\n  t.py\n", false},
		{"deepspeed", "#SBATCH -N 2\n#SBATCH --gres=gpu:a100:8\nsrun deepspeed --hostfile hosts.txt train.py --deepspeed ds.json\n",
			"MASTER_ADDR=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\ndeepspeed \\\n  --num_nodes=$SKYPILOT_NUM_NODES \\\n  --num_gpus=$SKYPILOT_NUM_GPUS_PER_NODE \\\n  --node_rank=$SKYPILOT_NODE_RANK \\\n  --master_addr=$MASTER_ADDR \\\n  --master_port=8008 \\\n  --no_ssh \\\n  train.py --deepspeed ds.json\n", false},
		{"accelerate", "#SBATCH -N 2\n#SBATCH --gres=gpu:a100:8\nsrun accelerate launch --multi_gpu --num_processes 16 train.py\n",
			"MASTER_ADDR=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\naccelerate launch \\\n  --num_machines=$SKYPILOT_NUM_NODES \\\n  --num_processes=$((SKYPILOT_NUM_NODES * SKYPILOT_NUM_GPUS_PER_NODE)) \\\n  --machine_rank=$SKYPILOT_NODE_RANK \\\n  --main_process_ip=$MASTER_ADDR \\\n  --main_process_port=8008 \\\n  --multi_gpu \\\n  train.py\n", false},
		{"inside a loop", "for s in 1 2; do\n  srun python x.py --seed $s\ndone\n", "for s in 1 2; do\n  python x.py --seed $s\ndone\n", false},
		{"env prefix", "NCCL_DEBUG=INFO srun python x.py\n", "NCCL_DEBUG=INFO python x.py\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, r := convertText(t, tc.script, Options{})
			if got := field(m, "run"); got != tc.want {
				t.Errorf("run:\n%s\nwant:\n%s", got, tc.want)
			}
			if r.SlurmOnly != tc.slurmOnly {
				t.Errorf("SlurmOnly = %v", r.SlurmOnly)
			}
		})
	}
}

func TestVariables(t *testing.T) {
	script := `#SBATCH -N 2
echo $SLURM_JOB_NODELIST ${SLURM_NNODES} $SLURM_JOB_NUM_NODES $SLURM_NODEID $SLURM_PROCID
echo $SLURM_GPUS_PER_NODE $SLURM_JOB_ID ${SLURM_JOBID} ${SLURM_CPUS_PER_TASK:-1} ${SLURM_NNODES:-1}
echo $SLURM_LOCALID $SLURM_SUBMIT_DIR $SLURM_LOCALID
HEAD=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -1)
ALL=$(scontrol show hostnames)
squeue -u $USER
`
	m, r := convertText(t, script, Options{})
	want := `echo $SKYPILOT_NODE_IPS ${SKYPILOT_NUM_NODES} $SKYPILOT_NUM_NODES $SKYPILOT_NODE_RANK $SKYPILOT_NODE_RANK
echo $SKYPILOT_NUM_GPUS_PER_NODE $SKYPILOT_TASK_ID ${SKYPILOT_TASK_ID} $(nproc) ${SKYPILOT_NUM_NODES:-1}
echo $SLURM_LOCALID $HOME/sky_workdir $SLURM_LOCALID
HEAD=$(echo "$SKYPILOT_NODE_IPS" | head -n1)
ALL=$(echo "$SKYPILOT_NODE_IPS")
if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
  squeue -u $USER
fi
`
	if got := field(m, "run"); got != want {
		t.Errorf("run:\n%s\nwant:\n%s", got, want)
	}
	for _, sub := range []string{"$SLURM_LOCALID has no SkyPilot equivalent", "`squeue` talks to Slurm"} {
		if !hasNote(r, true, sub) {
			t.Errorf("no unmapped note %q: %v", sub, r.Notes)
		}
	}
	if !hasNote(r, false, "$SLURM_SUBMIT_DIR became $HOME/sky_workdir") {
		t.Errorf("no note on SLURM_SUBMIT_DIR: %v", r.Notes)
	}
	n := 0
	for _, note := range r.Notes {
		if strings.Contains(note.Text, "$SLURM_LOCALID has no") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("SLURM_LOCALID reported %d times", n)
	}
}

func TestBody(t *testing.T) {
	script := `#!/bin/bash
# A job.
#SBATCH -N 2
#SBATCH -D /shared/proj

# env
module load cuda
export A=1 B="two words"
export PATH=$HOME/bin:$PATH
source venv/bin/activate
pip install -e .
mkdir -p out
cat > cfg.json <<EOF
{"nodes": $SLURM_NNODES}
EOF
srun python train.py
python report.py
export A=3
`
	m, r := convertText(t, script, Options{})
	if field(m, "envs.A") != "1" || field(m, "envs.B") != "two words" {
		t.Errorf("envs: %v", field(m, "envs"))
	}
	wantSetup := `type module >/dev/null 2>&1 || source /etc/profile
cd /shared/proj
module load cuda
export PATH=$HOME/bin:$PATH
source venv/bin/activate
pip install -e .
`
	if got := field(m, "setup"); got != wantSetup {
		t.Errorf("setup:\n%s\nwant:\n%s", got, wantSetup)
	}
	wantRun := `type module >/dev/null 2>&1 || source /etc/profile
cd /shared/proj
# env
module load cuda
export PATH=$HOME/bin:$PATH
source venv/bin/activate
mkdir -p out
if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
cat > cfg.json <<EOF
{"nodes": $SKYPILOT_NUM_NODES}
EOF
fi
python train.py
if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
  python report.py
fi
export A=3
`
	if got := field(m, "run"); dropBlank(got.(string)) != wantRun {
		t.Errorf("run:\n%s\nwant:\n%s", got, wantRun)
	}
	if !hasNote(r, false, "guarded to run on rank 0 only (lines 13, 17)") {
		t.Errorf("%v", r.Notes)
	}
	if _, err := Convert(Script{Path: "j", Text: "#!/bin/bash\n#SBATCH -N 1\n# nothing\n"}, Options{}); err == nil || !strings.Contains(err.Error(), "nothing to run") {
		t.Errorf("empty body: %v", err)
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{"my job": "my-job", "a__b": "a__b", "x!!y": "x-y", "-lead": "lead", "***": "slurm-job"} {
		if got := cleanName(in); got != want {
			t.Errorf("cleanName(%q) = %q, want %q", in, got, want)
		}
	}
	m, _ := convertText(t, "echo\n", Options{})
	if field(m, "name") != "job" {
		t.Errorf("default name = %v, want the script's", field(m, "name"))
	}
}

func TestLateDirectiveIgnored(t *testing.T) {
	m, r := convertText(t, "echo start\n#SBATCH --nodes=4\necho\n", Options{})
	if field(m, "num_nodes") != nil || !hasNote(r, false, "sbatch ignored it") {
		t.Errorf("%s %v", r.YAML, r.Notes)
	}
}

// The run of a multi-node script, executed as SkyPilot would on rank 0
// and rank 1, with stand-ins for the programs: srun's work runs on every
// node, the rest of the batch script on rank 0 only, and variables
// resolve to SkyPilot's.
func TestRunExecutes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --array=3-4\n" +
		"echo start\n" +
		"HEAD=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)\n" +
		"srun python train.py --node $SLURM_NODEID --head $HEAD --idx $SLURM_ARRAY_TASK_ID\n" +
		"srun -N1 python once.py\n" +
		"python report.py\n"
	m, _ := convertText(t, script, Options{})
	run := field(m, "run").(string)
	bin := t.TempDir()
	stub := "#!/bin/sh\necho \"python $*\"\n"
	if err := os.WriteFile(filepath.Join(bin, "python"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	for rank, want := range map[string]string{
		"0": "start\npython train.py --node 0 --head 10.0.0.1 --idx 4\npython once.py\npython report.py\n",
		"1": "start\npython train.py --node 1 --head 10.0.0.1 --idx 4\n",
	} {
		cmd := exec.Command(bash, "-c", run)
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "SKYPILOT_NODE_RANK=" + rank, "SKYPILOT_NODE_IPS=10.0.0.1\n10.0.0.2",
			"SKYPILOT_NUM_NODES=2", "SKYPILOT_JOB_RANK=1", "SKYPILOT_NUM_JOBS=2"}
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != want {
			t.Errorf("rank %s: %v\n%s\nwant:\n%s\nrun:\n%s", rank, err, out, want, run)
		}
	}
}

func TestArithmeticAndNodeList(t *testing.T) {
	m, r := convertText(t, "#SBATCH -N 3\n#SBATCH --tasks-per-node=1\nW=$((SLURM_JOB_NUM_NODES - 1 + SLURM_LOCALID))\nsrun -w \"$node\" ray start\nsrun -w node07 hostname\n", Options{})
	want := `W=$((SKYPILOT_NUM_NODES - 1 + SLURM_LOCALID))
if [ "$node" == "$(echo "$SKYPILOT_NODE_IPS" | sed -n "$((SKYPILOT_NODE_RANK + 1))p")" ]; then
  ray start
fi
if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
  hostname
fi
`
	if got := field(m, "run"); got != want {
		t.Errorf("run:\n%s\nwant:\n%s", got, want)
	}
	if field(m, "config") != nil || !hasNote(r, true, "$SLURM_LOCALID has no") || !hasNote(r, true, "node07") {
		t.Errorf("%s\n%v", r.YAML, r.Notes)
	}
}

// Compound commands: srun inside functions, if/else and case arms is
// translated; calls of a function that runs srun stay on every node; a
// pipeline ending in work is guarded.
func TestBlocks(t *testing.T) {
	script := `#!/bin/bash
#SBATCH -N 2
step() {
  echo "step $1"
  srun python step.py --n "$1"
}
if [ -f ckpt.pt ]; then
  srun python train.py --resume ckpt.pt
else
  time srun python train.py
fi
step 1
case "$MODE" in
  eval) srun -N1 python eval.py ;;
esac
for f in a b; do
  cp "$f" /shared/
done
echo "done $SLURM_JOB_ID" | mail -s done me@example.org
`
	m, r := convertText(t, script, Options{})
	want := `step() {
  echo "step $1"
  python step.py --n "$1"
}
if [ -f ckpt.pt ]; then
  python train.py --resume ckpt.pt
else
  time python train.py
fi
step 1
case "$MODE" in
  eval) if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
  python eval.py
fi ;;
esac
if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
  for f in a b; do
    cp "$f" /shared/
  done
  echo "done $SKYPILOT_TASK_ID" | mail -s done me@example.org
fi
`
	if got := field(m, "run"); got != want {
		t.Errorf("run:\n%s\nwant:\n%s", got, want)
	}
	for _, n := range r.Notes {
		if n.Unmapped {
			t.Errorf("unexpected: %s", n)
		}
	}
}

func TestHostfileAndMpirun(t *testing.T) {
	m, r := convertText(t, "#SBATCH -N 2\nscontrol show hostnames > hosts.txt\nmpirun -np 8 --hostfile hosts.txt ./a.out\n", Options{})
	want := "if [ \"$SKYPILOT_NODE_RANK\" == \"0\" ]; then\n  echo \"$SKYPILOT_NODE_IPS\" > hosts.txt\n  mpirun -np 8 --hostfile hosts.txt ./a.out\nfi\n"
	if got := field(m, "run"); got != want {
		t.Errorf("run:\n%s\nwant:\n%s", got, want)
	}
	if !hasNote(r, true, "SLURM_OVERLAP=1") {
		t.Errorf("%v", r.Notes)
	}
}
