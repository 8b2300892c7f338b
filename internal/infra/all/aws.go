//go:build !skygo_omit_aws

package all

import _ "github.com/skygo/skygo/internal/infra/aws" // EC2, through the AWS SDK
