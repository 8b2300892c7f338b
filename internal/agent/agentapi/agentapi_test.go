package agentapi

import (
	"encoding/json"
	"testing"
)

func TestExitCodes(t *testing.T) {
	want := map[Status]int{StatusSucceeded: 0, StatusFailed: 100, StatusFailedSetup: 100, StatusFailedDriver: 100,
		StatusCancelled: 103, StatusRunning: 101, StatusPending: 101, StatusInit: 101, StatusSettingUp: 101}
	for s, code := range want {
		if got := s.ExitCode(); got != code {
			t.Errorf("%s.ExitCode() = %d, want %d", s, got, code)
		}
	}
}

// The backend of an older or newer server reads what this agent prints,
// so the answers' encodings are pinned byte for byte.
func TestAnswerEncodings(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{SubmitResult{JobID: 3}, `{"job_id":3}`},
		{CancelResult{Cancelled: []int{1, 2}}, `{"cancelled":[1,2]}`},
		{CancelResult{}, `{"cancelled":null}`},
		{Failure{Error: "no such job", Code: "bad_request"}, `{"error":"no such job","code":"bad_request"}`},
		{StatusReport{Jobs: []Job{}}, `{"daemon":{"alive":false},"jobs":[]}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%T: got %s (%v), want %s", tc.v, b, err, tc.want)
		}
	}
}

func TestAutostopIdle(t *testing.T) {
	for _, tc := range []struct {
		cfg     AutostopConfig
		enabled bool
		idle    string
	}{
		{AutostopConfig{IdleMinutes: -1}, false, "-1m0s"},
		{AutostopConfig{IdleMinutes: 0}, true, "0s"},
		{AutostopConfig{IdleMinutes: 5}, true, "5m0s"},
		{AutostopConfig{IdleMinutes: -1, IdleSeconds: 30}, true, "30s"},
	} {
		if tc.cfg.Enabled() != tc.enabled || tc.cfg.Idle().String() != tc.idle {
			t.Errorf("%+v: Enabled %v, Idle %s; want %v, %s", tc.cfg, tc.cfg.Enabled(), tc.cfg.Idle(), tc.enabled, tc.idle)
		}
	}
}
