package provision

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"
)

func TestQuoteRoundTripsThroughBash(t *testing.T) {
	words := []string{"", "plain", "a b", "it's", `"dq"`, "$HOME", "`id`", "a\nb", "*", "-n", "x;rm -rf /", "\\", "ünï"}
	for _, w := range words {
		out, err := exec.Command("bash", "-c", "printf %s "+Quote(w)).Output()
		if err != nil {
			t.Fatalf("bash failed for %q: %v", w, err)
		}
		if string(out) != w {
			t.Errorf("Quote(%q) = %s; bash printed %q", w, Quote(w), out)
		}
	}
	if got := Join("echo", "a b", "c"); got != "echo 'a b' c" {
		t.Errorf("Join = %q", got)
	}
}

func TestQuoteHomePath(t *testing.T) {
	tests := map[string]string{"~": "~", "~/a b": "~/'a b'", "/x y": "'/x y'", "~user": "'~user'"}
	for in, want := range tests {
		if got := QuoteHomePath(in); got != want {
			t.Errorf("QuoteHomePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorsAreDistinguishable(t *testing.T) {
	cause := errors.New("boom")
	errs := []error{
		fmt.Errorf("provisioning: %w", &CapacityError{Where: "local", Msg: "full", Err: cause}),
		fmt.Errorf("provisioning: %w", &AuthError{Where: "aws", Msg: "bad key"}),
		fmt.Errorf("provisioning: %w", &ConfigError{Where: "local", Msg: "bad"}),
		fmt.Errorf("provisioning: %w", &NotSupportedError{Where: "local", Operation: "stop"}),
	}
	var c *CapacityError
	var a *AuthError
	var cfg *ConfigError
	var ns *NotSupportedError
	got := [][4]bool{}
	for _, e := range errs {
		got = append(got, [4]bool{errors.As(e, &c), errors.As(e, &a), errors.As(e, &cfg), errors.As(e, &ns)})
	}
	for i := range errs {
		for j := 0; j < 4; j++ {
			if got[i][j] != (i == j) {
				t.Errorf("error %d matched type %d = %v", i, j, got[i][j])
			}
		}
	}
	if !errors.Is(errs[0], cause) {
		t.Error("CapacityError does not unwrap to its cause")
	}
	if want := "provisioning: no capacity on local: full: boom"; errs[0].Error() != want {
		t.Errorf("message = %q, want %q", errs[0].Error(), want)
	}
}

func TestHomePath(t *testing.T) {
	for in, want := range map[string]string{"~": "/home/u", "~/a b": "/home/u/a b", "rel/x": "/home/u/rel/x", "/abs": "/abs"} {
		if got := HomePath("/home/u", in); got != want {
			t.Errorf("HomePath(%q) = %q, want %q", in, got, want)
		}
	}
}
