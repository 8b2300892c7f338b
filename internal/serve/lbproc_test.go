package serve

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSuperviseLB: a load balancer is started again only when no process
// of it lives; one that lives but does not answer is left alone, however
// long a single call went unanswered, until it has answered none of
// lbWedgedTries calls in a row over lbWedgedAfter.
func TestSuperviseLB(t *testing.T) {
	for _, tc := range []struct {
		name string
		seen lbSeen
		want lbAction
	}{
		{"answers", lbSeen{answered: true}, lbAdopt},
		{"answers after a long silence", lbSeen{answered: true, silent: 40, silentFor: time.Hour}, lbAdopt},
		{"dead: no process", lbSeen{silent: 1}, lbStart},
		{"dead after a silence", lbSeen{silent: 3, silentFor: 30 * time.Second}, lbStart},
		{"slow: one call timed out", lbSeen{live: 1, silent: 1}, lbWait},
		{"slow for longer than the old 5 s limit", lbSeen{live: 1, silent: 3, silentFor: 20 * time.Second}, lbWait},
		{"many calls, short window", lbSeen{live: 1, silent: lbWedgedTries + 5, silentFor: lbWedgedAfter - time.Second}, lbWait},
		{"long window, few calls", lbSeen{live: 1, silent: lbWedgedTries - 1, silentFor: 2 * lbWedgedAfter}, lbWait},
		{"starting: alive, no socket yet", lbSeen{live: 1, silent: 1, silentFor: 0}, lbWait},
		{"two alive (one draining), none answers", lbSeen{live: 2, silent: 2, silentFor: 10 * time.Second}, lbWait},
		{"wedged", lbSeen{live: 1, silent: lbWedgedTries, silentFor: lbWedgedAfter}, lbReplace},
	} {
		if got := superviseLB(tc.seen); got != tc.want {
			t.Errorf("%s: %+v → %s, want %s", tc.name, tc.seen, got, tc.want)
		}
	}
}

// TestControlTimeout: each call after an unanswered one waits longer, up
// to a bound, so a slow load balancer gets ever more time to answer.
func TestControlTimeout(t *testing.T) {
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second, 16 * time.Second}
	for i, w := range want {
		if got := controlTimeout(i); got != w {
			t.Errorf("controlTimeout(%d) = %s, want %s", i, got, w)
		}
	}
	// The calls before a kill span more than the old 5 s limit many times.
	var total time.Duration
	for i := range lbWedgedTries {
		total += controlTimeout(i)
	}
	if total < time.Minute {
		t.Errorf("%d calls wait %s in all before a load balancer can count as wedged", lbWedgedTries, total)
	}
}

// TestChoosePort: the first port from 30001 no service holds and nothing
// listens on; an error naming the range when there is none.
func TestChoosePort(t *testing.T) {
	all := func(int) bool { return true }
	for _, tc := range []struct {
		name string
		held map[int]string
		free func(int) bool
		want int
	}{
		{"first", nil, all, 30001},
		{"held by a service whose load balancer is down right now", map[int]string{30001: "a"}, all, 30002},
		{"in use on the machine", nil, func(p int) bool { return p != 30001 && p != 30002 }, 30003},
		{"both", map[int]string{30001: "a", 30003: "b"}, func(p int) bool { return p != 30002 }, 30004},
	} {
		got, err := choosePort(tc.held, tc.free)
		if err != nil || got != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.name, got, err, tc.want)
		}
	}
	_, err := choosePort(nil, func(int) bool { return false })
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("from %d to %d", firstLBPort, firstLBPort+lbPortRange-1)) {
		t.Errorf("no free port: %v", err)
	}
}

// TestLBCmdline: a load balancer is this service's by its name and its
// control socket (another HOME's service of the same name has another).
func TestLBCmdline(t *testing.T) {
	cmd := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }
	for _, tc := range []struct {
		raw  []byte
		want bool
	}{
		{cmd("/bin/sky", "serve-lb", "--service", "svc", "--listen", "127.0.0.1:30001", "--control", "/h/lb.sock"), true},
		{cmd("/bin/sky", "serve-lb", "--service", "svc", "--control", "/other/lb.sock"), false},
		{cmd("/bin/sky", "serve-lb", "--service", "svc2", "--control", "/h/lb.sock"), false},
		{cmd("/bin/sky", "serve", "--service", "svc", "--control", "/h/lb.sock"), false},
		{nil, false}, // a zombie
	} {
		if got := lbCmdline(tc.raw, "svc", "/h/lb.sock"); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.raw, got, tc.want)
		}
	}
}
