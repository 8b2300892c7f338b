package slurm

import "testing"

// The parsers read other programs' output, which SkyGo does not control:
// whatever arrives, they must return (an error at worst), never panic.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		"tihost1\x1fidle\x1fgpu:fake:4\x1f4\x1f4096\x1fcpu*\n",
		"PartitionName=cpu Default=YES MaxTime=UNLIMITED DefaultTime=NONE Nodes=tihost[1-3] State=UP\n",
		"NodeName=tihost1 NodeAddr=10.0.0.1 OS=Linux 6.1 #1 SMP Reason=x y=z\n",
		"gpu:a100:4(S:0,1),gpu:8,(null),gpu:x:1k,gpu::",
		"4CPU--16GB--H100:1", "1-2:3:4", "drain*+idle~", "(((,,,)))", "=", "gpu:(",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseSinfoNodes(s)
		_, _ = ParsePartitions(s)
		_ = ParseNodeAddrs(s)
		_ = ParseGRES(s)
		_, _ = ParseGresUsed(s)
		_ = SelectMemory(s)
		_, _, _, _, _ = ParseInstanceType(s)
		_, _ = FormatTime(s)
		_, _ = StateUsable(s)
		_ = CanonicalGPU(s)
		_, _ = ParseJobID(s)
	})
}
