package api

import (
	"encoding/json"
	"testing"
)

// The JSON of these records is read by SkyPilot clients and scripts, so
// their encodings are pinned here byte for byte.
func TestRecordEncodings(t *testing.T) {
	yes, started := true, 2.5
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"request", Request{RequestID: "r1", Name: "sky.launch", Status: RequestRunning, CreatedAt: 1},
			`{"request_id":"r1","name":"sky.launch","entrypoint":"","request_body":"","status":"RUNNING","created_at":1,` +
				`"finished_at":null,"user_id":"","user_name":"","return_value":"","error":"","pid":null,"schedule_type":"",` +
				`"cluster_name":"","status_msg":"","should_retry":false,"file_mounts_blob_id":""}`},
		{"request started", Request{StartedAt: &started},
			`{"request_id":"","name":"","entrypoint":"","request_body":"","status":"","created_at":0,"started_at":2.5,` +
				`"finished_at":null,"user_id":"","user_name":"","return_value":"","error":"","pid":null,"schedule_type":"",` +
				`"cluster_name":"","status_msg":"","should_retry":false,"file_mounts_blob_id":""}`},
		{"probe health", Health{Status: "healthy"}, `{"status":"healthy"}`},
		{"health", Health{Status: "healthy", APIVersion: "1", BasicAuthEnabled: &yes, User: &User{ID: "ab", Name: "me"}},
			`{"status":"healthy","api_version":"1","basic_auth_enabled":true,"user":{"id":"ab","name":"me"}}`},
		{"gpus", GPUsResult{Table: "t\n", JSON: json.RawMessage(`{ }`)}, `{"json":{},"table":"t\n"}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
	}
}

func TestRequestStatusFinal(t *testing.T) {
	for s, final := range map[RequestStatus]bool{RequestPending: false, RequestRunning: false,
		RequestSucceeded: true, RequestFailed: true, RequestCancelled: true} {
		if s.Final() != final {
			t.Errorf("%s.Final() = %v", s, !final)
		}
	}
}

func TestPortFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
		ok   bool
	}{{"", DefaultPort, true}, {" 47001 ", 47001, true}, {"0", 0, false}, {"65536", 0, false}, {"x", 0, false}} {
		t.Setenv(EnvPort, tc.env)
		got, err := PortFromEnv()
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("%s=%q: got %d, %v", EnvPort, tc.env, got, err)
		}
	}
}
