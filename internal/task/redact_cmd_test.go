package task

import (
	"strings"
	"testing"
)

func TestRedactCommandLine(t *testing.T) {
	tests := []struct {
		name, in string
		values   []string
		want     string
	}{
		{name: "flag and value apart", in: "sky launch -c x --secret TOKEN=hunter2 t.yaml", want: "sky launch -c x --secret TOKEN=<redacted> t.yaml"},
		{name: "flag with equals", in: "sky exec x --secret=TOKEN=hunter2 t.yaml", want: "sky exec x --secret=TOKEN=<redacted> t.yaml"},
		{name: "value shorter than a redactor catches", in: "sky launch --secret A=1", want: "sky launch --secret A=<redacted>"},
		{name: "value with spaces known from the task", in: "sky launch --secret K=a long pass t.yaml", values: []string{"a long pass"}, want: "sky launch --secret K=<redacted> t.yaml"},
		{name: "value from a secret file appearing elsewhere", in: "sky launch -- echo s3cr3tfile", values: []string{"s3cr3tfile"}, want: "sky launch -- echo <redacted>"},
		{name: "secret-file path is kept", in: "sky launch --secret-file ./s.env --env A=b", want: "sky launch --secret-file ./s.env --env A=b"},
		{name: "local value form has nothing to hide", in: "sky launch --secret TOKEN t.yaml", want: "sky launch --secret TOKEN t.yaml"},
		{name: "already redacted stays so", in: "sky launch --secret K=<redacted>", want: "sky launch --secret K=<redacted>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactCommandLine(tt.in, tt.values...)
			if got != tt.want {
				t.Fatalf("RedactCommandLine(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, v := range tt.values {
				if strings.Contains(got, v) {
					t.Fatalf("%q still holds %q", got, v)
				}
			}
		})
	}
}
