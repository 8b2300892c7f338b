package core

import (
	"bytes"
	"testing"
)

func TestRedactingLogCatchesSecretsAcrossWrites(t *testing.T) {
	var out bytes.Buffer
	w := newRedactingLog(&out, map[string]string{"HF_TOKEN": "hf_supersecret123"})
	for _, chunk := range []string{"token is hf_super", "secret123 ok\nnext ", "line hf_supersecret123"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(w)
	got := out.String()
	if bytes.Contains(out.Bytes(), []byte("hf_supersecret123")) || bytes.Contains(out.Bytes(), []byte("secret123")) {
		t.Fatalf("secret leaked: %q", got)
	}
	want := "token is <redacted> ok\nnext line <redacted>"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestRedactingLogPassesThroughWithoutSecrets(t *testing.T) {
	var out bytes.Buffer
	w := newRedactingLog(&out, nil)
	if _, err := w.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	if out.String() != "partial" {
		t.Fatalf("without secrets the log must be written through, got %q", out.String())
	}
}
