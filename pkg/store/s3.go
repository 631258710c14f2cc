package store

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// Retry policy for object-store calls: transient failures (5xx,
// throttling, timeouts, connection resets; the AWS SDK's standard
// retryable set) are retried up to MaxAttempts times in all, with
// exponential backoff and full jitter capped at MaxBackoff. The SDK's
// retry quota is off: a flaky network must slow a migration, not fail it.
const (
	MaxAttempts = 10
	MaxBackoff  = 5 * time.Second
)

// retries counts the object-store retries of this process.
var retries atomic.Int64

// Retries returns how many object-store requests this process retried.
func Retries() int64 { return retries.Load() }

// countingRetryer counts each retry the SDK decides to make.
type countingRetryer struct{ aws.RetryerV2 }

func (c countingRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, rerr := c.RetryerV2.RetryDelay(attempt, err)
	if rerr == nil {
		retries.Add(1)
	}
	return d, rerr
}

// openS3 opens an s3:// location with ferry's retry policy. It accepts the
// query parameters of gocloud.dev's s3blob URL opener (use_path_style,
// disable_https, accelerate, ssetype, kmskeyid, and the AWS ones: region,
// endpoint, profile, ...); see https://gocloud.dev/howto/blob/#s3.
func openS3(ctx context.Context, u *url.URL, creds map[string]string) (*blob.Bucket, error) {
	q := u.Query()
	var s3opts []func(*s3.Options)
	bopts := &s3blob.Options{}
	for _, key := range []string{"use_path_style", "s3ForcePathStyle", "disable_https", "accelerate"} {
		v := q.Get(key)
		if v == "" {
			continue
		}
		q.Del(key)
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("query parameter %s=%q: %w", key, v, err)
		}
		switch key {
		case "use_path_style", "s3ForcePathStyle":
			s3opts = append(s3opts, func(o *s3.Options) { o.UsePathStyle = b })
		case "disable_https":
			s3opts = append(s3opts, func(o *s3.Options) { o.EndpointOptions.DisableHTTPS = b })
		case "accelerate":
			s3opts = append(s3opts, func(o *s3.Options) { o.UseAccelerate = b })
		}
	}
	if v := q.Get("ssetype"); v != "" {
		q.Del("ssetype")
		bopts.EncryptionType = types.ServerSideEncryption(v)
	}
	if v := q.Get("kmskeyid"); v != "" {
		q.Del("kmskeyid")
		bopts.KMSEncryptionID = v
	}
	q.Del("awssdk")
	prefix := q.Get("prefix")
	q.Del("prefix")
	if creds[EnvAWSRegion] != "" && q.Get("region") == "" {
		q.Set("region", creds[EnvAWSRegion])
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	if creds[EnvAWSAccessKeyID] != "" {
		cfg.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(creds[EnvAWSAccessKeyID], creds[EnvAWSSecretAccessKey], creds[EnvAWSSessionToken]))
	}
	cfg.Retryer = func() aws.Retryer {
		return countingRetryer{retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = MaxAttempts
			o.MaxBackoff = MaxBackoff
			o.RateLimiter = ratelimit.None
		})}
	}
	bopts.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	b, err := s3blob.OpenBucket(ctx, s3.NewFromConfig(cfg, s3opts...), u.Host, bopts)
	if err != nil || prefix == "" {
		return b, err
	}
	return blob.PrefixedBucket(b, prefix), nil
}
