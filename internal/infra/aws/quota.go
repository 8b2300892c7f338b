package aws

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"

	"github.com/skygo/skygo/internal/provision"
)

// EC2's vCPU quota codes (Service Quotas, service "ec2") by instance
// family group, on-demand and spot. These are AWS's public codes.
var quotaCodes = []struct {
	families   *regexp.Regexp
	onDemand   string
	spot       string
	groupLabel string
}{
	{regexp.MustCompile(`^(g|vt)[0-9]`), "L-DB2E81BA", "L-3819A6DF", "G and VT"},
	{regexp.MustCompile(`^p[0-9]`), "L-417A185B", "L-7212CCBC", "P"},
	{regexp.MustCompile(`^f[0-9]`), "L-74FC7D96", "L-88CF9481", "F"},
	{regexp.MustCompile(`^x[0-9]`), "L-7295265B", "L-E3A00192", "X"},
	{regexp.MustCompile(`^inf[0-9]`), "L-1945791B", "L-B5D1601B", "Inf"},
	{regexp.MustCompile(`^dl[0-9]`), "L-6E869C2A", "L-85EED4F7", "DL"},
	{regexp.MustCompile(`^trn[0-9]`), "L-2C3B7624", "L-6B0D517C", "Trn"},
	{regexp.MustCompile(`^(a|c|d|h|i|m|r|t|z)[0-9]`), "L-1216C47A", "L-34B43A08", "Standard"},
}

// quotaCode is the vCPU quota an instance type counts against, "" when
// no code is known (the launch then just proceeds).
func quotaCode(instanceType string, spot bool) (code, label string) {
	family, _, _ := strings.Cut(instanceType, ".")
	for _, q := range quotaCodes {
		if q.families.MatchString(family) {
			if spot {
				return q.spot, q.groupLabel + " spot"
			}
			return q.onDemand, q.groupLabel + " on-demand"
		}
	}
	return "", ""
}

// checkQuota skips a region whose quota for the instance type is zero,
// before any EC2 call, as SkyPilot does. An unknown code, an API error
// (a service or an emulator without Service Quotas) or a quota above
// zero lets the launch proceed: EC2 itself then has the last word.
func (p *Provisioner) checkQuota(ctx context.Context, ss *session, spec provision.ClusterSpec) error {
	code, label := quotaCode(spec.Resources.InstanceType, spec.UseSpot)
	if code == "" {
		return nil
	}
	c := servicequotas.NewFromConfig(ss.cfg, func(o *servicequotas.Options) { o.Region = p.region; o.RetryMaxAttempts = 2 })
	out, err := c.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String(code)})
	if err != nil || out.Quota == nil || out.Quota.Value == nil || *out.Quota.Value > 0 {
		return nil
	}
	return &provision.CapacityError{Where: p.where(), Msg: fmt.Sprintf(
		"the %s vCPU quota (%s) for %s is 0 in %s; request an increase in the Service Quotas console, or use another region or instance type",
		label, code, spec.Resources.InstanceType, p.region)}
}
