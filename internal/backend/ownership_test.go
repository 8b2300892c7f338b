package backend

import (
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/state"
)

func TestMayUseVolume(t *testing.T) {
	alices := &state.Volume{Name: "data", UserHash: "a11ce000", UserName: "alice"}
	legacy := &state.Volume{Name: "old"}
	for _, c := range []struct {
		name string
		v    *state.Volume
		u    User
		want bool
	}{
		{"owner", alices, User{Name: "alice", Hash: "a11ce000"}, true},
		{"another user", alices, User{Name: "bob", Hash: "b0b00000"}, false},
		{"another user of the same name", alices, User{Name: "alice", Hash: "0ther000"}, false},
		{"admin", alices, User{Name: "admin", Hash: "ad000000", Admin: true}, true},
		{"the server itself", alices, User{}, true},
		{"a record from before owners", legacy, User{Name: "bob", Hash: "b0b00000"}, true},
	} {
		if got := MayUseVolume(c.v, c.u); got != c.want {
			t.Errorf("%s: MayUseVolume = %v, want %v", c.name, got, c.want)
		}
	}
	if msg := VolumeOwnerError(alices, "delete").Error(); !strings.Contains(msg, "belongs to another user (alice)") || !strings.Contains(msg, "can delete it") {
		t.Errorf("message: %s", msg)
	}
}
