package agent

import (
	"reflect"
	"testing"
)

// An infrastructure's RankBase applies on the nodes it recognises, in
// registration order; elsewhere a rank starts from the environment as is.
func TestRankBases(t *testing.T) {
	saved := RankBases
	t.Cleanup(func() { RankBases = saved })
	RankBases = []RankBase{
		func(home string, env []string) ([]string, func(string) string, bool) {
			if home != "/batch" {
				return env, nil, false
			}
			return []string{"JOB=1"}, func(c string) string { return "dev" + c }, true
		},
		func(home string, env []string) ([]string, func(string) string, bool) {
			return []string{"SECOND=1"}, nil, home == "/batch" || home == "/other"
		},
	}
	env := []string{"PATH=/bin"}
	for _, c := range []struct {
		home    string
		want    []string
		ok      bool
		devices string // devices("0"); "" = no mapping
	}{
		{"/plain", env, false, ""},
		{"/batch", []string{"JOB=1"}, true, "dev0"},
		{"/other", []string{"SECOND=1"}, true, ""},
	} {
		got, devices, ok := rankBase(c.home, env)
		if !reflect.DeepEqual(got, c.want) || ok != c.ok || (devices == nil) != (c.devices == "") || (devices != nil && devices("0") != c.devices) {
			t.Errorf("%s: %v %v %v, want %v %v devices(0)=%q", c.home, got, ok, devices != nil, c.want, c.ok, c.devices)
		}
	}
}
